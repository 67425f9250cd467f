// Tests ZB-H1: a small case worked out by hand from the paper's rule (stage s keeps s W
// pending), validity for p in {1,2,4,8} and m from 1 to 8p, the step length
// (3m + p - 1) t with equal op times (Qi et al. 2024, §3.1), and the stash bound.
#include "scheduler/zero_bubble_h1.h"

#include <catch2/catch.hpp>

#include "scheduler/one_f_one_b.h"
#include "scheduler/schedule_simulator.h"
#include "scheduler/schedule_validator.h"

namespace mxmaca::scheduler {
namespace {

TEST_CASE("ZB-H1 defers s weight-gradient passes on stage s") {
  auto s = ZeroBubbleH1Schedule(2, 3);
  REQUIRE(s.ok());
  CHECK(s->name == "zb-h1");
  CHECK(ToString(s->stages[0]) == "F0 F1 B0 W0 F2 B1 W1 B2 W2");
  CHECK(ToString(s->stages[1]) == "F0 B0 F1 B1 W0 F2 B2 W1 W2");
  // p = 1 is the single-stage schedule.
  CHECK(ZeroBubbleH1Schedule(1, 4)->stages[0] == SingleStageSchedule(4));
  CHECK(!ZeroBubbleH1Schedule(0, 4).ok());
  CHECK(!ZeroBubbleH1Schedule(2, 0).ok());
}

TEST_CASE("ZB-H1 validates, cuts the bubble to (p-1)(tF+tB-tW) and stashes <= min(p, m)") {
  for (int p : {1, 2, 4, 8}) {
    for (int m = 1; m <= 8 * p; m += (m < 2 * p ? 1 : p)) {
      INFO("p=" << p << " m=" << m);
      auto s = ZeroBubbleH1Schedule(p, m);
      REQUIRE(s.ok());
      CHECK(ValidateSchedule(*s).ok());
      const auto peaks = PeakStashedMicrobatches(*s);
      for (int st = 0; st < p; ++st) CHECK(peaks[st] <= std::min(p, m));
      if (m < p) continue;  // the closed form assumes a full steady state
      CHECK(peaks[0] == p);
      // Equal times, gradient sent when B ends: integer sums, compared exactly.
      auto t = SimulateSchedule(*s, OpCosts::Uniform(p, 1, 1, 1, 0, false));
      REQUIRE(t.ok());
      CHECK(t->makespan == 3 * m + p - 1);
      auto one = OneFOneBSchedule(p, m);
      REQUIRE(one.ok());
      auto t1 = SimulateSchedule(*one, OpCosts::Uniform(p, 1, 1, 1, 0, true));
      REQUIRE(t1.ok());
      CHECK(t1->makespan - t->makespan == 2 * (p - 1));
    }
  }
}

}  // namespace
}  // namespace mxmaca::scheduler
