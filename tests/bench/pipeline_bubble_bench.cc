// tests/bench/pipeline_bubble_bench.cc: measured pipeline bubble of the actor runtime
// against theory, on synthetic stages (actors/synthetic_stage_program.h) whose F / B / W
// sleep declared times, so p = 16 runs on real actors and messages on 2 cores.
//
// For each schedule (gpipe, 1f1b, interleaved-1f1b with v = 2; zb-h1, zb-h2, zb-v with v = 2
// on request, against their closed forms in scheduler/bubble_formulas.h), p in {4, 8, 16} and
// m in {4p, 8p}, it runs RunPipelineJob (DP 1, one pool thread per rank, a tiny parameter
// store so the optimizer and the report round trip cost microseconds) and prints:
//   theory     textbook bubble share of the step: (p-1)/(m+p-1) (GPipe, 1F1B) or
//              (p-1)/(v m+p-1) (interleaved); it assumes B and W run as ONE backward
//              whose input gradient leaves after W (Megatron's fused backward);
//   sim        scheduler::SimulateSchedule of the same op lists with the declared times
//              and no message latency, with B's gradient leaving when B ends (what the
//              stage actor does): the exact bubble of this runtime with free messages;
//   coord      1 - busy / wall per stage, mean over stages (TrainingSummary::
//              stage_bubble_fraction; wall = the slowest stage's time from receiving
//              its op list to sending its report; iterations after the first);
//   step       1 - mean stage busy / the coordinator's iteration time (op lists out to
//              the optimizer step done: includes data, reports and the optimizer);
//   the ratios coord/theory and coord/sim, the mean sleep overshoot per op (µs: measured
//   op time - declared) and the median hop and turnaround (tests/bench/
//   pipeline_trace_stats.h) from the run's trace.
// --opt_ms X declares the optimizer step's time (every applied step sleeps to X ms on its
// stage's strand: CoordinatorConfig::synthetic_optimizer_seconds); --post_validation
// 0|1|both runs without / with --optimizer-post-validation (both: each case twice, rows
// tagged "sync" / "postval"). The extra columns: idle ms = step ms - mean busy ms per stage
// - opt ms (the iteration's idle beyond the op and optimizer work), and rollbacks /
// confirmed optimistic steps. --log_interval N prints the coordinator's Megatron-style log
// line every N iterations (per-stage bubble %), as `mxmaca train` does.
//   bazel run -c opt //tests/bench:pipeline_bubble_bench [-- --f_ms 2 --b_ms 2 --w_ms 2
//       --dynamic 0|1 --slow_stage S --slow_factor X --opt_ms 0 --post_validation 0
//       --log_interval 0
//       --iters 4 --p 4,8,16 --schedules gpipe,1f1b,interleaved-1f1b --m_factors 4,8
//       --trace_dir /tmp]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "actors/pipeline_runtime.h"
#include "actors/synthetic_stage_program.h"
#include "layers/lr_schedule.h"
#include "scheduler/bubble_formulas.h"
#include "scheduler/schedule_factory.h"
#include "scheduler/schedule_simulator.h"
#include "tests/bench/pipeline_trace_stats.h"

namespace {

using namespace mxmaca;  // NOLINT: a benchmark's main file

std::vector<int> IntList(const std::string& s) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(s, ',')) {
    int v = 0;
    if (absl::SimpleAtoi(part, &v)) out.push_back(v);
  }
  return out;
}

// LoadAverage: /proc/loadavg's first three fields (the machine is shared).
std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

