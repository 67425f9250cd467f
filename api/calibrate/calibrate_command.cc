// api/calibrate/calibrate_command.cc: see calibrate_command.h.
#include "api/calibrate/calibrate_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "actors/synthetic_stage_program.h"
#include "api/simulate/shared_worker_replay.h"
#include "api/simulate/simulate_command.h"
#include "api/train/gemm_peak.h"
#include "base/status_macros.h"
#include "layers/gpt_stage.h"
#include "layers/optimizer.h"
#include "layers/tensor_parallel.h"
#include "scheduler/schedule_factory.h"
#include "transport/inprocess_communicator.h"
#include "transport/rank_grid.h"

namespace mxmaca::api {
namespace {

using Clock = std::chrono::steady_clock;
using OpTriple = std::array<double, 3>;  // F, B, W

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Fastest: the least-disturbed of repeated timings (other processes only ever slow a run
// down, so on a shared machine the minimum estimates the unloaded time).
double Fastest(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// TakeFlag: removes "--name VALUE" / "--name=VALUE" from argv; the last one wins.
absl::StatusOr<std::optional<std::string>> TakeFlag(std::vector<std::string>* argv,
                                                    const std::string& name) {
  std::optional<std::string> value;
  std::vector<std::string> rest;
  for (size_t i = 0; i < argv->size(); ++i) {
    const std::string& a = (*argv)[i];
    if (a == name) {
      if (i + 1 >= argv->size()) {
        return absl::InvalidArgumentError(absl::StrCat(name, " needs a value"));
      }
      value = (*argv)[++i];
    } else if (absl::StartsWith(a, name + "=")) {
      value = a.substr(name.size() + 1);
    } else {
      rest.push_back(a);
    }
  }
  *argv = std::move(rest);
  return value;
}

absl::StatusOr<std::vector<int>> IntList(const std::string& flag, const std::string& text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int x = 0;
    if (!absl::SimpleAtoi(part, &x) || x < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " '", text, "': expected a comma-separated list of integers >= 1"));
    }
    out.push_back(x);
  }
  return out;
}

// StageKind: which part of the model a measured stage holds.
struct StageSpec {
  CostOpKind op;
  layers::StageLayout layout;
  double per;  // divide the stage's times by this (layers in the stage)
};

// MeasureStage: the fastest F, B, W seconds of `spec` at config `c`, micro-batch b, over
// `repeats` runs after one warm-up; tp > 1: t TP shards on t threads (rank 0's times);
// else `copies` independent stages on as many threads (mean of their fastest).
absl::StatusOr<std::array<double, 3>> MeasureStage(const layers::GptConfig& c,
                                                   const StageSpec& spec, int64_t b, int tp,
                                                   bool sp, int copies, int repeats) {
  const int threads = tp > 1 ? tp : copies;
  std::unique_ptr<transport::InProcessHub> hub;
  std::optional<transport::RankGrid> grid;
  if (tp > 1) {
    hub = std::make_unique<transport::InProcessHub>(tp);
    MXMACA_ASSIGN_OR_RETURN(transport::RankGrid g, transport::RankGrid::Create(tp, tp, 1));
    grid = std::move(g);
  }
  std::vector<layers::TensorParallelContext> ctx(static_cast<size_t>(threads));
  for (int r = 0; r < threads && tp > 1; ++r) {
    MXMACA_ASSIGN_OR_RETURN(transport::RankView view, grid->ForRank(r));
    ctx[static_cast<size_t>(r)] = layers::TensorParallelContextFor(view, hub->ForRank(r), sp);
  }
  std::vector<std::array<std::vector<double>, 3>> times(static_cast<size_t>(threads));
  std::vector<absl::Status> errors(static_cast<size_t>(threads));
  const int64_t s = c.seq_length, h = c.hidden_size;
  const bool use_sp = tp > 1 && sp;
  const int64_t rows = b * (use_sp ? s / tp : s);
  auto run = [&](int r) {
    auto created = layers::GptStage::Create(c, spec.layout, 16,
                                            tp > 1 ? &ctx[static_cast<size_t>(r)] : nullptr);
    if (!created.ok()) {
      errors[static_cast<size_t>(r)] = created.status();
      return;
    }
    layers::GptStage& stage = **created;
    stage.InitializeParameters();
    std::mt19937 rng(1234 + static_cast<unsigned>(tp > 1 ? 0 : r));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> hidden(static_cast<size_t>(rows * h)), dout(hidden.size());
    for (float& x : hidden) x = normal(rng);
    for (float& x : dout) x = 1e-3f * normal(rng);
    std::vector<int32_t> tokens(static_cast<size_t>(b * s)), labels(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<int32_t>(rng() % static_cast<uint32_t>(c.vocab_size));
      labels[i] = static_cast<int32_t>(rng() % static_cast<uint32_t>(c.vocab_size));
    }
    std::vector<float> d_input;
    for (int it = 0; it <= repeats; ++it) {
      layers::MicroBatchInput in;
      in.micro_batch_id = it;
      in.iteration = it;
      in.micro_batch_size = b;
      in.seq_length = s;
      if (spec.layout.has_embedding) {
        in.tokens = tokens;
      } else {
        in.hidden = hidden;
      }
      if (spec.layout.has_loss_head) in.labels = labels;
      layers::StageOutput out;
      const Clock::time_point t0 = Clock::now();
      absl::Status st = stage.Forward(in, &out);
      const double f = Since(t0);
      const Clock::time_point t1 = Clock::now();
      if (st.ok()) {
        st = stage.BackwardInput(it, spec.layout.has_loss_head ? absl::Span<const float>() : dout,
                                 1.0f / static_cast<float>(b * s), &d_input);
      }
      const double bi = Since(t1);
      const Clock::time_point t2 = Clock::now();
      if (st.ok()) st = stage.BackwardWeight(it);
      const double w = Since(t2);
      if (!st.ok()) {
        errors[static_cast<size_t>(r)] = st;
        return;
      }
      if (it == 0) continue;  // warm-up
      times[static_cast<size_t>(r)][0].push_back(f / spec.per);
      times[static_cast<size_t>(r)][1].push_back(bi / spec.per);
      times[static_cast<size_t>(r)][2].push_back(w / spec.per);
    }
  };
  if (threads == 1) {
    run(0);
  } else {
    std::vector<std::thread> pool;
    for (int r = 0; r < threads; ++r) pool.emplace_back(run, r);
    for (std::thread& t : pool) t.join();
  }
  for (const absl::Status& e : errors) MXMACA_RETURN_IF_ERROR(e);
  std::array<double, 3> out = {0, 0, 0};
  const int used = tp > 1 ? 1 : threads;  // TP: rank 0 (the ranks meet in every collective)
  for (int r = 0; r < used; ++r) {
    for (int k = 0; k < 3; ++k) out[k] += Fastest(times[static_cast<size_t>(r)][k]) / used;
  }
  return out;
}

double MeasureOptimizerSecondsPerParameter(const kernels::ExecContext& exec, int repeats) {
  const int64_t n = 4 << 20;
  std::vector<float> param(static_cast<size_t>(n), 0.01f), grad(static_cast<size_t>(n), 1e-3f);
  layers::OptimizerTensor t;
  t.name = "calibrate.weight";
  t.param = param.data();
  t.grad = grad.data();
  t.numel = n;
  layers::AdamWOptimizer opt(layers::AdamWOptions(), {t});
  std::vector<double> secs;
  volatile double sink = 0;  // keeps the norm pass from being optimised away
  for (int i = 0; i <= repeats; ++i) {
    const Clock::time_point t0 = Clock::now();
    // The stage actor's step end (actors/stage_actor.cc): the gradient norm (a pass over
    // the gradients), AdamW, then zeroing the gradients.
    double sq = 0;
    for (float g : grad) sq += static_cast<double>(g) * g;
    opt.Step(exec, 1e-4, 0.01);
    std::fill(grad.begin(), grad.end(), 1e-3f + static_cast<float>(i) * 1e-6f);
    sink = sink + sq;
    if (i > 0) secs.push_back(Since(t0));
  }
  return Fastest(secs) / static_cast<double>(n);
}

// AllReduceSeconds: the fastest wall time of an in-process all-reduce of `count` floats
// between 2 ranks posting from 2 threads.
absl::StatusOr<double> AllReduceSeconds(int64_t count, int repeats) {
  transport::InProcessHub hub(2);
  MXMACA_ASSIGN_OR_RETURN(transport::RankGrid grid, transport::RankGrid::Create(2, 1, 1));
  std::vector<std::vector<float>> send(2, std::vector<float>(static_cast<size_t>(count), 1.0f)),
      recv(2, std::vector<float>(static_cast<size_t>(count)));
  std::vector<double> secs;
  for (int i = 0; i <= repeats; ++i) {
    absl::Notification done[2];
    absl::Status status[2];
    const Clock::time_point t0 = Clock::now();
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        auto view = grid.ForRank(r);
        if (!view.ok()) {
          status[r] = view.status();
          done[r].Notify();
          return;
        }
        hub.ForRank(r)->AllReduceSum(view->data_parallel_group(), send[static_cast<size_t>(r)].data(),
                                     recv[static_cast<size_t>(r)].data(), count,
                                     [&, r](const transport::CollectiveInfo&, absl::Status st) {
                                       status[r] = st;
                                       done[r].Notify();
                                     });
        done[r].WaitForNotification();
      });
    }
    for (std::thread& t : threads) t.join();
    const double s = Since(t0);
    for (const absl::Status& st : status) MXMACA_RETURN_IF_ERROR(st);
    if (i > 0) secs.push_back(s);
  }
  return Fastest(secs);
}

