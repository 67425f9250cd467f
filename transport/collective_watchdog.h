// transport/collective_watchdog.h: a thread that periodically asks a backend for
// collectives past their timeout (docs/ARCHITECTURE.md "Collectives ... time out with a report of
// (group, op, sequence, bytes) on every rank").
//
// The backend does the bookkeeping (InProcessHub::CheckTimeouts fails the stuck operation
// on every arrived member and returns the reports); the watchdog only supplies the clock
// tick and hands the reports to whoever ends the job (the per-process Coordinator actor).
// It owns one thread that sleeps between ticks and never runs compute.
#ifndef MXMACA_TRANSPORT_COLLECTIVE_WATCHDOG_H_
#define MXMACA_TRANSPORT_COLLECTIVE_WATCHDOG_H_

#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace mxmaca::transport {

class CollectiveWatchdog {
 public:
  // Check: returns one status per operation it failed for timing out at `now` (e.g.
  // [&hub](absl::Time now) { return hub.CheckTimeouts(now); }).
  using Check = std::function<std::vector<absl::Status>(absl::Time now)>;
  // OnTimeout: receives the non-empty reports of one tick, on the watchdog thread; it
  // should forward them (a message to the coordinator) and return.
  using OnTimeout = std::function<void(std::vector<absl::Status> reports)>;

  // CollectiveWatchdog: starts the thread; every `period` it calls check(clock()) and,
  // when that returns reports, on_timeout(reports). `clock` defaults to absl::Now.
  CollectiveWatchdog(absl::Duration period, Check check, OnTimeout on_timeout,
                     std::function<absl::Time()> clock = {});
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;
  // ~CollectiveWatchdog: Stop().
  ~CollectiveWatchdog();

  // Stop: wakes the thread and joins it; idempotent. Must not be called from on_timeout.
  void Stop();

 private:
  void Run();

  const absl::Duration period_;
  const Check check_;
  const OnTimeout on_timeout_;
  const std::function<absl::Time()> clock_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace mxmaca::transport

#endif  // MXMACA_TRANSPORT_COLLECTIVE_WATCHDOG_H_
