// tests/bench/actor_hop_bench.cc: the actor runtime's per-message overhead and its share
// of a real pipeline step.
//
// (a) Hop latency: a two-stage synthetic pipeline (actors/synthetic_stage_program.h) whose
//     ops take zero time, 1F1B over many micro-batches, traced; from the trace
//     (tests/bench/pipeline_trace_stats.h): hop = producer op end -> consumer op start
//     when the consumer was idle waiting for that message (OpFinished to the producer's
//     actor, ActivationMessage to the consumer's actor, post to its strand, a pool thread
//     picks it up); turnaround = one op's end -> the next op's start on the same stage
//     when the next op's inputs were already there (the strand -> actor -> strand round
//     trip every op pays). Also the wall time per op and messages per second; then again
//     with real [1, 256, payload_h] fp32 payloads (each op copies its input: the op body is the
//     copy, the hop should not change since messages hand over a shared buffer).
// (b) Share of a step: a real GPT through `mxmaca train`'s entry point (api::Train; hidden
//     512, 4 layers, 8 heads, seq 256, micro-batch 1, 8 micro-batches, PP 2, 1F1B, mock data,
//     NullTokenizer vocab 4095, 2 threads), traced. Reports the step time, the measured
//     makespan of the ops, the makespan SimulateSchedule predicts from the measured per-stage
//     op times with free messages, and the runtime overhead share two ways:
//       measured: (ops makespan - simulated makespan) / step time;
//       estimate: (turnaround x ops on a stage + hop x 2 (p - 1) critical-path messages) /
//                 step time, with (a)'s medians and the GPT run's own.
// Targets from the issue: hop under 20 us, overhead under 2%. Printed, not asserted.
//   bazel run -c opt //tests/bench:actor_hop_bench [-- --microbatches 512 --iters 3
//       --gpt_iters 4 --trace_dir /tmp --skip_gpt 0 --payload_h 512]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

#include "absl/strings/str_cat.h"
#include "actors/synthetic_stage_program.h"
#include "api/train/train_command.h"
#include "scheduler/schedule_factory.h"
#include "scheduler/schedule_simulator.h"
#include "tests/bench/pipeline_trace_stats.h"

