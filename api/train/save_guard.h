// api/train/save_guard.h: `mxmaca train --save DIR` takes DIR's lock before it trains
// (issue 22: one writer per --save directory; actors/checkpoint/save_lock.h) and clears the
// temp entries that killed saves left there (actors/checkpoint/temp_dirs.h).
#ifndef MXMACA_API_TRAIN_SAVE_GUARD_H_
#define MXMACA_API_TRAIN_SAVE_GUARD_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "actors/checkpoint/save_lock.h"
#include "transport/communicator.h"

namespace mxmaca::api {

// GuardSaveDirectory: in a one-process job (`comm` null) this process takes the lock of
// `save_dir`; in a job of `world_size` processes global rank 0 takes it and every rank
// learns the outcome from it (an all-gather over `comm`, group `group_id`, waiting at most
// `timeout`), so all ranks start or all refuse with rank 0's message. The lock holder then
// removes every stale temp entry (RemoveStaleTempEntries, exclusive: no other job can be
// writing). `print` gets one line for a lock taken over from a dead job and one per removed
// entry. While the agreement waits for late ranks, `tick` (may be empty) runs every
// `tick_interval`, to say so. On a refusal every rank runs `on_refused` (e.g. quiesce the
// heartbeat, which would otherwise report rank 0's exit first) and the ranks exchange once
// more before returning, so none exits before all have run it. Returns the lock (null on ranks
// other than 0): hold it until the job ends. Errors: SaveLock::Acquire's (FailedPrecondition naming
// the holder), on every rank; Unavailable / DeadlineExceeded when the agreement with rank 0 fails.
absl::StatusOr<std::unique_ptr<actors::checkpoint::SaveLock>> GuardSaveDirectory(
    const std::string& save_dir, transport::Communicator* comm, int world_size, int64_t group_id,
    absl::Duration timeout, const std::function<void(const std::string&)>& print,
    std::function<void()> tick = {}, absl::Duration tick_interval = absl::Seconds(10),
    std::function<void()> on_refused = {});

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_SAVE_GUARD_H_
