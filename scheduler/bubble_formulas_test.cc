// Tests bubble_formulas.h: for every schedule kind, SimulateSchedule on the generated op
// lists (OpCostsFor, no latency) reproduces ClosedFormBubble exactly — step time, idle per
// stage and busy-span bubble — for seeded random integer op times and every m the formula
// claims up to 4p; outside its conditions ClosedFormBubble refuses. Times are integers
// (multiples of v for chunked schedules), so every simulated time is an exact sum of
// integers in double and the comparisons are exact.
#include "scheduler/bubble_formulas.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <random>
#include <vector>

#include "scheduler/schedule_factory.h"

namespace mxmaca::scheduler {
namespace {

// Simulates `kind` and compares with the closed form; returns the measured bubble.
PipelineBubble CheckAgainstSimulator(ScheduleKind kind, const StageOpTimes& t, int p, int m,
                                     int v) {
  INFO(ScheduleKindName(kind) << " p=" << p << " m=" << m << " v=" << v << " T_F=" << t.forward
                              << " T_B=" << t.backward_input << " T_W=" << t.backward_weight);
  ScheduleOptions options;
  options.kind = kind;
  options.num_stages = p;
  options.num_chunks = v;
  options.num_microbatches = m;
  auto schedule = BuildSchedule(options);
  REQUIRE(schedule.ok());
  auto timing = SimulateSchedule(*schedule, OpCostsFor(kind, t, p, v));
  REQUIRE(timing.ok());
  const double busy = m * (t.forward + t.backward_input + t.backward_weight);
  for (double b : timing->busy) REQUIRE(b == busy);
  const PipelineBubble measured = MeasuredBubble(*timing, busy);
  auto formula = ClosedFormBubble(kind, t, p, m, v);
  REQUIRE(formula.ok());
  CHECK(measured.step_time == formula->step_time);
  CHECK(measured.idle_per_stage == formula->idle_per_stage);
  CHECK(measured.span_bubble == formula->span_bubble);
  CHECK(measured.bubble_fraction == Approx(formula->bubble_fraction).epsilon(1e-12));
  return measured;
}

StageOpTimes RandomTimes(std::mt19937& rng, int multiple_of) {
  std::uniform_int_distribution<int> d(1, 8);
  return {static_cast<double>(d(rng) * multiple_of), static_cast<double>(d(rng) * multiple_of),
          static_cast<double>(d(rng) * multiple_of)};
}

TEST_CASE("GPipe, 1F1B, ZB-H1 and ZB-H2 match the simulator for random op times") {
  std::mt19937 rng(20240111);
  for (int trial = 0; trial < 12; ++trial) {
    const StageOpTimes t = RandomTimes(rng, 1);
    for (int p : {1, 2, 3, 5, 8}) {
      for (int m = 1; m <= 4 * p; ++m) {
        CheckAgainstSimulator(ScheduleKind::kGPipe, t, p, m, 1);
        CheckAgainstSimulator(ScheduleKind::kOneFOneB, t, p, m, 1);
        if (m >= p) CheckAgainstSimulator(ScheduleKind::kZeroBubbleH1, t, p, m, 1);
        if (m >= 2 * p - 1) CheckAgainstSimulator(ScheduleKind::kZeroBubbleH2, t, p, m, 1);
      }
    }
  }
}

TEST_CASE("interleaved 1F1B matches (p-1)(T_F+T_B+T_W)/v for m a multiple of p") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 8; ++trial) {
    for (int v : {2, 3}) {
      const StageOpTimes t = RandomTimes(rng, v);  // chunk ops T / v stay integers
      for (int p : {2, 3, 4, 8}) {
        for (int m = p; m <= 4 * p; m += p) {
          CheckAgainstSimulator(ScheduleKind::kInterleaved1F1B, t, p, m, v);
        }
      }
    }
  }
}

TEST_CASE("ZB-V matches (p-1)t/2 idle with equal op times") {
  for (double t : {2.0, 6.0}) {
    for (int p = 1; p <= 9; ++p) {
      for (int m = 2 * p; m <= 4 * p; ++m) {
        CheckAgainstSimulator(ScheduleKind::kZeroBubbleV, {t, t, t}, p, m, 2);
      }
    }
  }
}

TEST_CASE("the paper's special cases") {
  // Equal times: ZB-H2's parallelogram has no bubble inside any stage's span; ZB-H1 keeps
  // (p-1)(T_F+T_B-T_W) = (p-1) t; 1F1B (p-1) 3t.
  const StageOpTimes eq{1, 1, 1};
  for (int p : {2, 4, 8}) {
    CHECK(ClosedFormBubble(ScheduleKind::kZeroBubbleH2, eq, p, 2 * p)->span_bubble == 0);
    CHECK(ClosedFormBubble(ScheduleKind::kZeroBubbleH1, eq, p, 2 * p)->idle_per_stage == p - 1);
    CHECK(ClosedFormBubble(ScheduleKind::kOneFOneB, eq, p, 2 * p)->idle_per_stage == 3 * (p - 1));
  }
  // T_W <= T_F and 2 T_W <= T_F + T_B: ZB-H2's span is the paper's (p-1)(T_F+T_B-2T_W).
  const StageOpTimes t{3, 4, 2};
  CHECK(ClosedFormBubble(ScheduleKind::kZeroBubbleH2, t, 4, 8)->span_bubble == 3 * (3 + 4 - 4));
  // T_W <= min(T_F, T_B): ZB-H1's idle is the paper's (p-1)(T_F+T_B-T_W).
  CHECK(ClosedFormBubble(ScheduleKind::kZeroBubbleH1, t, 4, 8)->idle_per_stage == 3 * (3 + 4 - 2));
}