namespace {

using namespace mxmaca;  // NOLINT: a benchmark's main file

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

void PrintSamples(const char* what, const std::vector<double>& v) {
  std::printf("  %-11s n=%-6zu mean %7.1f us  p10 %7.1f  p50 %7.1f  p90 %7.1f  p99 %7.1f\n",
              what, v.size(), bench::Mean(v), bench::Percentile(v, 0.1),
              bench::Percentile(v, 0.5), bench::Percentile(v, 0.9), bench::Percentile(v, 0.99));
}

struct HopResult {
  double hop_p50 = 0, turn_p50 = 0, hop_mean = 0, turn_mean = 0;
};

// (a): zero-time ops, p = 2. real_payload: activations of [1, 256, payload_h] fp32 that
// each op copies from its input (the copy is op time; the message itself is zero-copy).
int RunHops(int m, int iters, bool real_payload, int payload_h, const std::string& trace_path,
            HopResult* out) {
  actors::SyntheticJobOptions o;
  o.schedule = scheduler::ScheduleKind::kOneFOneB;
  o.pipeline_size = 2;
  o.num_microbatches = m;
  o.train_iters = iters;
  o.uniform = {0.0, 0.0, 0.0};
  if (real_payload) {
    o.real_payload = true;
    o.micro_batch_size = 1;
    o.seq_length = 256;
    o.hidden_size = payload_h;
  }
  o.trace_file = trace_path;
  std::vector<double> step_seconds;
  o.on_iteration = [&](const actors::IterationLogRecord& r) {
    step_seconds.push_back(r.elapsed_ms_per_iteration * 1e-3);
  };
  absl::StatusOr<actors::TrainingSummary> summary = actors::RunSyntheticJob(o);
  if (!summary.ok() || !summary->ok) {
    std::fprintf(stderr, "synthetic run failed: %s\n",
                 summary.ok() ? summary->error.c_str()
                              : std::string(summary.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<std::vector<bench::TracedOp>> ops = bench::LoadTracedOps(trace_path);
  if (!ops.ok()) {
    std::fprintf(stderr, "%s\n", std::string(ops.status().message()).c_str());
    return 1;
  }
  const bench::HopSamples s = bench::MeasureHops(*ops, 2, 1, 1, 2);
  std::vector<double> op_us;
  for (const bench::TracedOp& op : *ops) {
    if (op.iteration >= 2) op_us.push_back(static_cast<double>(op.duration_us));
  }
  std::vector<double> timed(step_seconds.begin() + 1, step_seconds.end());
  const double step = bench::Mean(timed);
  std::printf("(a) two stages, 1F1B, m = %d zero-time ops per kind, %d iterations (first not "
              "measured), %s\n", m, iters,
              real_payload ? absl::StrCat("[1, 256, ", payload_h,
                                          "] fp32 payloads filled or copied by each op")
                                 .c_str()
                           : "one-float payloads");
  PrintSamples("hop", s.hop_us);
  PrintSamples("turnaround", s.turnaround_us);
  PrintSamples("op body", op_us);
  std::printf("  step %.2f ms = %.1f us per op on a stage (3m ops), %.0f activation/gradient "
              "messages per second\n",
              step * 1e3, step * 1e6 / (3.0 * m), 2.0 * m / step);
  out->hop_p50 = bench::Percentile(s.hop_us, 0.5);
  out->turn_p50 = bench::Percentile(s.turnaround_us, 0.5);
  out->hop_mean = bench::Mean(s.hop_us);
  out->turn_mean = bench::Mean(s.turnaround_us);
  return 0;
}

// (b): a real GPT at PP 2.
int RunGpt(int iters, const std::string& trace_path, const HopResult& hops) {
  const int p = 2, m = 8;
  const std::vector<std::string> args = {
      "--num-layers", "4", "--hidden-size", "512", "--num-attention-heads", "8",
      "--seq-length", "256", "--max-position-embeddings", "256", "--micro-batch-size", "1",
      "--global-batch-size", std::to_string(m), "--train-iters", std::to_string(iters),
      "--lr", "1e-4", "--mock-data", "--eval-iters", "0", "--log-interval", "1000",
      "--tokenizer-type", "NullTokenizer", "--vocab-size", "4095", "--num-threads", "2",
      "--pipeline-model-parallel-size", std::to_string(p), "--world-size", std::to_string(p),
      "--pipeline-schedule", "1f1b", "--trace-file", trace_path};
  std::vector<double> step_seconds;
  absl::StatusOr<actors::TrainingSummary> summary = api::Train(
      args, [](const std::string&) {},
      [&](const actors::IterationLogRecord& r) {
        step_seconds.push_back(r.elapsed_ms_per_iteration * 1e-3);
      });
  if (!summary.ok() || !summary->ok) {
    std::fprintf(stderr, "GPT run failed: %s\n",
                 summary.ok() ? summary->error.c_str()
                              : std::string(summary.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<std::vector<bench::TracedOp>> ops = bench::LoadTracedOps(trace_path);
  if (!ops.ok()) {
    std::fprintf(stderr, "%s\n", std::string(ops.status().message()).c_str());
    return 1;
  }
  // Per-stage mean op times (iterations after the first) for the simulator.
  scheduler::OpCosts costs;
  costs.per_stage.assign(p, {0, 0, 0});
  std::vector<std::array<int, 3>> counts(p, {0, 0, 0});
  for (const bench::TracedOp& op : *ops) {
    if (op.iteration < 2) continue;
    costs.per_stage[op.rank][static_cast<int>(op.kind)] += static_cast<double>(op.duration_us) * 1e-6;
    ++counts[op.rank][static_cast<int>(op.kind)];
  }
  for (int s = 0; s < p; ++s) {
    for (int k = 0; k < 3; ++k) costs.per_stage[s][k] /= std::max(1, counts[s][k]);
  }
  scheduler::ScheduleOptions so;
  so.kind = scheduler::ScheduleKind::kOneFOneB;
  so.num_stages = p;
  so.num_microbatches = m;
  absl::StatusOr<scheduler::PipelineSchedule> schedule = scheduler::BuildSchedule(so);
  if (!schedule.ok()) return 1;
  absl::StatusOr<scheduler::ScheduleTiming> ideal = scheduler::SimulateSchedule(*schedule, costs);
  if (!ideal.ok()) {
    std::fprintf(stderr, "%s\n", std::string(ideal.status().message()).c_str());
    return 1;
  }
  const std::vector<bench::IterationBusy> busy = bench::BusyPerIteration(*ops, p, 2);
  std::vector<double> makespan, step;
  for (const bench::IterationBusy& b : busy) {
    const size_t i = static_cast<size_t>(b.iteration - 1);
    if (i < step_seconds.size()) {
      makespan.push_back(b.makespan_seconds);
      step.push_back(step_seconds[i]);
    }
  }
  const bench::HopSamples s = bench::MeasureHops(*ops, p, 1, 1, 2);
  const double step_s = bench::Mean(step), makespan_s = bench::Mean(makespan);
  std::printf("\n(b) GPT hidden 512, 4 layers, seq 256, micro-batch 1, m = %d, PP %d (1F1B), "
              "2 threads, %d iterations (first not measured)\n", m, p, iters);
  for (int s2 = 0; s2 < p; ++s2) {
    std::printf("  stage %d mean op ms: F %.2f  B %.2f  W %.2f\n", s2,
                costs.per_stage[s2][0] * 1e3, costs.per_stage[s2][1] * 1e3,
                costs.per_stage[s2][2] * 1e3);
  }
  PrintSamples("hop", s.hop_us);
  PrintSamples("turnaround", s.turnaround_us);
  const double measured = (makespan_s - ideal->makespan) / step_s;
  const double ops_per_stage = 3.0 * m;
  const double critical_messages = 2.0 * (p - 1);
  const double estimate_a =
      (hops.turn_mean * ops_per_stage + hops.hop_mean * critical_messages) * 1e-6 / step_s;
  const double estimate_gpt = (bench::Mean(s.turnaround_us) * ops_per_stage +
                               bench::Mean(s.hop_us) * critical_messages) * 1e-6 / step_s;
  std::printf("  step %.1f ms, ops makespan %.1f ms, simulated makespan (measured op times, "
              "free messages) %.1f ms, simulated bubble %.3f\n",
              step_s * 1e3, makespan_s * 1e3, ideal->makespan * 1e3, ideal->bubble_fraction);
  std::printf("  step outside the ops (data, grad norm, reports, optimizer): %.1f ms = %.2f%%\n",
              (step_s - makespan_s) * 1e3, 100.0 * (step_s - makespan_s) / step_s);
  std::printf("  runtime overhead share: measured (makespan - simulated) / step = %.2f%%; "
              "estimate from (a)'s means = %.2f%%; from this run's means = %.2f%%  "
              "(target < 2%%)\n",
              100.0 * measured, 100.0 * estimate_a, 100.0 * estimate_gpt);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int m = 512, iters = 3, gpt_iters = 4, payload_h = 512;
  bool skip_gpt = false;
  std::string trace_dir = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--microbatches") m = std::atoi(value.c_str());
    else if (flag == "--iters") iters = std::max(2, std::atoi(value.c_str()));
    else if (flag == "--gpt_iters") gpt_iters = std::max(2, std::atoi(value.c_str()));
    else if (flag == "--skip_gpt") skip_gpt = value != "0";
    else if (flag == "--payload_h") payload_h = std::max(1, std::atoi(value.c_str()));
    else if (flag == "--trace_dir") trace_dir = value;
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  std::printf("actor hop benchmark; load average at the start: %s\n\n", LoadAverage().c_str());
  const std::string trace = absl::StrCat(trace_dir, "/mxmaca_hop_bench_", getpid(), ".json");
  HopResult hops;
  if (int rc = RunHops(m, iters, false, payload_h, trace, &hops); rc != 0) return rc;
  HopResult with_payload;
  if (int rc = RunHops(m, iters, true, payload_h, trace, &with_payload); rc != 0) return rc;
  if (!skip_gpt) {
    if (int rc = RunGpt(gpt_iters, trace, hops); rc != 0) return rc;
  }
  std::remove(trace.c_str());
  std::printf("\nload average at the end: %s\n", LoadAverage().c_str());
  return 0;
}
