// Tests schedule selection by name and BuildSchedule's routing and errors.
#include "scheduler/schedule_factory.h"

#include <string>

#include <catch2/catch.hpp>

#include "scheduler/interleaved_1f1b.h"

namespace mxmaca::scheduler {
namespace {

TEST_CASE("schedule names parse and print back") {
  for (ScheduleKind kind :
       {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved1F1B,
        ScheduleKind::kZeroBubbleH1, ScheduleKind::kZeroBubbleH2, ScheduleKind::kZeroBubbleV}) {
    auto parsed = ParseScheduleKind(ScheduleKindName(kind));
    REQUIRE(parsed.ok());
    CHECK(*parsed == kind);
  }
  CHECK(*ParseScheduleKind("interleaved") == ScheduleKind::kInterleaved1F1B);
  CHECK_THAT(std::string(ParseScheduleKind("zb-2p").status().message()),
             Catch::Contains("unknown pipeline schedule 'zb-2p'"));
}

TEST_CASE("BuildSchedule routes to the generators and validates") {
  ScheduleOptions options;
  options.num_stages = 4;
  options.num_microbatches = 8;
  options.kind = ScheduleKind::kGPipe;
  CHECK(BuildSchedule(options)->name == "gpipe");
  options.kind = ScheduleKind::kOneFOneB;
  CHECK(BuildSchedule(options)->name == "1f1b");
  options.kind = ScheduleKind::kZeroBubbleH1;
  CHECK(BuildSchedule(options)->name == "zb-h1");
  options.kind = ScheduleKind::kZeroBubbleH2;
  CHECK(BuildSchedule(options)->name == "zb-h2");
  options.kind = ScheduleKind::kZeroBubbleV;
  options.num_chunks = 2;
  auto v = BuildSchedule(options);
  REQUIRE(v.ok());
  CHECK(v->name == "zb-v");
  CHECK(v->placement == Placement::kVShape);
  // Cost-aware zb-v: the op times reach the list scheduler (B = 2F changes the order).
  options.op_costs = OpCosts::Uniform(4, 1, 2, 1);
  auto v_costed = BuildSchedule(options);
  REQUIRE(v_costed.ok());
  CHECK(v_costed->stages != v->stages);
  options.op_costs.reset();
  options.forward_only = true;
  auto v_eval = BuildSchedule(options);
  REQUIRE(v_eval.ok());
  CHECK(v_eval->forward_only);
  CHECK(v_eval->placement == Placement::kVShape);
  options.forward_only = false;
  options.num_chunks = 1;
  options.kind = ScheduleKind::kInterleaved1F1B;
  options.num_chunks = 2;
  auto inter = BuildSchedule(options);
  REQUIRE(inter.ok());
  CHECK(inter->stages == Interleaved1F1BSchedule(4, 2, 8)->stages);
  options.forward_only = true;
  auto eval = BuildSchedule(options);
  REQUIRE(eval.ok());
  CHECK(eval->forward_only);
  CHECK(eval->num_chunks == 2);
}

TEST_CASE("BuildSchedule rejects chunks without interleaving and bad sizes") {
  ScheduleOptions options;
  options.kind = ScheduleKind::kGPipe;
  options.num_stages = 2;
  options.num_chunks = 2;
  options.num_microbatches = 4;
  CHECK_THAT(std::string(BuildSchedule(options).status().message()),
             Catch::Contains("gpipe: model chunks per stage v = 2 need the interleaved-1f1b"));
  options.kind = ScheduleKind::kZeroBubbleH2;
  CHECK_THAT(std::string(BuildSchedule(options).status().message()),
             Catch::Contains("zb-h2: model chunks per stage v = 2 need the interleaved-1f1b"));
  options.kind = ScheduleKind::kZeroBubbleV;
  options.num_chunks = 1;
  CHECK_THAT(std::string(BuildSchedule(options).status().message()),
             Catch::Contains("zb-v: needs v = 2 model chunks per stage (V placement), got 1"));
  options.kind = ScheduleKind::kInterleaved1F1B;
  options.num_chunks = 2;
  options.num_microbatches = 1;
  CHECK(absl::IsInvalidArgument(BuildSchedule(options).status()));
}

}  // namespace
}  // namespace mxmaca::scheduler