// RunJob: RunSyntheticJob's job (actors/synthetic_stage_program.cc: constant lr 1e-4, clip
// 1.0, no evaluation or checkpoints), with the coordinator's post-validation switch and a
// declared optimizer time.
absl::StatusOr<actors::TrainingSummary> RunJob(const actors::SyntheticJobOptions& o,
                                               bool post_validation, double opt_seconds) {
  absl::StatusOr<std::vector<actors::PipelineRank>> ranks = actors::BuildSyntheticRanks(o);
  if (!ranks.ok()) return ranks.status();
  scheduler::ScheduleOptions so;
  so.kind = o.schedule;
  so.num_stages = o.pipeline_size;
  so.num_chunks = o.num_chunks;
  so.num_microbatches = o.num_microbatches;
  absl::StatusOr<scheduler::PipelineSchedule> schedule = scheduler::BuildSchedule(so);
  if (!schedule.ok()) return schedule.status();
  layers::OptimizerParamSchedulerConfig lr;
  lr.max_lr = lr.min_lr = 1.0e-4;
  lr.lr_decay_style = layers::LrDecayStyle::kConstant;
  lr.start_wd = lr.end_wd = 0.0;
  absl::StatusOr<layers::OptimizerParamScheduler> lr_scheduler =
      layers::OptimizerParamScheduler::Create(lr);
  if (!lr_scheduler.ok()) return lr_scheduler.status();
  const int64_t gbs = o.micro_batch_size * o.num_microbatches * o.data_parallel_size;
  auto cc = std::make_shared<actors::CoordinatorConfig>();
  cc->train_iters = o.train_iters;
  cc->global_batch_size = gbs;
  cc->micro_batch_size = o.micro_batch_size;
  cc->num_microbatches = o.num_microbatches;
  cc->seq_length = o.seq_length;
  cc->clip_grad = 1.0;
  cc->log_interval = o.log_interval;
  cc->print = o.print;
  cc->eval_interval = 0;
  cc->eval_iters = 0;
  cc->scheduler = *lr_scheduler;
  cc->train_schedule = std::move(*schedule);
  cc->trace_file = o.trace_file;
  cc->dynamic_pipeline = o.dynamic;
  cc->on_iteration = o.on_iteration;
  cc->optimizer_post_validation = post_validation;
  cc->synthetic_optimizer_seconds = opt_seconds;
  actors::DataActorConfig dc;
  dc.train = std::make_shared<actors::SyntheticSampleDataset>(
      std::max<int64_t>(1, o.train_iters) * gbs, o.seq_length);
  dc.micro_batch_size = o.micro_batch_size;
  dc.seq_length = o.seq_length;
  actors::PipelineRuntimeOptions ro;
  ro.pipeline_size = o.pipeline_size;
  ro.data_parallel_size = o.data_parallel_size;
  ro.compute_threads = o.pipeline_size * o.data_parallel_size;
  ro.trace = o.trace_file.has_value();
  return actors::RunPipelineJob(std::move(*ranks), ro, cc, std::move(dc));
}

struct Row {
  std::string schedule;
  int p = 0, v = 1, m = 0;
  double theory = 0, sim = 0, coord = 0, step = 0, overshoot_us = 0, hop_us = 0, turn_us = 0;
  double explained = 0, hop90_us = 0, turn90_us = 0;
  double step_ms = 0;
  double idle_ms = 0;
  int64_t rollbacks = 0, confirmed = 0;
};

}  // namespace

