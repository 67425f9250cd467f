// Tests the single-stage and forward-only schedules: every micro-batch gets exactly one
// F, B and W, in F < B < W order, and each W comes before the next F (one stash alive).
#include "scheduler/pipeline_schedule.h"

#include <catch2/catch.hpp>

namespace mxmaca::scheduler {
namespace {

TEST_CASE("single-stage schedule runs F, B, W per micro-batch in order") {
  for (int m : {1, 2, 7}) {
    StageSchedule ops = SingleStageSchedule(m);
    REQUIRE(ops.size() == static_cast<size_t>(3 * m));
    int alive = 0, peak = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      CHECK(ops[i].microbatch == static_cast<int>(i / 3));
      CHECK(static_cast<int>(ops[i].kind) == static_cast<int>(i % 3));
      if (ops[i].kind == OpKind::kForward) peak = std::max(peak, ++alive);
      if (ops[i].kind == OpKind::kBackwardWeight) --alive;
    }
    CHECK(peak == 1);
    CHECK(alive == 0);
  }
  CHECK(ToString(SingleStageSchedule(2)) == "F0 B0 W0 F1 B1 W1");
  CHECK(ToString(ForwardOnlySchedule(3)) == "F0 F1 F2");
  CHECK(ToString(PipelineOp{OpKind::kBackwardWeight, 4, 1}) == "W4.c1");
}

}  // namespace
}  // namespace mxmaca::scheduler
