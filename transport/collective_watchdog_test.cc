// transport/collective_watchdog_test.cc: the watchdog thread drives InProcessHub's
// CheckTimeouts: nothing is reported before the timeout (however many ticks pass), a stuck
// collective is reported once and its arrived member is failed. Fake clock, no sleeps.
#include "transport/collective_watchdog.h"

#include <atomic>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "transport/inprocess_communicator.h"
#include "transport/rank_grid.h"

namespace mxmaca::transport {
namespace {

TEST_CASE("CollectiveWatchdog reports a stuck all-reduce once, only after the timeout") {
  absl::Mutex mu;
  absl::Time fake_now = absl::FromUnixSeconds(50);  // guarded by mu
  auto clock = [&] {
    absl::MutexLock lock(&mu);
    return fake_now;
  };
  InProcessHub::Options options;
  options.timeout = absl::Seconds(30);
  options.clock = clock;
  InProcessHub hub(2, options);
  const RankGrid grid = *RankGrid::Create(2, 1, 1);  // dp group {0, 1}

  int ticks = 0;                       // guarded by mu
  std::vector<absl::Status> reported;  // guarded by mu
  std::vector<absl::Status> completions;  // guarded by mu
  auto wait_until = [&](const std::function<bool()>& pred) {
    absl::MutexLock lock(&mu);
    struct Arg { const std::function<bool()>* p; } arg{&pred};
    return mu.AwaitWithTimeout(
        absl::Condition(+[](Arg* a) { return (*a->p)(); }, &arg), absl::Seconds(20));
  };

  CollectiveWatchdog watchdog(
      absl::Milliseconds(1),
      [&](absl::Time now) {
        std::vector<absl::Status> r = hub.CheckTimeouts(now);
        absl::MutexLock lock(&mu);
        ++ticks;
        return r;
      },
      [&](std::vector<absl::Status> reports) {
        absl::MutexLock lock(&mu);
        reported.insert(reported.end(), reports.begin(), reports.end());
      },
      clock);

  std::vector<float> x(32, 1.0f);
  hub.ForRank(0)->AllReduceSum(grid.ForRank(0)->data_parallel_group(), x.data(), x.data(),
                               32, [&](const CollectiveInfo&, absl::Status s) {
                                 absl::MutexLock lock(&mu);
                                 completions.push_back(s);
                               });
  // Many ticks before the timeout: nothing reported, nothing completed.
  REQUIRE(wait_until([&] { return ticks >= 20; }));
  {
    absl::MutexLock lock(&mu);
    CHECK(reported.empty());
    CHECK(completions.empty());
    fake_now += absl::Seconds(31);
  }
  REQUIRE(wait_until([&] { return !reported.empty() && !completions.empty(); }));
  const int ticks_at_report = [&] { absl::MutexLock lock(&mu); return ticks; }();
  REQUIRE(wait_until([&] { return ticks >= ticks_at_report + 20; }));
  watchdog.Stop();
  absl::MutexLock lock(&mu);
  REQUIRE(reported.size() == 1);  // reported once, not on every tick
  INFO(reported[0].message());
  CHECK(absl::IsDeadlineExceeded(reported[0]));
  CHECK(std::string(reported[0].message()).find("ranks not arrived: [1]") != std::string::npos);
  REQUIRE(completions.size() == 1);
  CHECK(completions[0] == reported[0]);
}

}  // namespace
}  // namespace mxmaca::transport
