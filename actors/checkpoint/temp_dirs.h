// actors/checkpoint/temp_dirs.h: the temp entries a save leaves in <save> — found, judged
// and, once their writer is gone, removed (issue 22: "temporary directories of killed saves
// are never removed ... repeated faults fill the disk").
//
// Names (docs/CHECKPOINTS.md "Directory layout"): a save in progress writes into
//   iter_{:07d}.tmp-<pid>-<counter>-<time>-<host>
// (<time>: nanoseconds since the Unix epoch, hex; <host>: the writer's host name, with
// characters outside [A-Za-z0-9._-] as '_'), and replaces the tracker through
//   latest_checkpointed_iteration.txt.tmp-<same suffix>.
// Names written before the host was added (iter_{:07d}.tmp-<pid>-<counter>-<time>) are
// read as "host unknown". iter_{:07d}.tmp-old-<suffix> holds a previous checkpoint moved
// aside while a file system without RENAME_EXCHANGE replaced it: it may be the only copy
// of that checkpoint, so it is listed but never removed.
#ifndef MXMACA_ACTORS_CHECKPOINT_TEMP_DIRS_H_
#define MXMACA_ACTORS_CHECKPOINT_TEMP_DIRS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mxmaca::actors::checkpoint {

// TempSuffix: a fresh "<pid>-<counter>-<time>-<host>" for this process: distinct across
// hosts, processes, threads and calls, and across restarts of a process with a recycled pid.
std::string TempSuffix();

// TempEntry: one temp entry of a save directory.
struct TempEntry {
  enum class Kind {
    kSave,     // iter_{:07d}.tmp-<suffix>/: a save in progress or killed before its commit
    kAside,    // iter_{:07d}.tmp-old-<suffix>/: a replaced checkpoint moved aside (kept)
    kTracker,  // latest_checkpointed_iteration.txt.tmp-<suffix>: a tracker not yet renamed
  };
  Kind kind = Kind::kSave;
  std::string name;                           // the entry's name in the save directory
  std::string path;                           // <save>/<name>
  int64_t iteration = -1;                     // from iter_{:07d} (-1 for kTracker)
  pid_t pid = 0;                              // the writer's pid (0 if the name does not say)
  std::string host;                           // the writer's host ("" if the name does not say)
  absl::Time created = absl::InfinitePast();  // when the writer named it
  // writer_alive: the writer may still be writing: its host is this one (or unknown) and
  // a process with its pid runs here and started before `created`; or its host is another
  // (which cannot be checked from here). False: the writer is gone.
  bool writer_alive = true;
  // Describe: e.g. "iter_0000020.tmp-4242-0-1876e0f1c2a3b4c5-node01 (a save of iteration 20
  // by pid 4242 on node01, gone)".
  std::string Describe() const;
};

// ListTempEntries: every temp entry of `save_dir`, sorted by name. A missing save_dir has
// none. Errors: the file system's, naming the directory.
absl::StatusOr<std::vector<TempEntry>> ListTempEntries(const std::string& save_dir);

// RemoveStaleTempEntries: removes the kSave and kTracker entries of `save_dir` whose writer
// is gone (!writer_alive), and returns them. With `exclusive` (the caller holds the save
// directory's SaveLock, so no other job writes there) every kSave / kTracker entry not
// written by this process is taken as gone, whatever host it names. Entries of this
// process are never removed (its own abandoned writers remove theirs), nor kAside ones.
// Errors: the file system's, naming the entry.
absl::StatusOr<std::vector<TempEntry>> RemoveStaleTempEntries(const std::string& save_dir,
                                                              bool exclusive);

}  // namespace mxmaca::actors::checkpoint

#endif  // MXMACA_ACTORS_CHECKPOINT_TEMP_DIRS_H_
