// layers/context_parallel/pending_transfers.cc: see pending_transfers.h.
#include "layers/context_parallel/pending_transfers.h"

#include <cstdint>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace mxmaca::layers::cp {

struct PendingTransfers::State {
  mutable absl::Mutex mu;
  int64_t next_id ABSL_GUARDED_BY(mu) = 0;
  std::map<int64_t, std::string> outstanding ABSL_GUARDED_BY(mu);  // id -> what
  absl::Status error ABSL_GUARDED_BY(mu);
  double latency_seconds ABSL_GUARDED_BY(mu) = 0.0;
};

PendingTransfers::PendingTransfers() : state_(std::make_shared<State>()) {}

transport::DoneCallback PendingTransfers::Track(std::string what, bool measure_latency) {
  int64_t id;
  {
    absl::MutexLock lock(&state_->mu);
    id = state_->next_id++;
    state_->outstanding.emplace(id, std::move(what));
  }
  const absl::Time posted = absl::Now();
  std::shared_ptr<State> state = state_;
  return [state, id, posted, measure_latency](const transport::CollectiveInfo& info,
                                              absl::Status status) {
    const absl::Time done = absl::Now();
    absl::MutexLock lock(&state->mu);
    auto it = state->outstanding.find(id);
    if (it == state->outstanding.end()) return;  // a backend bug: `done` fired twice
    if (!status.ok() && state->error.ok()) {
      state->error = absl::Status(
          status.code(), absl::StrCat(it->second, " (", info.ToString(), "): ", status.message()));
    }
    if (measure_latency) state->latency_seconds += absl::ToDoubleSeconds(done - posted);
    state->outstanding.erase(it);
  };
}

absl::Status PendingTransfers::Wait(absl::Duration timeout) {
  State* s = state_.get();
  absl::MutexLock lock(&s->mu);
  const auto all_done = [s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
    return s->outstanding.empty() || !s->error.ok();
  };
  if (!s->mu.AwaitWithTimeout(absl::Condition(&all_done), timeout)) {
    std::string missing;
    for (const auto& [id, what] : s->outstanding) {
      absl::StrAppend(&missing, missing.empty() ? "" : "; ", what);
    }
    return absl::DeadlineExceededError(
        absl::StrCat("no completion within ", absl::FormatDuration(timeout), " for ",
                     s->outstanding.size(), " transfer(s): ", missing));
  }
  return s->error;
}

int PendingTransfers::outstanding() const {
  absl::MutexLock lock(&state_->mu);
  return static_cast<int>(state_->outstanding.size());
}

double PendingTransfers::latency_seconds() const {
  absl::MutexLock lock(&state_->mu);
  return state_->latency_seconds;
}

}  // namespace mxmaca::layers::cp
