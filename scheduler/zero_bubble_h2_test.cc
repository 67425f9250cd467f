// Tests ZB-H2: a small case worked out by hand from the rule (2(p-1-s) warm-up F, then
// F B pairs, at most 2s W pending), validity and channel quotas for p in 1..8 and m in
// 1..4p, the parallelogram with equal op times (every stage busy for exactly 3m t from its
// first op to its last, Qi et al. 2024 §3.1) and the (2p - 1)-micro-batch stash.
#include "scheduler/zero_bubble_h2.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "scheduler/edge_slots.h"
#include "scheduler/schedule_simulator.h"
#include "scheduler/schedule_validator.h"

namespace mxmaca::scheduler {
namespace {

TEST_CASE("ZB-H2 runs 2p-1-2s forwards before the first B and defers 2s W on stage s") {
  auto s = ZeroBubbleH2Schedule(2, 3);
  REQUIRE(s.ok());
  CHECK(s->name == "zb-h2");
  // Stage 0: warm-up min(2, 3) = 2 F, then F2 B0, no W may wait (2s = 0).
  CHECK(ToString(s->stages[0]) == "F0 F1 F2 B0 W0 B1 W1 B2 W2");
  // Stage 1: no warm-up, F B pairs; up to 2 W wait, the third B releases W0.
  CHECK(ToString(s->stages[1]) == "F0 B0 F1 B1 F2 B2 W0 W1 W2");
  CHECK(ZeroBubbleH2Schedule(1, 4)->stages[0] == SingleStageSchedule(4));
  CHECK(!ZeroBubbleH2Schedule(0, 4).ok());
  CHECK(!ZeroBubbleH2Schedule(2, 0).ok());
}

TEST_CASE("ZB-H2 validates, has quotas, stashes min(2p-1, m) and is a parallelogram") {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 4 * p; ++m) {
      INFO("p=" << p << " m=" << m);
      auto s = ZeroBubbleH2Schedule(p, m);
      REQUIRE(s.ok());
      REQUIRE(ValidateSchedule(*s).ok());
      CHECK(EdgeQuotas(*s).ok());
      const auto peaks = PeakStashedMicrobatches(*s);
      CHECK(*std::max_element(peaks.begin(), peaks.end()) == std::min(2 * p - 1, m));
      CHECK(peaks[0] == std::min(2 * p - 1, m));
      if (m < 2 * p - 1) continue;  // the warm-up needs 2p - 1 micro-batches
      // Equal times, gradient sent when B ends: integer sums, compared exactly.
      auto t = SimulateSchedule(*s, OpCosts::Uniform(p, 1, 1, 1, 0, false));
      REQUIRE(t.ok());
      CHECK(t->makespan == 3 * m + p - 1);
      for (int st = 0; st < p; ++st) {
        // Stage st starts when the first activation arrives (st) and never waits again.
        CHECK(t->ops[st].front().start == st);
        CHECK(t->ops[st].back().finish - t->ops[st].front().start == 3 * m);
      }
    }
  }
}

}  // namespace
}  // namespace mxmaca::scheduler
