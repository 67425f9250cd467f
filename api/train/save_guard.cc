// api/train/save_guard.cc: see save_guard.h.
#include "api/train/save_guard.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "actors/checkpoint/temp_dirs.h"
#include "actors/control_plane.h"

namespace mxmaca::api {
namespace {

using actors::checkpoint::SaveLock;
using actors::checkpoint::SaveLockHolder;

// kVerdictBytes: rank 0's verdict block: [1 = locked, 0 = refused][message, NUL padded].
constexpr size_t kVerdictBytes = 1024;

absl::StatusOr<std::unique_ptr<SaveLock>> LockHere(
    const std::string& save_dir, const std::function<void(const std::string&)>& print) {
  std::optional<SaveLockHolder> taken;
  absl::StatusOr<SaveLock> lock = SaveLock::Acquire(save_dir, &taken);
  if (!lock.ok()) return lock.status();
  if (taken) {
    print(absl::StrCat(" > took over the --save lock of ", save_dir, " from a job that is gone (",
                       taken->Describe(), ")"));
  }
  absl::StatusOr<std::vector<actors::checkpoint::TempEntry>> removed =
      actors::checkpoint::RemoveStaleTempEntries(save_dir, /*exclusive=*/true);
  if (!removed.ok()) return removed.status();
  for (const auto& e : *removed) {
    print(absl::StrCat(" > removed a stale checkpoint temp entry: ", save_dir, "/", e.Describe()));
  }
  return std::make_unique<SaveLock>(std::move(*lock));
}

// ExchangeBlocks: all-gathers `block` over `plane`, waiting at most `timeout` (running
// `tick` every `tick_interval`); returns rank 0's block.
absl::StatusOr<std::vector<uint8_t>> ExchangeBlocks(
    actors::ControlPlane& plane, std::vector<uint8_t> block, const std::string& save_dir,
    absl::Duration timeout, const std::function<void()>& tick, absl::Duration tick_interval) {
  auto verdict = std::make_shared<std::promise<std::pair<absl::Status, std::vector<uint8_t>>>>();
  std::future<std::pair<absl::Status, std::vector<uint8_t>>> got = verdict->get_future();
  plane.AllGather(
      std::move(block), [verdict](absl::Status status, actors::ControlPlane::Blocks blocks) {
        verdict->set_value({std::move(status),
                            blocks.empty() ? std::vector<uint8_t>() : std::move(blocks.front())});
      });
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline &&
         got.wait_for(absl::ToChronoNanoseconds(std::min(tick_interval, deadline - absl::Now()))) !=
             std::future_status::ready) {
    if (tick && absl::Now() < deadline) tick();
  }
  if (got.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    return absl::DeadlineExceededError(absl::StrCat("agreeing on the --save lock of ", save_dir,
                                                    ": no answer from every rank within ",
                                                    absl::FormatDuration(timeout)));
  }
  auto [status, zero] = got.get();
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("agreeing on the --save lock of ", save_dir,
                                                    ": ", status.message()));
  }
  return zero;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SaveLock>> GuardSaveDirectory(
    const std::string& save_dir, transport::Communicator* comm, int world_size, int64_t group_id,
    absl::Duration timeout, const std::function<void(const std::string&)>& print,
    std::function<void()> tick, absl::Duration tick_interval, std::function<void()> on_refused) {
  if (comm == nullptr || world_size <= 1) return LockHere(save_dir, print);
  absl::StatusOr<std::unique_ptr<SaveLock>> lock = nullptr;
  std::vector<uint8_t> block(kVerdictBytes, 0);
  if (comm->rank() == 0) {
    lock = LockHere(save_dir, print);
    block[0] = lock.ok() ? 1 : 0;
    if (!lock.ok()) {
      const std::string text(lock.status().message());
      std::copy_n(text.begin(), std::min(text.size(), kVerdictBytes - 1), block.begin() + 1);
    }
  }
  actors::ControlPlane plane(comm, world_size, group_id);
  absl::StatusOr<std::vector<uint8_t>> zero =
      ExchangeBlocks(plane, std::move(block), save_dir, timeout, tick, tick_interval);
  if (!zero.ok()) return zero.status();
  if (zero->size() != kVerdictBytes) {
    return absl::InternalError("agreeing on the --save lock: a short verdict from rank 0");
  }
  if ((*zero)[0] != 1) {
    // Refused: every rank stops reporting lost peers (on_refused), and only then, after a
    // second exchange, do they exit, so that no rank reports rank 0's exit instead of its
    // refusal.
    if (on_refused) on_refused();
    ExchangeBlocks(plane, std::vector<uint8_t>(1, 0), save_dir, timeout, tick, tick_interval)
        .status()
        .IgnoreError();
    if (comm->rank() == 0) return lock.status();
    std::string text(zero->begin() + 1, zero->end());
    text.resize(text.find('\0') == std::string::npos ? text.size() : text.find('\0'));
    return absl::FailedPreconditionError(absl::StrCat("rank 0: ", text));
  }
  return lock;
}

}  // namespace mxmaca::api
