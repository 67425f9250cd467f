// tests/bench/pipeline_trace_stats_test.cc: the benchmarks' trace analysis on traces
// written by the runtime's own ChromeTraceWriter, with op times drawn at random and the
// expected hops / turnarounds / busy times computed from how the trace was built.
#include "tests/bench/pipeline_trace_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "actors/trace.h"

namespace mxmaca::bench {
namespace {

std::string TempPath(const char* name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name + std::to_string(getpid()) + ".json";
}

actors::TraceSpan Span(const std::string& name, int32_t track, int64_t start, int64_t dur,
                       int64_t iteration) {
  actors::TraceSpan s;
  s.name = name;
  s.category = "compute";
  s.track = track;
  s.start_us = start;
  s.duration_us = dur;
  s.iteration = iteration;
  return s;
}

TEST_CASE("LoadTracedOps parses op names, chunks and times; MeasureHops splits hop and "
          "turnaround") {
  std::mt19937 rng(424242);
  std::uniform_int_distribution<int64_t> dur(50, 500), gap(1, 40);
  const std::string path = TempPath("trace_stats");
  auto writer = actors::ChromeTraceWriter::Open(path);
  REQUIRE(writer.ok());
  // Two stages, one micro-batch pair per iteration, built so that:
  //   stage 1's F0 starts `h0` after stage 0's F0 ends while stage 1 was idle  -> hop h0;
  //   stage 0's F1 starts `t0` after its F0 ends (no input from another stage) -> turnaround t0;
  //   stage 1's F1 starts `t1` after its F0 ends, stage 0's F1 ended before that -> turnaround t1;
  //   stage 0's B1 starts `h1` after stage 1's B1 ends, stage 0 idle since its F1 -> hop h1.
  // Iteration 1 is the warm-up and must be ignored (first_iteration = 2).
  std::vector<double> hops, turnarounds;
  double busy_sum = 0;
  int64_t first_start = 0, last_end = 0;
  for (int64_t it = 1; it <= 2; ++it) {
    const int64_t base = it * 100000;
    const int64_t f00 = dur(rng), f01 = dur(rng), f10 = dur(rng), f11 = dur(rng), b11 = dur(rng),
                  b01 = dur(rng);
    const int64_t h0 = gap(rng), t0 = gap(rng), t1 = gap(rng), h1 = gap(rng);
    const int64_t s0_f0 = base, s0_f1 = s0_f0 + f00 + t0;
    const int64_t s1_f0 = s0_f0 + f00 + h0;
    // Stage 1's F1 needs stage 0's F1 (ends s0_f1 + f01); make its own F0 end later.
    const int64_t s1_f1 = std::max(s1_f0 + f10, s0_f1 + f01) + t1;
    const int64_t s1_b1 = s1_f1 + f11 + gap(rng);
    const int64_t s0_b1 = s1_b1 + b11 + h1;
    REQUIRE(s0_b1 > s0_f1 + f01);  // stage 0 idle when the gradient left stage 1
    (*writer)->Add(Span("F0", 0, s0_f0, f00, it));
    (*writer)->Add(Span("F1.c0", 0, s0_f1, f01, it));  // ".c0" parses as chunk 0 too
    (*writer)->Add(Span("F0", 1, s1_f0, f10, it));
    (*writer)->Add(Span("F1", 1, s1_f1, f11, it));
    (*writer)->Add(Span("B1", 1, s1_b1, b11, it));
    (*writer)->Add(Span("B1", 0, s0_b1, b01, it));
    if (it == 2) {
      hops = {static_cast<double>(h0), static_cast<double>(h1)};
      // Stage 1's F1 waited for its own F0 only when that ended after stage 0's F1.
      if (s1_f0 + f10 > s0_f1 + f01) {
        turnarounds = {static_cast<double>(t0), static_cast<double>(t1),
                       static_cast<double>(s1_b1 - s1_f1 - f11)};
      } else {
        hops.push_back(static_cast<double>(t1));
        turnarounds = {static_cast<double>(t0), static_cast<double>(s1_b1 - s1_f1 - f11)};
      }
      busy_sum = static_cast<double>(f00 + f01 + f10 + f11 + b11 + b01);
      first_start = s0_f0;
      last_end = s0_b1 + b01;
    }
  }
  actors::TraceSpan optimizer = Span("optimizer", 0, 300000, 10, 2);
  optimizer.category = "optimizer";
  (*writer)->Add(optimizer);  // not an op: skipped
  REQUIRE((*writer)->Close().ok());

  auto ops = LoadTracedOps(path);
  REQUIRE(ops.ok());
  REQUIRE(ops->size() == 12);
  CHECK((*ops)[1].kind == scheduler::OpKind::kForward);
  CHECK((*ops)[1].microbatch == 1);
  CHECK((*ops)[4].kind == scheduler::OpKind::kBackwardInput);
  CHECK((*ops)[4].rank == 1);

  HopSamples s = MeasureHops(*ops, /*p=*/2, /*dp=*/1, /*v=*/1, /*first_iteration=*/2);
  std::sort(s.hop_us.begin(), s.hop_us.end());
  std::sort(s.turnaround_us.begin(), s.turnaround_us.end());
  std::sort(hops.begin(), hops.end());
  std::sort(turnarounds.begin(), turnarounds.end());
  CHECK(s.hop_us == hops);
  CHECK(s.turnaround_us == turnarounds);

  const std::vector<IterationBusy> busy = BusyPerIteration(*ops, 2, 2);
  REQUIRE(busy.size() == 1);
  CHECK(busy[0].iteration == 2);
  // Integer microseconds summed in double: exact.
  CHECK(busy[0].mean_busy_seconds == Approx(busy_sum * 1e-6 / 2).epsilon(1e-12));
  CHECK(busy[0].makespan_seconds == Approx((last_end - first_start) * 1e-6).epsilon(1e-12));
  std::remove(path.c_str());
}

TEST_CASE("LoadTracedOps rejects a compute span that is not an op, naming it") {
  const std::string path = TempPath("trace_stats_bad");
  auto writer = actors::ChromeTraceWriter::Open(path);
  REQUIRE(writer.ok());
  (*writer)->Add(Span("X7", 0, 0, 1, 1));
  REQUIRE((*writer)->Close().ok());
  auto ops = LoadTracedOps(path);
  REQUIRE(!ops.ok());
  CHECK(std::string(ops.status().message()).find("'X7'") != std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("Percentile and Mean") {
  CHECK(Percentile({5, 1, 3, 2, 4}, 0.5) == 3);
  CHECK(Percentile({5, 1, 3, 2, 4}, 0.9) == 5);
  CHECK(Percentile({5, 1, 3, 2, 4}, 0.0) == 1);
  CHECK(Mean({1, 2, 3, 6}) == 3);
  CHECK(std::isnan(Mean({})));
}

}  // namespace
}  // namespace mxmaca::bench
