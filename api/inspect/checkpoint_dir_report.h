// api/inspect/checkpoint_dir_report.h: the directory section of `mxmaca
// inspect-checkpoint` (inspect_checkpoint_command.h): what a checkpoint directory holds as
// the trainer and the writer see it
// (docs/CHECKPOINTS.md "Directory layout"):
//   - the tracker file latest_checkpointed_iteration.txt and what it names;
//   - every iter_{:07d} directory: complete (metadata.json present; shard files, bytes) or
//     half-written;
//   - the --save lock (mxmaca-save.lock): held by a live job, left by one that is gone, or
//     free;
//   - temp entries of saves that never committed (iter_*.tmp-*), with their writer and
//     whether it is gone (then the next save removes them; actors/checkpoint/temp_dirs.h).
// It reads only names, sizes and the two small files: no shard is opened.
#ifndef MXMACA_API_INSPECT_CHECKPOINT_DIR_REPORT_H_
#define MXMACA_API_INSPECT_CHECKPOINT_DIR_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "actors/checkpoint/save_lock.h"
#include "actors/checkpoint/temp_dirs.h"

namespace mxmaca::api {

// CheckpointDirReport: the contents of one checkpoint directory.
struct CheckpointDirReport {
  std::string dir;
  // tracker: the tracker file's text (trimmed); nullopt when there is none.
  std::optional<std::string> tracker;
  struct Iteration {
    int64_t iteration = 0;
    std::string name;       // iter_{:07d}
    bool complete = false;  // metadata.json present
    int shard_files = 0;    // shard_*.safetensors
    uint64_t bytes = 0;     // all files in it
  };
  std::vector<Iteration> iterations;                              // ascending
  std::optional<actors::checkpoint::SaveLockHolder> lock_holder;  // the line in the lock file
  bool lock_held = false;  // a live process holds the flock now
  std::vector<actors::checkpoint::TempEntry> temp_entries;
};

// InspectCheckpointDir: reads `dir`. Errors: NotFound (naming it) when it does not exist or
// is not a directory; the file system's otherwise. A garbled lock file is reported in the
// lock line, not as an error.
absl::StatusOr<CheckpointDirReport> InspectCheckpointDir(const std::string& dir);

// RenderCheckpointDirReport: the report as text, one fact per line.
std::string RenderCheckpointDirReport(const CheckpointDirReport& report);

}  // namespace mxmaca::api

#endif  // MXMACA_API_INSPECT_CHECKPOINT_DIR_REPORT_H_
