// api/simulate/zero_bubble_gain_test.cc: the zero-bubble paper's gains over 1F1B (Qi et al.,
// "Zero Bubble Pipeline Parallelism", ICLR 2024, arXiv 2401.10241; abstract: up to 23%
// more throughput than 1F1B at a similar memory limit, up to 31% with the memory limit
// relaxed), reproduced in direction and size by replaying the schedules with the paper's
// handcrafted-schedule assumption T_F = T_B = T_W (its §3) and a hand-over latency of 5% of
// an op, for p in {8, 16, 32} and m in {3p, 4p, 8p}. ZB-H1 keeps 1F1B's memory (compare
// with the paper's ZB-1p), ZB-H2 uses about twice the activations (ZB-2p). The table is
// printed (docs/SIMULATOR.md quotes it).
#include <catch2/catch.hpp>

#include <cstdio>

#include "api/simulate/shared_worker_replay.h"
#include "scheduler/schedule_factory.h"
#include "scheduler/schedule_simulator.h"

namespace mxmaca::api {
namespace {

double Makespan(scheduler::ScheduleKind kind, int p, int m, bool fused) {
  scheduler::ScheduleOptions o;
  o.kind = kind;
  o.num_stages = p;
  o.num_microbatches = m;
  auto schedule = scheduler::BuildSchedule(o);
  REQUIRE(schedule.ok());
  // One op = 1 time unit; messages take 0.05 units.
  auto t = scheduler::SimulateSchedule(*schedule,
                                       scheduler::OpCosts::Uniform(p, 1.0, 1.0, 1.0, 0.05, fused));
  REQUIRE(t.ok());
  return t->makespan;
}

TEST_CASE("zero bubble: ZB-H1 and ZB-H2 beat 1F1B by the paper's margins") {
  std::printf("%4s %5s %10s %10s %10s %12s %12s\n", "p", "m", "1F1B", "ZB-H1", "ZB-H2",
              "H1 gain", "H2 gain");
  double best_h1 = 0, best_h2 = 0;
  for (int p : {8, 16, 32}) {
    for (int f : {3, 4, 8}) {
      const int m = f * p;
      // Megatron's 1F1B runs B and W as one backward (the gradient leaves after W).
      const double base = Makespan(scheduler::ScheduleKind::kOneFOneB, p, m, true);
      const double h1 = Makespan(scheduler::ScheduleKind::kZeroBubbleH1, p, m, false);
      const double h2 = Makespan(scheduler::ScheduleKind::kZeroBubbleH2, p, m, false);
      const double g1 = base / h1 - 1, g2 = base / h2 - 1;  // throughput gains
      std::printf("%4d %5d %10.2f %10.2f %10.2f %+11.1f%% %+11.1f%%\n", p, m, base, h1, h2,
                  100 * g1, 100 * g2);
      // Direction: each zero-bubble schedule is faster, H2 at least as fast as H1.
      CHECK(g1 > 0);
      CHECK(g2 >= g1);
      best_h1 = std::max(best_h1, g1);
      best_h2 = std::max(best_h2, g2);
    }
  }
  // Size: the paper's best gains are 23% (ZB-1p) and 31% (ZB-2p) over its model and
  // cluster configurations; with equal F, B, W the replay's best must be of the same size
  // (within a factor of ~1.5 either way: its schedules are the automatic ones, ours the
  // handcrafted H1 / H2, and its op times are not exactly equal).
  CHECK(best_h1 > 0.23 / 1.5);
  CHECK(best_h1 < 0.23 * 1.5);
  CHECK(best_h2 > 0.31 / 1.5);
  CHECK(best_h2 < 0.31 * 1.5);
}

}  // namespace
}  // namespace mxmaca::api
