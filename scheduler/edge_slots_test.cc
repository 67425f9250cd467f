// Tests for scheduler/edge_slots.h: quotas for the published schedules (hand-derived),
// a hand-made schedule that needs more than one slot, and that MinimumEdgeSlots' quotas
// really are needed (one fewer on a blocked channel deadlocks the replay).
#include "scheduler/edge_slots.h"

#include <catch2/catch.hpp>

#include "scheduler/schedule_factory.h"

namespace mxmaca::scheduler {
namespace {

PipelineSchedule Build(ScheduleKind kind, int p, int v, int m) {
  ScheduleOptions o;
  o.kind = kind;
  o.num_stages = p;
  o.num_chunks = v;
  o.num_microbatches = m;
  auto s = BuildSchedule(o);
  REQUIRE(s.ok());
  return *s;
}

TEST_CASE("GPipe, 1F1B and ZB-H1 run with one slot per channel; unused channels have none") {
  for (ScheduleKind kind :
       {ScheduleKind::kOneFOneB, ScheduleKind::kGPipe, ScheduleKind::kZeroBubbleH1}) {
    for (int p : {2, 3, 4}) {
      for (int m : {p, 2 * p + 1}) {
        auto e = MinimumEdgeSlots(Build(kind, p, 1, m));
        REQUIRE(e.ok());
        // Each receiver consumes a channel's messages in send order and never waits for
        // something its sender does later before taking the next one: one slot suffices.
        for (int s = 0; s < p; ++s) {
          INFO(ScheduleKindName(kind) << " p " << p << " m " << m << " stage " << s);
          CHECK(e->forward[s] == (s < p - 1 ? 1 : 0));  // the last stage sends no activation
          CHECK(e->backward[s] == (s > 0 ? 1 : 0));     // the first sends no gradient
        }
      }
    }
  }
}

TEST_CASE("unit-time slots: GPipe keeps two activations in flight per channel") {
  const PipelineSchedule s = Build(ScheduleKind::kGPipe, 4, 1, 8);
  auto e = UnitTimeEdgeSlots(s);
  REQUIRE(e.ok());
  // Forward phase: stage s starts F(j) at t = s + j and stage s + 1 finishes F(j) at
  // t = s + j + 2, so the payloads of F(j) and F(j + 1) overlap: 2. Backward phase:
  // a stage alternates B and W (2 units per micro-batch), the receiver's B finishes 2
  // units after the sender's B started: 1.
  for (int st = 0; st < 3; ++st) CHECK(e->forward[st] == 2);
  for (int st = 1; st < 4; ++st) CHECK(e->backward[st] == 1);
  CHECK(e->forward[3] == 0);
  CHECK(e->backward[0] == 0);
}

TEST_CASE("unthrottled slots: what a schedule can put in flight under any timing") {
  // 1F1B: stage s runs p - s - 1 warm-up forwards and one more before its first B, which
  // waits (through stage s + 1's B) for stage s + 1 to consume the first activation: p - s
  // activations can be in flight on its forward channel. Its gradients: stage s sends B(j)
  // and can run on to B(j + p - s) before needing stage s - 1's F... bounded by p - s + 1.
  for (int p : {2, 4, 6}) {
    for (int m : {p, 2 * p}) {
      auto e = UnthrottledEdgeSlots(Build(ScheduleKind::kOneFOneB, p, 1, m));
      REQUIRE(e.ok());
      for (int s = 0; s < p; ++s) {
        INFO("1f1b p " << p << " m " << m << " stage " << s);
        CHECK(e->forward[s] == (s < p - 1 ? std::min(p - s, m) : 0));
        CHECK(e->backward[s] == (s > 0 ? std::min(p - s + 1, m) : 0));
      }
    }
  }
  // GPipe: all m forwards go out before any backward — nothing holds the sender back.
  auto g = UnthrottledEdgeSlots(Build(ScheduleKind::kGPipe, 4, 1, 8));
  REQUIRE(g.ok());
  CHECK(g->forward == std::vector<int32_t>{8, 8, 8, 0});
  CHECK(g->backward == std::vector<int32_t>{0, 8, 8, 8});
}

TEST_CASE("EdgeQuotas: unthrottled by default, capped on request, never below the minimum") {
  const PipelineSchedule gpipe = Build(ScheduleKind::kGPipe, 4, 1, 8);
  auto q = EdgeQuotas(gpipe);
  REQUIRE(q.ok());
  CHECK(q->forward == std::vector<int32_t>{8, 8, 8, 0});
  auto capped = EdgeQuotas(gpipe, 2);
  REQUIRE(capped.ok());
  CHECK(capped->forward == std::vector<int32_t>{2, 2, 2, 0});
  // Interleaved needs two slots per channel: a cap of 1 is raised to that.
  const PipelineSchedule inter = Build(ScheduleKind::kInterleaved1F1B, 4, 2, 8);
  auto one = EdgeQuotas(inter, 1);
  REQUIRE(one.ok());
  for (int s = 0; s < 4; ++s) {
    CHECK(one->forward[s] == 2);
    CHECK(one->backward[s] == 2);
  }
}

TEST_CASE("interleaved 1F1B needs two slots on every channel") {
  // Stage p-1 sends chunk-0 activations of micro-batch group g+1 to stage 0 (the wrap
  // channel) while stage 0 still has to consume group g's chunk-1 activations in FIFO
  // order, and likewise backward: with one slot the replay stalls.
  for (int p : {2, 4}) {
    for (int m : {p, 2 * p}) {
      const PipelineSchedule s = Build(ScheduleKind::kInterleaved1F1B, p, 2, m);
      auto e = MinimumEdgeSlots(s);
      REQUIRE(e.ok());
      auto q = EdgeQuotas(s);
      REQUIRE(q.ok());
      for (int st = 0; st < p; ++st) {
        INFO("p " << p << " m " << m << " stage " << st);
        CHECK(e->forward[st] == 2);
        CHECK(e->backward[st] == 2);
        CHECK(q->forward[st] >= 2);
        CHECK(q->backward[st] >= 2);
      }
    }
  }
}

TEST_CASE("a schedule that cannot complete is an error, not a quota") {
  PipelineSchedule s;
  s.name = "hand";
  s.num_stages = 2;
  s.num_microbatches = 3;
  auto F = [](int mb) { return PipelineOp{OpKind::kForward, mb, 0}; };
  auto B = [](int mb) { return PipelineOp{OpKind::kBackwardInput, mb, 0}; };
  auto W = [](int mb) { return PipelineOp{OpKind::kBackwardWeight, mb, 0}; };
  // Stage 1 wants F2 before B0; stage 0 sends F2 only after B0's gradient came back.
  s.stages = {{F(0), F(1), B(0), W(0), F(2), B(1), W(1), B(2), W(2)},
              {F(0), F(1), F(2), B(0), W(0), B(1), W(1), B(2), W(2)}};
  CHECK_FALSE(MinimumEdgeSlots(s).ok());
  // An unusual but valid order needs one slot each way.
  s.stages[1] = {F(0), B(0), W(0), F(1), B(1), W(1), F(2), B(2), W(2)};
  auto e = MinimumEdgeSlots(s);
  REQUIRE(e.ok());
  CHECK(e->forward == std::vector<int32_t>{1, 0});
  CHECK(e->backward == std::vector<int32_t>{0, 1});
}

}  // namespace
}  // namespace mxmaca::scheduler
