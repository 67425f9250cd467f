// transport/collective_watchdog.cc: the watchdog thread.
#include "transport/collective_watchdog.h"

#include <utility>

namespace mxmaca::transport {

CollectiveWatchdog::CollectiveWatchdog(absl::Duration period, Check check, OnTimeout on_timeout,
                                       std::function<absl::Time()> clock)
    : period_(period),
      check_(std::move(check)),
      on_timeout_(std::move(on_timeout)),
      clock_(clock ? std::move(clock) : [] { return absl::Now(); }) {
  thread_ = std::thread([this] { Run(); });
}

CollectiveWatchdog::~CollectiveWatchdog() { Stop(); }

void CollectiveWatchdog::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void CollectiveWatchdog::Run() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_), period_);
      if (stop_) return;
    }
    std::vector<absl::Status> reports = check_(clock_());
    if (!reports.empty() && on_timeout_) on_timeout_(std::move(reports));
  }
}

}  // namespace mxmaca::transport
