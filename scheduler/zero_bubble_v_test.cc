// Tests ZB-V: the V placement (VirtualStage / StageChunkOf), the warm-up derived from the
// V's timing, validity and channel quotas for p in 1..8 and m in 1..4p, the stash bound
// (2p chunk activations = 1F1B's p micro-batches) and the unit-time step length.
#include "scheduler/zero_bubble_v.h"

#include <algorithm>
#include <string>

#include <catch2/catch.hpp>

#include "scheduler/edge_slots.h"
#include "scheduler/schedule_simulator.h"
#include "scheduler/schedule_validator.h"

namespace mxmaca::scheduler {
namespace {

TEST_CASE("V placement: chunk 0 goes down the stages, chunk 1 comes back up") {
  for (int p : {1, 2, 4, 7}) {
    for (int s = 0; s < p; ++s) {
      CHECK(VirtualStage(0, s, p, Placement::kVShape) == s);
      CHECK(VirtualStage(1, s, p, Placement::kVShape) == 2 * p - 1 - s);
      CHECK(VirtualStage(1, s, p) == p + s);  // Megatron's layout stays the default
      for (int c = 0; c < 4; ++c) {
        for (Placement placement : {Placement::kInterleaved, Placement::kVShape}) {
          const StageChunk at = StageChunkOf(VirtualStage(c, s, p, placement), p, placement);
          CHECK(at.stage == s);
          CHECK(at.chunk == c);
        }
      }
    }
  }
  CHECK(std::string(PlacementName(Placement::kVShape)) == "v-shape");
}

TEST_CASE("ZB-V warm-up: stage s runs 2p-1-2s chunk-0 forwards, then the V's return") {
  // Unit chunk times: stage s gets micro-batch 0 at unit s and its chunk-1 activation at
  // 2p - 1 - s (down p - 1 - s stages, then back up), so 2p - 1 - 2s chunk-0 forwards
  // fit before it; the stash (<= 2p) does not bind yet.
  const int p = 4;
  auto s = ZeroBubbleVSchedule(p, 4 * p);
  REQUIRE(s.ok());
  CHECK(s->placement == Placement::kVShape);
  CHECK(s->num_chunks == 2);
  for (int st = 0; st < p; ++st) {
    INFO("stage " << st);
    const int warmup = 2 * p - 1 - 2 * st;
    for (int i = 0; i < warmup; ++i) CHECK(s->stages[st][i] == PipelineOp{OpKind::kForward, i, 0});
    CHECK(s->stages[st][warmup] == PipelineOp{OpKind::kForward, 0, 1});
  }
  CHECK(!ZeroBubbleVSchedule(0, 4).ok());
  CHECK(!ZeroBubbleVSchedule(2, 0).ok());
}

TEST_CASE("ZB-V validates, has quotas, stashes <= 2p chunks; unit-time step 6m + p - 1") {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 4 * p; ++m) {
      INFO("p=" << p << " m=" << m);
      auto s = ZeroBubbleVSchedule(p, m);
      REQUIRE(s.ok());
      REQUIRE(ValidateSchedule(*s).ok());
      CHECK(EdgeQuotas(*s).ok());
      const auto peaks = PeakStashedMicrobatches(*s);
      // 2p half-size chunk activations = p whole micro-batches (1F1B's stage-0 peak).
      CHECK(*std::max_element(peaks.begin(), peaks.end()) <= 2 * p);
      if (m >= 2 * p) CHECK(peaks[0] == 2 * p);
      if (m < 2 * p) continue;
      // One unit per chunk op (T_F = T_B = T_W = 2 per stage), no latency, split backward.
      auto t = SimulateSchedule(*s, OpCosts::Uniform(p, 1, 1, 1, 0, false));
      REQUIRE(t.ok());
      CHECK(t->makespan == 6 * m + p - 1);
    }
  }
}

TEST_CASE("ZB-V forward-only keeps the V placement and validates") {
  for (int p : {1, 2, 5}) {
    auto s = ForwardOnlyVSchedule(p, 3);
    REQUIRE(s.ok());
    CHECK(s->forward_only);
    CHECK(s->placement == Placement::kVShape);
    CHECK(ValidateSchedule(*s).ok());
    CHECK(ToString(s->stages[0]) == "F0 F1 F2 F0.c1 F1.c1 F2.c1");
  }
}

}  // namespace
}  // namespace mxmaca::scheduler