int main(int argc, char** argv) {
  double f_ms = 2, b_ms = 2, w_ms = 2;
  int iters = 4;
  std::string p_list = "4,8,16", schedules = "gpipe,1f1b,interleaved-1f1b", m_factors = "4,8";
  // --dynamic 1: the dynamic policy; --slow_stage S --slow_factor X: stage S's ops take X
  // times the declared time (an uneven pipeline; "theory" and "sim" keep equal stages).
  bool dynamic = false;
  int slow_stage = -1;
  double slow_factor = 1.0;
  std::string trace_dir = "/tmp";
  double opt_ms = 0;
  std::string post_validation = "0";
  int64_t log_interval = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--f_ms") f_ms = std::atof(value.c_str());
    else if (flag == "--b_ms") b_ms = std::atof(value.c_str());
    else if (flag == "--w_ms") w_ms = std::atof(value.c_str());
    else if (flag == "--iters") iters = std::atoi(value.c_str());
    else if (flag == "--p") p_list = value;
    else if (flag == "--schedules") schedules = value;
    else if (flag == "--m_factors") m_factors = value;
    else if (flag == "--trace_dir") trace_dir = value;
    else if (flag == "--dynamic") dynamic = std::atoi(value.c_str()) != 0;
    else if (flag == "--slow_stage") slow_stage = std::atoi(value.c_str());
    else if (flag == "--slow_factor") slow_factor = std::atof(value.c_str());
    else if (flag == "--opt_ms") opt_ms = std::atof(value.c_str());
    else if (flag == "--post_validation") post_validation = value;
    else if (flag == "--log_interval") log_interval = std::atoll(value.c_str());
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (iters < 2) iters = 2;  // the first iteration warms up and is not measured
  std::printf("pipeline bubble: F %.3g ms, B %.3g ms, W %.3g ms per op and chunk, optimizer "
              "%.3g ms, DP 1, %d iterations (first not measured), one pool thread per rank\n",
              f_ms, b_ms, w_ms, opt_ms, iters);
  std::vector<bool> modes;
  if (post_validation == "0" || post_validation == "both") modes.push_back(false);
  if (post_validation == "1" || post_validation == "both") modes.push_back(true);
  if (modes.empty()) {
    std::fprintf(stderr, "--post_validation 0|1|both, not %s\n", post_validation.c_str());
    return 2;
  }
  std::printf("load average at the start: %s\n\n", LoadAverage().c_str());
  std::printf("| schedule | p | v | m | theory | sim | coord | step | coord/theory | coord/sim "
              "| explained | step ms | idle ms | overshoot us | hop p50/p90 us | turnaround "
              "p50/p90 us | rollbacks / confirmed |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  const std::string trace_path =
      absl::StrCat(trace_dir, "/mxmaca_bubble_bench_", getpid(), ".json");
  for (absl::string_view name : absl::StrSplit(schedules, ',')) {
    absl::StatusOr<scheduler::ScheduleKind> kind = scheduler::ParseScheduleKind(std::string_view(name.data(), name.size()));
    if (!kind.ok()) {
      std::fprintf(stderr, "%s\n", std::string(kind.status().message()).c_str());
      return 2;
    }
    const bool two_chunks = *kind == scheduler::ScheduleKind::kInterleaved1F1B ||
                            *kind == scheduler::ScheduleKind::kZeroBubbleV;
    const bool zero_bubble = *kind == scheduler::ScheduleKind::kZeroBubbleH1 ||
                             *kind == scheduler::ScheduleKind::kZeroBubbleH2 ||
                             *kind == scheduler::ScheduleKind::kZeroBubbleV;
    const int v = two_chunks ? 2 : 1;
    for (int p : IntList(p_list)) {
      for (int factor : IntList(m_factors)) {
       for (const bool postval : modes) {
        Row row;
        row.schedule = std::string(name);
        if (modes.size() > 1 || opt_ms > 0) row.schedule += postval ? " postval" : " sync";
        row.p = p;
        row.v = v;
        row.m = factor * p;
        row.theory = static_cast<double>(p - 1) / (v * row.m + p - 1);
        if (zero_bubble) {
          // The zero-bubble schedules' closed forms (scheduler/bubble_formulas.h, from the
          // paper's expressions with these T_F, T_B, T_W); NaN where none holds.
          absl::StatusOr<scheduler::PipelineBubble> closed = scheduler::ClosedFormBubble(
              *kind, scheduler::StageOpTimes{f_ms, b_ms, w_ms}, p, row.m, v);
          row.theory = closed.ok() ? closed->bubble_fraction : std::nan("");
        }

        scheduler::ScheduleOptions so;
        so.kind = *kind;
        so.num_stages = p;
        so.num_chunks = v;
        so.num_microbatches = row.m;
        absl::StatusOr<scheduler::PipelineSchedule> schedule = scheduler::BuildSchedule(so);
        if (!schedule.ok()) {
          std::fprintf(stderr, "%s\n", std::string(schedule.status().message()).c_str());
          return 1;
        }
        absl::StatusOr<scheduler::ScheduleTiming> sim = scheduler::SimulateSchedule(
            *schedule, scheduler::OpCosts::Uniform(p, f_ms, b_ms, w_ms, 0, false));
        row.sim = sim.ok() ? sim->bubble_fraction : std::nan("");

        actors::SyntheticJobOptions o;
        o.schedule = *kind;
        o.pipeline_size = p;
        o.num_chunks = v;
        o.num_microbatches = row.m;
        o.train_iters = iters;
        o.uniform = {f_ms * 1e-3, b_ms * 1e-3, w_ms * 1e-3};
        o.dynamic = dynamic;
        if (slow_stage >= 0 && slow_stage < p) {
          o.op_seconds.assign(p, std::vector<actors::SyntheticOpSeconds>(v, o.uniform));
          for (auto& c : o.op_seconds[slow_stage]) {
            c = {c.forward * slow_factor, c.backward_input * slow_factor,
                 c.backward_weight * slow_factor};
          }
        }
        o.trace_file = trace_path;
        o.log_interval = log_interval;
        if (log_interval > 0) {
          o.print = [](const std::string& line) { std::printf("%s\n", line.c_str()); };
        }
        std::vector<double> step_seconds;
        o.on_iteration = [&](const actors::IterationLogRecord& r) {
          step_seconds.push_back(r.elapsed_ms_per_iteration * 1e-3);
        };
        absl::StatusOr<actors::TrainingSummary> summary = RunJob(o, postval, opt_ms * 1e-3);
        if (!summary.ok() || !summary->ok) {
          std::fprintf(stderr, "%s p=%d m=%d failed: %s\n", row.schedule.c_str(), p, row.m,
                       summary.ok() ? summary->error.c_str()
                                    : std::string(summary.status().message()).c_str());
          return 1;
        }
        row.coord = bench::Mean(summary->stage_bubble_fraction);

        absl::StatusOr<std::vector<bench::TracedOp>> ops = bench::LoadTracedOps(trace_path);
        if (!ops.ok()) {
          std::fprintf(stderr, "%s\n", std::string(ops.status().message()).c_str());
          return 1;
        }
        // Iterations after the first: the step-based bubble and the sleep overshoot.
        const std::vector<bench::IterationBusy> busy = bench::BusyPerIteration(*ops, p, 2);
        std::vector<double> step_bubble, step_ms;
        for (const bench::IterationBusy& b : busy) {
          const size_t i = static_cast<size_t>(b.iteration - 1);
          if (i < step_seconds.size()) {
            step_bubble.push_back(1.0 - b.mean_busy_seconds / step_seconds[i]);
            step_ms.push_back(step_seconds[i] * 1e3);
          }
        }
        row.step = bench::Mean(step_bubble);
        row.step_ms = bench::Mean(step_ms);
        std::vector<double> busy_ms;
        for (const bench::IterationBusy& b : busy) busy_ms.push_back(b.mean_busy_seconds * 1e3);
        row.idle_ms = row.step_ms - bench::Mean(busy_ms) - opt_ms;
        row.rollbacks = summary->optimistic_steps_rolled_back;
        row.confirmed = summary->optimistic_steps_confirmed;
        std::vector<double> overshoot;
        for (const bench::TracedOp& op : *ops) {
          if (op.iteration < 2) continue;
          const double declared = op.kind == scheduler::OpKind::kForward ? f_ms
                                  : op.kind == scheduler::OpKind::kBackwardInput ? b_ms
                                                                                 : w_ms;
          overshoot.push_back(static_cast<double>(op.duration_us) - declared * 1e3);
        }
        row.overshoot_us = bench::Mean(overshoot);
        const bench::HopSamples hops = bench::MeasureHops(*ops, p, 1, v, 2);
        row.hop_us = bench::Percentile(hops.hop_us, 0.5);
        row.turn_us = bench::Percentile(hops.turnaround_us, 0.5);
        row.hop90_us = bench::Percentile(hops.hop_us, 0.9);
        row.turn90_us = bench::Percentile(hops.turnaround_us, 0.9);
        // explained: the simulator with the MEASURED costs: each op lasts its declared time
        // + the mean overshoot + the mean turnaround (the actor round trip that separates
        // back-to-back ops on a stage), a message arrives hop - turnaround after that.
        const double turn_ms = bench::Mean(hops.turnaround_us) * 1e-3;
        const double extra_ms = row.overshoot_us * 1e-3 + turn_ms;
        absl::StatusOr<scheduler::ScheduleTiming> explained = scheduler::SimulateSchedule(
            *schedule, scheduler::OpCosts::Uniform(
                           p, f_ms + extra_ms, b_ms + extra_ms, w_ms + extra_ms,
                           std::max(0.0, bench::Mean(hops.hop_us) * 1e-3 - turn_ms), false));
        // The turnaround is idle time on the stage: count only the declared op + overshoot
        // as busy.
        if (explained.ok()) {
          double busy = 0;
          for (double b : explained->busy) busy += b;
          const double ops_per_stage = 3.0 * row.m * v;
          busy -= turn_ms * ops_per_stage * p;
          row.explained = 1.0 - busy / (p * explained->makespan);
        } else {
          row.explained = std::nan("");
        }
        std::printf("| %s | %d | %d | %d | %.4f | %.4f | %.4f | %.4f | %.3f | %.3f | %.4f | %.1f "
                    "| %.2f | %.0f | %.0f / %.0f | %.0f / %.0f | %lld / %lld |\n",
                    row.schedule.c_str(), row.p, row.v, row.m, row.theory, row.sim, row.coord,
                    row.step, row.coord / row.theory, row.coord / row.sim, row.explained,
                    row.step_ms, row.idle_ms, row.overshoot_us, row.hop_us, row.hop90_us,
                    row.turn_us, row.turn90_us, static_cast<long long>(row.rollbacks),
                    static_cast<long long>(row.confirmed));
        std::fflush(stdout);
       }
      }
    }
  }
  std::remove(trace_path.c_str());
  std::printf("\nload average at the end: %s\n", LoadAverage().c_str());
  return 0;
}