// SyntheticStepSeconds: median iteration time (after the first two) of a synthetic
// zero-time job with p stages, m micro-batches, 1F1B.
absl::StatusOr<double> SyntheticStepSeconds(int32_t p, int32_t m, int iters) {
  actors::SyntheticJobOptions o;
  o.schedule = scheduler::ScheduleKind::kOneFOneB;
  o.pipeline_size = p;
  o.num_microbatches = m;
  o.train_iters = iters;
  o.log_interval = 1;
  std::vector<double> ms;
  o.on_iteration = [&](const actors::IterationLogRecord& r) {
    if (r.iteration > 2) ms.push_back(r.elapsed_ms_per_iteration);
  };
  MXMACA_ASSIGN_OR_RETURN(actors::TrainingSummary summary, actors::RunSyntheticJob(o));
  if (!summary.ok) return absl::InternalError(absl::StrCat("synthetic job: ", summary.error));
  return Median(ms) / 1e3;
}

std::string NowUtc() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double x = 0;
  in >> x;
  return x;
}

}  // namespace

absl::StatusOr<CostTable> Calibrate(const std::vector<std::string>& model_argv_in,
                                    const CalibrateOptions& options, std::string* log) {
  const auto say = [&](const std::string& line) {
    if (log != nullptr) absl::StrAppend(log, line, "\n");
  };
  std::vector<std::string> argv = model_argv_in;
  // Layout flags are set per measurement.
  std::optional<std::string> mbs_flag;
  for (const char* flag :
       {"--world-size", "--tensor-model-parallel-size", "--pipeline-model-parallel-size",
        "--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
        "--pipeline-schedule", "--global-batch-size", "--micro-batch-size", "--cluster",
        "--cost-table", "--context-parallel-size", "--decoder-first-pipeline-num-layers",
        "--decoder-last-pipeline-num-layers", "--pipeline-model-parallel-layout"}) {
    MXMACA_ASSIGN_OR_RETURN(std::optional<std::string> v, TakeFlag(&argv, flag));
    if (std::string(flag) == "--micro-batch-size") mbs_flag = v;
  }
  int64_t default_mbs = 1;
  if (mbs_flag && (!absl::SimpleAtoi(*mbs_flag, &default_mbs) || default_mbs < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--micro-batch-size '", *mbs_flag, "': expected an integer >= 1"));
  }
  std::vector<int> mbs_list = options.micro_batch_sizes;
  if (mbs_list.empty()) mbs_list = {static_cast<int>(default_mbs)};

  CostTable table;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  table.host = host;
  table.measured_at = NowUtc();
  table.load_average_1m = LoadAverage();
  table.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Threads per op: the flag, else the model flags' --num-threads (mxmaca train runs every
  // layer op with that many), else 1.
  int threads_per_op = options.threads_per_op;
  if (threads_per_op < 1) {
    MXMACA_ASSIGN_OR_RETURN(std::optional<std::string> n, TakeFlag(&argv, "--num-threads"));
    threads_per_op = 1;
    if (n && (!absl::SimpleAtoi(*n, &threads_per_op) || threads_per_op < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--num-threads '", *n, "': expected an integer >= 1"));
    }
  }
  table.threads_per_op = threads_per_op;
  say(absl::StrFormat("calibrate: %s, %d cores, load average %.2f, %d thread(s) per op",
                      table.host, table.cores, table.load_average_1m, table.threads_per_op));

  kernels::ExecContext exec;
  exec.num_threads = threads_per_op;
  bool bf16 = false;
  // TP > 1 is measured with and without sequence parallelism (Megatron's usual pairing).
  std::vector<std::pair<int, bool>> tp_variants;
  for (int tp : options.tp_sizes) {
    tp_variants.push_back({tp, false});
    if (tp > 1) tp_variants.push_back({tp, true});
  }
  for (auto [tp, with_sp] : tp_variants) {
    for (int mbs : mbs_list) {
      std::vector<std::string> a;
      for (const std::string& x : argv) {
        if (x != "--sequence-parallel") a.push_back(x);
      }
      if (with_sp) a.push_back("--sequence-parallel");
      for (const std::string& x :
           {std::string("--cluster"), std::string("h100-sxm"), std::string("--world-size"),
            absl::StrCat(tp), std::string("--tensor-model-parallel-size"), absl::StrCat(tp),
            std::string("--micro-batch-size"), absl::StrCat(mbs),
            std::string("--global-batch-size"), absl::StrCat(mbs)}) {
        a.push_back(x);
      }
      MXMACA_ASSIGN_OR_RETURN(SimulateJob job, PrepareSimulation(a));
      layers::GptConfig c = job.inputs.model;
      c.num_threads = threads_per_op;
      c.recompute_granularity = layers::RecomputeGranularity::kNone;
      bf16 = c.precision == kernels::Precision::kBf16;
      exec.precision = c.precision;
      const bool sp = job.inputs.sequence_parallel && tp > 1;
      OpShape shape;
      shape.b = mbs;
      shape.s = c.seq_length;
      shape.h = c.hidden_size;
      shape.a = c.num_attention_heads;
      shape.g = c.query_groups();
      shape.d = c.head_dim();
      shape.f = c.ffn_hidden_size;
      shape.f1 = c.fc1_size();
      shape.V = c.padded_vocab_size;
      shape.t = tp;
      shape.sp = sp;
      // Layers at two stage depths: 2 (or 1) and the whole model (a deeper stage's larger
      // working set makes each layer slower on CPU caches); the simulator uses the depth
      // nearest each stage's.
      std::vector<StageSpec> specs;
      for (int64_t depth : {std::min<int64_t>(2, c.num_layers), c.num_layers}) {
        if (depth < 1 || (!specs.empty() && depth == specs.back().layout.num_layers())) continue;
        specs.push_back({CostOpKind::kLayer, {0, depth, false, false}, static_cast<double>(depth)});
      }
      specs.push_back({CostOpKind::kEmbedding, {0, 0, true, false}, 1.0});
      specs.push_back({CostOpKind::kLossHead, {0, 0, false, true}, 1.0});
      for (int copies : tp > 1 ? std::vector<int>{1} : options.concurrency) {
        for (const StageSpec& spec : specs) {
          MXMACA_ASSIGN_OR_RETURN(OpTriple secs,
                                  MeasureStage(c, spec, mbs, tp, sp, copies, options.repeats));
          CostEntry e;
          e.op = spec.op;
          e.tp = tp;
          e.sp = sp;
          e.concurrency = copies;
          if (spec.op == CostOpKind::kLayer) e.stage_layers = spec.layout.num_layers();
          e.work = WorkOf(spec.op, shape);
          e.seconds = secs;
          e.shape = shape.ToString();
          table.ops.push_back(e);
          say(absl::StrFormat(
              "  %-9s tp %d%s mbs %d concurrency %d%s: F %.3f ms  B %.3f ms  W %.3f ms%s",
              CostOpName(spec.op), tp, sp ? " sp" : "", mbs, copies,
              spec.op == CostOpKind::kLayer
                  ? absl::StrFormat(" (of %d)", spec.layout.num_layers())
                  : std::string(),
              1e3 * secs[0],
              1e3 * secs[1], 1e3 * secs[2],
              spec.op == CostOpKind::kLayer
                  ? absl::StrFormat("  (%.1f GFLOP/s)", (e.work[0] + e.work[1] + e.work[2]) /
                                                            (secs[0] + secs[1] + secs[2]) / 1e9)
                  : ""));
        }
      }
    }
  }
  table.precision = bf16 ? "bf16" : "fp32";
  table.gemm_gflops = MeasureGemmPeakGflops(exec);
  table.optimizer_seconds_per_parameter =
      MeasureOptimizerSecondsPerParameter(exec, options.repeats);
  say(absl::StrFormat("  gemm %.1f GFLOP/s; optimizer %.3f ns per parameter", table.gemm_gflops,
                      1e9 * table.optimizer_seconds_per_parameter));
  const int64_t small = 1 << 18, large = 1 << 22;  // floats: 1 MiB, 16 MiB
  MXMACA_ASSIGN_OR_RETURN(double ar_small, AllReduceSeconds(small, options.repeats));
  MXMACA_ASSIGN_OR_RETURN(double ar_large, AllReduceSeconds(large, options.repeats));
  table.allreduce_ranks = 2;
  table.allreduce.seconds_per_byte =
      std::max(0.0, (ar_large - ar_small) / (4.0 * static_cast<double>(large - small)));
  table.allreduce.latency_s =
      std::max(0.0, ar_small - table.allreduce.seconds_per_byte * 4.0 * static_cast<double>(small));
  say(absl::StrFormat("  all-reduce (2 ranks): %.1f us + %.3f ns/byte (1 MiB %.3f ms, 16 MiB %.3f ms)",
                      1e6 * table.allreduce.latency_s, 1e9 * table.allreduce.seconds_per_byte,
                      1e3 * ar_small, 1e3 * ar_large));
  if (!options.skip_runtime) {
    const int iters = 12;
    MXMACA_ASSIGN_OR_RETURN(double step1, SyntheticStepSeconds(1, 1, iters));
    MXMACA_ASSIGN_OR_RETURN(double step64, SyntheticStepSeconds(1, 64, iters));
    MXMACA_ASSIGN_OR_RETURN(double pipe64, SyntheticStepSeconds(2, 64, iters));
    table.op_overhead_s = std::max(0.0, (step64 - step1) / (3.0 * 63.0));
    table.step_overhead_s = std::max(0.0, step1 - 3 * table.op_overhead_s);
    // Hop: bisection on the replay of the p 2 zero-time schedule (ops cost the turnaround).
    scheduler::ScheduleOptions so;
    so.kind = scheduler::ScheduleKind::kOneFOneB;
    so.num_stages = 2;
    so.num_chunks = 1;
    so.num_microbatches = 64;
    MXMACA_ASSIGN_OR_RETURN(scheduler::PipelineSchedule schedule, scheduler::BuildSchedule(so));
    scheduler::OpCosts costs = scheduler::OpCosts::Uniform(
        2, table.op_overhead_s, table.op_overhead_s, table.op_overhead_s, 0, true);
    const double target = pipe64 - table.step_overhead_s;
    double lo = 0, hi = std::max(1e-3, target);
    for (int i = 0; i < 50; ++i) {
      costs.comm_latency = 0.5 * (lo + hi);
      MXMACA_ASSIGN_OR_RETURN(SharedWorkerTiming t,
                              ReplayOnSharedWorkers(schedule, costs, 1, 2));
      (t.makespan < target ? lo : hi) = costs.comm_latency;
    }
    table.p2p.latency_s = 0.5 * (lo + hi);
    table.p2p.seconds_per_byte = 0;  // in-process messages hand over a shared buffer
    say(absl::StrFormat(
        "  runtime: step overhead %.3f ms, op turnaround %.1f us, pipeline hop %.1f us "
        "(synthetic steps: p1 m1 %.3f ms, p1 m64 %.3f ms, p2 m64 %.3f ms)",
        1e3 * table.step_overhead_s, 1e6 * table.op_overhead_s, 1e6 * table.p2p.latency_s,
        1e3 * step1, 1e3 * step64, 1e3 * pipe64));
  }
  return table;
}

absl::Status RunCalibrate(const std::vector<std::string>& argv_in) {
  std::vector<std::string> argv = argv_in;
  CalibrateOptions o;
  MXMACA_ASSIGN_OR_RETURN(std::optional<std::string> output, TakeFlag(&argv, "--output"));
  if (!output) {
    return absl::InvalidArgumentError(
        "--output FILE (the cost table to write) is required; usage: mxmaca calibrate <model "
        "flags> --output FILE [--calibrate-tp 1,2] [--calibrate-concurrency 1,2] "
        "[--calibrate-micro-batch-sizes 1,2] [--calibrate-repeats 5] "
        "[--calibrate-threads-per-op 1] [--calibrate-skip-runtime 1]");
  }
  o.output = *output;
  MXMACA_ASSIGN_OR_RETURN(std::optional<std::string> tp, TakeFlag(&argv, "--calibrate-tp"));
  if (tp) {
    MXMACA_ASSIGN_OR_RETURN(o.tp_sizes, IntList("--calibrate-tp", *tp));
  }
  MXMACA_ASSIGN_OR_RETURN(std::optional<std::string> conc,
                          TakeFlag(&argv, "--calibrate-concurrency"));
  if (conc) {
    MXMACA_ASSIGN_OR_RETURN(o.concurrency, IntList("--calibrate-concurrency", *conc));
  }
  MXMACA_ASSIGN_OR_RETURN(std::optional<std::string> mbs,
                          TakeFlag(&argv, "--calibrate-micro-batch-sizes"));
  if (mbs) {
    MXMACA_ASSIGN_OR_RETURN(o.micro_batch_sizes, IntList("--calibrate-micro-batch-sizes", *mbs));
  }
  for (auto [flag, into] : {std::pair<const char*, int*>{"--calibrate-repeats", &o.repeats},
                            {"--calibrate-threads-per-op", &o.threads_per_op}}) {
    MXMACA_ASSIGN_OR_RETURN(std::optional<std::string> v, TakeFlag(&argv, flag));
    if (v && (!absl::SimpleAtoi(*v, into) || *into < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " '", *v, "': expected an integer >= 1"));
    }
  }
  MXMACA_ASSIGN_OR_RETURN(std::optional<std::string> skip,
                          TakeFlag(&argv, "--calibrate-skip-runtime"));
  o.skip_runtime = skip && *skip != "0";
  std::string log;
  absl::StatusOr<CostTable> table = Calibrate(argv, o, &log);
  std::fputs(log.c_str(), stdout);
  MXMACA_RETURN_IF_ERROR(table.status());
  MXMACA_RETURN_IF_ERROR(SaveCostTable(*table, o.output));
  std::printf("cost table written to %s\n", o.output.c_str());
  return absl::OkStatus();
}

}  // namespace mxmaca::api
