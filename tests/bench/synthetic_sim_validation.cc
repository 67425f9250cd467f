// tests/bench/synthetic_sim_validation.cc: the simulator's step time against the actor
// runtime on synthetic stages (actors/synthetic_stage_program.h: F / B / W sleep declared
// times, one pool thread per rank, so p = 16 runs on 2 cores), issue 11's "the synthetic
// backend at p up to 16 ... within 10% of measured step time".
//
// For each schedule (1f1b, interleaved-1f1b v 2, zb-h1, gpipe), p in {2, 4, 8, 16} and
// m = 2p, it runs RunSyntheticJob for --iters iterations and takes the median "elapsed
// time per iteration" of iterations 3..iters (the coordinator's step: op lists out, every
// op, the gradient sync of a tiny tensor, the optimizer and the reports back). It predicts
// the same step with the shared-worker replay (api/simulate/shared_worker_replay.h, p
// workers: sleeping ops use no CPU) two ways:
//   declared    the declared op times only (what an uncalibrated model knows);
//   calibrated  each op + the cost table's op turnaround + the sleep overshoot of a
//               synthetic op (measured here: median lateness of 40 sleep_until calls of the
//               declared length; the synthetic backend's own op cost, timer slack and
//               wake-up), messages after the table's pipeline hop, plus its per-step overhead
//               (`mxmaca calibrate --output FILE`, given with --cost_table FILE; without it
//               the table's terms are zero).
// Errors are predicted / measured - 1. The load average is printed (shared machine).
//   bazel run -c opt //tests/bench:synthetic_sim_validation -- [--cost_table FILE]
//       [--f_ms 2 --b_ms 2 --w_ms 2 --iters 6 --p 2,4,8,16 --m_factor 2]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "actors/synthetic_stage_program.h"
#include "api/calibrate/cost_table.h"
#include "api/simulate/shared_worker_replay.h"
#include "scheduler/schedule_factory.h"
#include "scheduler/schedule_simulator.h"

namespace {

using namespace mxmaca;  // NOLINT: a benchmark's main file

double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double x = 0;
  in >> x;
  return x;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// SleepOvershootSeconds: median lateness of sleep_until(now + seconds), 40 samples.
double SleepOvershootSeconds(double seconds) {
  std::vector<double> late;
  for (int i = 0; i < 40; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto until = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double>(seconds));
    std::this_thread::sleep_until(until);
    late.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - until).count());
  }
  return Median(late);
}

}  // namespace

int main(int argc, char** argv) {
  double f_ms = 2, b_ms = 2, w_ms = 2;
  int iters = 6, m_factor = 2;
  std::vector<int> ps = {2, 4, 8, 16};
  std::string table_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--f_ms") f_ms = std::atof(v.c_str());
    if (k == "--b_ms") b_ms = std::atof(v.c_str());
    if (k == "--w_ms") w_ms = std::atof(v.c_str());
    if (k == "--iters") iters = std::atoi(v.c_str());
    if (k == "--m_factor") m_factor = std::atoi(v.c_str());
    if (k == "--cost_table") table_path = v;
    if (k == "--p") {
      ps.clear();
      for (absl::string_view part : absl::StrSplit(v, ',')) {
        int x = 0;
        if (absl::SimpleAtoi(part, &x)) ps.push_back(x);
      }
    }
  }
  api::CostTable table;  // zeros: declared times only
  if (!table_path.empty()) {
    auto loaded = api::LoadCostTable(table_path);
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
      return 1;
    }
    table = *loaded;
  }
  std::printf("synthetic stages: F %.2f ms, B %.2f ms, W %.2f ms; m = %d p; %d iterations; "
              "cost table %s (op turnaround %.1f us, hop %.1f us, step overhead %.3f ms)\n",
              f_ms, b_ms, w_ms, m_factor, iters, table_path.empty() ? "(none)" : table_path.c_str(),
              1e6 * table.op_overhead_s, 1e6 * table.p2p.latency_s, 1e3 * table.step_overhead_s);
  std::printf("%-18s %3s %4s %12s %12s %8s %12s %8s %9s %6s\n", "schedule", "p", "m",
              "measured ms", "declared ms", "error", "calibrated", "error", "sleep+us", "load");
  struct Kind {
    const char* name;
    scheduler::ScheduleKind kind;
    int v;
  };
  const Kind kinds[] = {{"1f1b", scheduler::ScheduleKind::kOneFOneB, 1},
                        {"interleaved-1f1b", scheduler::ScheduleKind::kInterleaved1F1B, 2},
                        {"zb-h1", scheduler::ScheduleKind::kZeroBubbleH1, 1},
                        {"gpipe", scheduler::ScheduleKind::kGPipe, 1}};
  for (const Kind& k : kinds) {
    for (int p : ps) {
      const int m = m_factor * p;
      actors::SyntheticJobOptions o;
      o.schedule = k.kind;
      o.pipeline_size = p;
      o.num_chunks = k.v;
      o.num_microbatches = m;
      o.train_iters = iters;
      o.uniform = {f_ms / 1e3 / k.v, b_ms / 1e3 / k.v, w_ms / 1e3 / k.v};
      o.log_interval = 1;
      std::vector<double> step_ms;
      o.on_iteration = [&](const actors::IterationLogRecord& r) {
        if (r.iteration > 2) step_ms.push_back(r.elapsed_ms_per_iteration);
      };
      const double load = LoadAverage();
      const double overshoot = SleepOvershootSeconds(o.uniform.forward);
      auto summary = actors::RunSyntheticJob(o);
      if (!summary.ok() || !summary->ok) {
        std::fprintf(stderr, "%s p %d: %s\n", k.name, p,
                     summary.ok() ? summary->error.c_str() : summary.status().ToString().c_str());
        return 1;
      }
      scheduler::ScheduleOptions so;
      so.kind = k.kind;
      so.num_stages = p;
      so.num_chunks = k.v;
      so.num_microbatches = m;
      auto schedule = scheduler::BuildSchedule(so);
      if (!schedule.ok()) return 1;
      // The stage actor sends B's gradient when B ends (no fused backward).
      scheduler::OpCosts declared = scheduler::OpCosts::Uniform(
          p, o.uniform.forward, o.uniform.backward_input, o.uniform.backward_weight, 0, false);
      const double extra = table.op_overhead_s + overshoot;
      scheduler::OpCosts calibrated = scheduler::OpCosts::Uniform(
          p, o.uniform.forward + extra, o.uniform.backward_input + extra,
          o.uniform.backward_weight + extra, table.p2p.latency_s, false);
      auto d = api::ReplayOnSharedWorkers(*schedule, declared, 1, p);
      auto c = api::ReplayOnSharedWorkers(*schedule, calibrated, 1, p);
      if (!d.ok() || !c.ok()) return 1;
      const double measured = Median(step_ms);
      const double pd = 1e3 * d->makespan;
      const double pc = 1e3 * (c->makespan + table.step_overhead_s);
      std::printf("%-18s %3d %4d %12.2f %12.2f %+7.1f%% %12.2f %+7.1f%% %9.1f %6.2f\n", k.name, p,
                  m, measured, pd, 100 * (pd / measured - 1), pc, 100 * (pc / measured - 1),
                  1e6 * overshoot, load);
      std::fflush(stdout);
    }
  }
  return 0;
}
