// Tests the schedule generators (GPipe, 1F1B, interleaved 1F1B, forward-only): op lists for
// small cases derived by hand from the papers and Megatron's schedules.py, the warm-up
// counts of Megatron's formulas, validity over p in {1,2,4,8}, m in {p,2p,4p,8p}, v in
// {1,2,3}, and errors for impossible combinations.
#include <string>

#include <catch2/catch.hpp>

#include "scheduler/forward_only.h"
#include "scheduler/gpipe.h"
#include "scheduler/interleaved_1f1b.h"
#include "scheduler/one_f_one_b.h"
#include "scheduler/schedule_validator.h"

namespace mxmaca::scheduler {
namespace {

// Number of F ops before the first B of a list.
int LeadingForwards(const StageSchedule& ops) {
  int n = 0;
  while (n < static_cast<int>(ops.size()) && ops[n].kind == OpKind::kForward) ++n;
  return n;
}

TEST_CASE("GPipe runs all forwards, then B and W per micro-batch") {
  auto s = GPipeSchedule(2, 3);
  REQUIRE(s.ok());
  CHECK(s->name == "gpipe");
  for (const StageSchedule& ops : s->stages) {
    CHECK(ToString(ops) == "F0 F1 F2 B0 W0 B1 W1 B2 W2");
  }
  CHECK(ValidateSchedule(*s).ok());
}

TEST_CASE("1F1B matches the PipeDream-Flush order worked out by hand") {
  // p = 4, m = 6: stage s warms up with p - s - 1 forwards.
  auto s = OneFOneBSchedule(4, 6);
  REQUIRE(s.ok());
  CHECK(ToString(s->stages[0]) == "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5");
  CHECK(ToString(s->stages[2]) == "F0 F1 B0 W0 F2 B1 W1 F3 B2 W2 F4 B3 W3 F5 B4 W4 B5 W5");
  CHECK(ToString(s->stages[3]) == "F0 B0 W0 F1 B1 W1 F2 B2 W2 F3 B3 W3 F4 B4 W4 F5 B5 W5");
  // m < p: warm-up is capped at m.
  auto few = OneFOneBSchedule(4, 2);
  REQUIRE(few.ok());
  CHECK(ToString(few->stages[0]) == "F0 F1 B0 W0 B1 W1");
  CHECK(ToString(few->stages[2]) == "F0 F1 B0 W0 B1 W1");
  CHECK(ToString(few->stages[3]) == "F0 B0 W0 F1 B1 W1");
  CHECK(ValidateSchedule(*few).ok());
  // p = 1 reduces to the single-stage schedule.
  auto one = OneFOneBSchedule(1, 3);
  REQUIRE(one.ok());
  CHECK(one->stages[0] == SingleStageSchedule(3));
}

TEST_CASE("interleaved schedule table follows Megatron's example") {
  // schedules.py's comment: PP2 N3M5 with VP2 ->
  //   microbatch_id  0 1 2 0 1 2 3 4 3 4
  //   model_chunk_id 0 0 0 1 1 1 0 0 1 1
  const auto table = InterleavedScheduleTable(5, 2, 3);
  const int mbs[] = {0, 1, 2, 0, 1, 2, 3, 4, 3, 4};
  const int chunks[] = {0, 0, 0, 1, 1, 1, 0, 0, 1, 1};
  REQUIRE(table.size() == 10);
  for (int i = 0; i < 10; ++i) {
    CHECK(table[i].first == mbs[i]);
    CHECK(table[i].second == chunks[i]);
  }
}

TEST_CASE("interleaved 1F1B matches Megatron's order worked out by hand") {
  // p = 2, v = 2, m = 4, group 2: table (0,0)(1,0)(0,1)(1,1)(2,0)(3,0)(2,1)(3,1).
  // Stage 0 warm-up (2-0-1)*2 + (2-1)*2 = 4; stage 1 warm-up 0*2 + 2 = 2. Backward k runs
  // table[k]'s micro-batch on chunk 1 - table[k].chunk.
  auto s = Interleaved1F1BSchedule(2, 2, 4);
  REQUIRE(s.ok());
  CHECK(s->name == "interleaved-1f1b");
  CHECK(ToString(s->stages[0]) ==
        "F0 F1 F0.c1 F1.c1 "
        "F2 B0.c1 W0.c1 F3 B1.c1 W1.c1 F2.c1 B0 W0 F3.c1 B1 W1 "
        "B2.c1 W2.c1 B3.c1 W3.c1 B2 W2 B3 W3");
  CHECK(ToString(s->stages[1]) ==
        "F0 F1 "
        "F0.c1 B0.c1 W0.c1 F1.c1 B1.c1 W1.c1 F2 B0 W0 F3 B1 W1 "
        "F2.c1 B2.c1 W2.c1 F3.c1 B3.c1 W3.c1 "
        "B2 W2 B3 W3");
  CHECK(ValidateSchedule(*s).ok());
}

TEST_CASE("interleaved with v = 1 is 1F1B (Megatron drops a virtual size of 1)") {
  auto a = Interleaved1F1BSchedule(4, 1, 8);
  auto b = OneFOneBSchedule(4, 8);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->stages == b->stages);
}

TEST_CASE("all generators validate over the p, m, v grid with Megatron's warm-up counts") {
  for (int p : {1, 2, 4, 8}) {
    for (int factor : {1, 2, 4, 8}) {
      const int m = factor * p;
      INFO("p=" << p << " m=" << m);
      auto gpipe = GPipeSchedule(p, m);
      REQUIRE(gpipe.ok());
      CHECK(ValidateSchedule(*gpipe).ok());
      auto one = OneFOneBSchedule(p, m);
      REQUIRE(one.ok());
      CHECK(ValidateSchedule(*one).ok());
      for (int s = 0; s < p; ++s) {
        // Warm-up forwards plus the steady state's first F.
        CHECK(LeadingForwards(one->stages[s]) == std::min(p - s - 1, m) + 1);
      }
      for (int v : {1, 2, 3}) {
        INFO("v=" << v);
        auto inter = Interleaved1F1BSchedule(p, v, m);
        REQUIRE(inter.ok());
        absl::Status status = ValidateSchedule(*inter);
        CHECK(status.ToString() == "OK");
        if (v > 1) {
          for (int s = 0; s < p; ++s) {
            const int warmup = std::min((p - s - 1) * 2 + (v - 1) * p, v * m);
            CHECK(LeadingForwards(inter->stages[s]) == std::min(warmup + 1, v * m));
            CHECK(inter->stages[s].size() == static_cast<size_t>(3 * v * m));
          }
        }
        auto eval = ForwardOnlyPipelineSchedule(p, v, m);
        REQUIRE(eval.ok());
        CHECK(eval->forward_only);
        CHECK(ValidateSchedule(*eval).ok());
      }
    }
  }
}

TEST_CASE("uneven last groups and m < p are valid where Megatron allows them") {
  // m = 5, group 3, p = 2: last group 2 >= p.
  auto s = Interleaved1F1BSchedule(2, 2, 5, 3);
  REQUIRE(s.ok());
  CHECK(ValidateSchedule(*s).ok());
  // m = 7, p = 3, group = 3: last group 1 < p is rejected; group 7 (one group) is fine.
  CHECK(!Interleaved1F1BSchedule(3, 2, 7).ok());
  auto one_group = Interleaved1F1BSchedule(3, 2, 7, 7);
  REQUIRE(one_group.ok());
  CHECK(ValidateSchedule(*one_group).ok());
  for (int m = 1; m < 8; ++m) {
    auto gpipe = GPipeSchedule(8, m);
    auto one = OneFOneBSchedule(8, m);
    auto eval = ForwardOnlyPipelineSchedule(8, 3, m);
    REQUIRE((gpipe.ok() && one.ok() && eval.ok()));
    CHECK(ValidateSchedule(*gpipe).ok());
    CHECK(ValidateSchedule(*one).ok());
    CHECK(ValidateSchedule(*eval).ok());
  }
  auto eval = ForwardOnlyPipelineSchedule(2, 2, 3);
  REQUIRE(eval.ok());
  CHECK(ToString(eval->stages[1]) == "F0 F1 F0.c1 F1.c1 F2 F2.c1");
}

TEST_CASE("generators reject impossible combinations, naming the values") {
  auto message = [](const absl::Status& status) { return std::string(status.message()); };
  CHECK_THAT(message(GPipeSchedule(0, 4).status()),
             Catch::Contains("pipeline stages p must be >= 1, got 0"));
  CHECK_THAT(message(OneFOneBSchedule(2, 0).status()),
             Catch::Contains("micro-batches m must be >= 1, got 0"));
  CHECK_THAT(message(Interleaved1F1BSchedule(2, 0, 4).status()),
             Catch::Contains("model chunks per stage v must be >= 1, got 0"));
  CHECK_THAT(message(Interleaved1F1BSchedule(-3, 2, 4).status()), Catch::Contains("got -3"));
  // Interleaving needs m >= p with the default group size p.
  CHECK_THAT(message(Interleaved1F1BSchedule(4, 2, 2).status()),
             Catch::Contains("[p, m] = [4, 2], got 4"));
  CHECK_THAT(message(Interleaved1F1BSchedule(4, 2, 8, 3).status()),
             Catch::Contains("[p, m] = [4, 8], got 3"));
  CHECK_THAT(message(Interleaved1F1BSchedule(4, 2, 6, 5).status()),
             Catch::Contains("6 % 5 = 1 must be 0 or >= p = 4"));
  CHECK_THAT(message(ForwardOnlyPipelineSchedule(2, 1, 4, -1).status()), Catch::Contains("got -1"));
  CHECK(!OneFOneBSchedule(1 << 20, 1 << 10).ok());
}

}  // namespace
}  // namespace mxmaca::scheduler
