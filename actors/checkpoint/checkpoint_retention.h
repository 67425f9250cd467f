// actors/checkpoint/checkpoint_retention.h: which checkpoints a directory holds, and
// removing old ones (Megatron's non-persistent checkpoints keep only the newest;
// --save-retain-interval keeps every K-th and the latest).
//
// Source: megatron/training/checkpointing.py (core_v0.19.0): read_metadata (the tracker
// file), cleanup_old_non_persistent_checkpoint, save_checkpoint's iter_finalize_fn and
// _async_delete_checkpoint_impl (--save-retain-interval).
#ifndef MXMACA_ACTORS_CHECKPOINT_CHECKPOINT_RETENTION_H_
#define MXMACA_ACTORS_CHECKPOINT_CHECKPOINT_RETENTION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mxmaca::actors::checkpoint {

// ReadTrackerIteration: the iteration named by `dir`/latest_checkpointed_iteration.txt;
// nullopt when `dir` or the file does not exist. Errors: DataLoss naming the file when it
// does not hold a non-negative decimal number (Unimplemented for Megatron's "release").
absl::StatusOr<std::optional<int64_t>> ReadTrackerIteration(const std::string& dir);

// CompleteIterations: the iterations of the published iter_{:07d} directories in `dir`
// (names of exactly that form; temp dirs of saves in progress are not counted), ascending.
// A missing `dir` has none.
std::vector<int64_t> CompleteIterations(const std::string& dir);

// RemoveOlderCheckpoints: removes every published iter_{:07d} directory in `dir` except
// the `keep` newest (Megatron's cleanup_old_non_persistent_checkpoint with
// leave_ckpt_num = keep, which runs before each non-persistent save). A missing `dir` is
// fine. Errors: Internal naming the directory that could not be removed.
absl::Status RemoveOlderCheckpoints(const std::string& dir, int keep);

// ApplySaveRetainInterval: --save-retain-interval `retain` (> 0), after the save of
// `iteration` into `dir` committed: the checkpoint the tracker named before that save,
// `previous` (ReadTrackerIteration just before the commit), is removed unless it is
// unset or 0, equals `iteration`, or is a multiple of `retain`; a symbolic link is left
// alone. Only the previous checkpoint is looked at, as in Megatron (so one saved before
// the flag was set, or by a run with another interval, stays). Returns Megatron's log line
// ("  successfully deleted checkpoint from iteration    NNNN at DIR", the symbolic-link
// skip, or the error: a failed removal is not fatal, as in Megatron), "" when nothing was
// to be removed.
std::string ApplySaveRetainInterval(const std::string& dir, std::optional<int64_t> previous,
                                    int64_t iteration, int64_t retain);

}  // namespace mxmaca::actors::checkpoint

#endif  // MXMACA_ACTORS_CHECKPOINT_CHECKPOINT_RETENTION_H_