TEST_CASE("ClosedFormBubble refuses bad input and claims nothing outside its conditions") {
  const StageOpTimes eq{1, 1, 1};
  CHECK(absl::IsInvalidArgument(ClosedFormBubble(ScheduleKind::kGPipe, eq, 0, 4).status()));
  CHECK(absl::IsInvalidArgument(ClosedFormBubble(ScheduleKind::kGPipe, {-1, 1, 1}, 2, 4).status()));
  CHECK(absl::IsInvalidArgument(ClosedFormBubble(ScheduleKind::kZeroBubbleV, eq, 2, 4).status()));
  CHECK(absl::IsInvalidArgument(ClosedFormBubble(ScheduleKind::kOneFOneB, eq, 2, 4, 2).status()));
  CHECK(
      absl::IsFailedPrecondition(ClosedFormBubble(ScheduleKind::kZeroBubbleH1, eq, 4, 3).status()));
  CHECK(
      absl::IsFailedPrecondition(ClosedFormBubble(ScheduleKind::kZeroBubbleH2, eq, 4, 6).status()));
  CHECK(absl::IsFailedPrecondition(
      ClosedFormBubble(ScheduleKind::kInterleaved1F1B, eq, 4, 6, 2).status()));
  CHECK(absl::IsFailedPrecondition(
      ClosedFormBubble(ScheduleKind::kZeroBubbleV, {1, 2, 1}, 4, 8, 2).status()));
  CHECK(absl::IsFailedPrecondition(
      ClosedFormBubble(ScheduleKind::kZeroBubbleV, eq, 10, 20, 2).status()));
  CHECK_THAT(
      std::string(ClosedFormBubble(ScheduleKind::kZeroBubbleV, eq, 4, 7, 2).status().message()),
      Catch::Contains("zb-v: no closed-form bubble claimed unless m >= 2p"));
}

// Hidden (run with the tag): the simulated bubble table for p in {4, 8}, m in {2p, 4p}.
TEST_CASE("bubble table", "[.table]") {
  struct Row {
    ScheduleKind kind;
    int v;
    bool costed;  // zb-v built for the table's times (ScheduleOptions::op_costs)
  };
  const std::vector<Row> rows = {
      {ScheduleKind::kGPipe, 1, false},           {ScheduleKind::kOneFOneB, 1, false},
      {ScheduleKind::kInterleaved1F1B, 2, false}, {ScheduleKind::kZeroBubbleH1, 1, false},
      {ScheduleKind::kZeroBubbleH2, 1, false},    {ScheduleKind::kZeroBubbleV, 2, false},
      {ScheduleKind::kZeroBubbleV, 2, true}};
  for (const StageOpTimes& t : {StageOpTimes{2, 2, 2}, StageOpTimes{2, 4, 2}}) {
    std::printf("T_F=%g T_B=%g T_W=%g\n", t.forward, t.backward_input, t.backward_weight);
    std::printf("%-17s %2s %3s %8s %8s %8s %8s %7s\n", "schedule", "p", "m", "step", "idle", "span",
                "fraction", "peak");
    for (const Row& row : rows) {
      for (int p : {4, 8}) {
        for (int m : {2 * p, 4 * p}) {
          ScheduleOptions o;
          o.kind = row.kind;
          o.num_stages = p;
          o.num_chunks = row.v;
          o.num_microbatches = m;
          if (row.costed) o.op_costs = OpCostsFor(row.kind, t, p, row.v);
          auto s = BuildSchedule(o);
          REQUIRE(s.ok());
          auto timing = SimulateSchedule(*s, OpCostsFor(row.kind, t, p, row.v));
          REQUIRE(timing.ok());
          const PipelineBubble b =
              MeasuredBubble(*timing, m * (t.forward + t.backward_input + t.backward_weight));
          const auto peaks = PeakStashedMicrobatches(*s);
          std::printf("%-17s %2d %3d %8g %8g %8g %8.4f %7g\n",
                      (ScheduleKindName(row.kind) + (row.costed ? " (costed)" : "")).c_str(), p, m,
                      b.step_time, b.idle_per_stage, b.span_bubble, b.bubble_fraction,
                      peaks[0] / static_cast<double>(row.v));
        }
      }
    }
  }
}

}  // namespace
}  // namespace mxmaca::scheduler
