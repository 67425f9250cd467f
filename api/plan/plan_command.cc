// api/plan/plan_command.cc: see plan_command.h.
#include "api/plan/plan_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/args/megatron_args.h"
#include "api/simulate/simulate_command.h"
#include "base/status_macros.h"

namespace mxmaca::api {
namespace {

// Flags the planner chooses itself; giving one is an error that names it.
constexpr const char* kLayoutFlags[] = {
    "--tensor-model-parallel-size",
    "--pipeline-model-parallel-size",
    "--num-layers-per-virtual-pipeline-stage",
    "--num-virtual-stages-per-pipeline-rank",
    "--micro-batch-size",
    "--recompute-activations",
    "--recompute-granularity",
    "--recompute-method",
    "--recompute-num-layers",
    "--pipeline-schedule",
    "--sequence-parallel",
    "--context-parallel-size",
    "--use-distributed-optimizer",
    "--overlap-grad-reduce",
    "--overlap-param-gather",
    "--decoder-first-pipeline-num-layers",
    "--decoder-last-pipeline-num-layers",
    "--pipeline-model-parallel-layout",
    "--expert-model-parallel-size",
    "--expert-tensor-parallel-size",
    "--trace-file",
};

bool IsFlag(const std::string& arg, const std::string& name) {
  return arg == name || absl::StartsWith(arg, name + "=");
}

// TakeValue: removes "--name VALUE" / "--name=VALUE" from argv; the last one wins.
absl::StatusOr<std::optional<std::string>> TakeValue(std::vector<std::string>* argv,
                                                     const std::string& name) {
  std::optional<std::string> value;
  std::vector<std::string> rest;
  for (size_t i = 0; i < argv->size(); ++i) {
    const std::string& a = (*argv)[i];
    if (a == name) {
      if (i + 1 >= argv->size()) {
        return absl::InvalidArgumentError(absl::StrCat("", name, " needs a value"));
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

absl::StatusOr<int64_t> PositiveInt(const std::string& name, const std::string& value) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v) || v < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "", name, " '", value, "' is not a positive integer"));
  }
  return v;
}

double GiB(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

std::string DescribeLayout(const Layout& l) {
  return absl::StrFormat("TP %d PP %d VPP %d DP %d%s mbs %d recompute %s schedule %s", l.tp,
                         l.pp, l.vpp, l.dp,
                         l.ep > 0 ? absl::StrFormat(" EP %d ETP %d", l.ep, l.etp) : "", l.mbs,
                         RecomputeName(l.recompute), l.schedule);
}

// ExpertGrids: (ep, etp) pairs for a MoE model on tp x dp ranks: ep dividing both the
// experts and tp x dp, etp in {1, tp} with etp x ep dividing tp x dp; {(0, 0)} if dense.
std::vector<std::pair<int64_t, int64_t>> ExpertGrids(int64_t num_experts, int64_t tp,
                                                     int64_t dp) {
  if (num_experts <= 0) return {{0, 0}};
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t ep = 1; ep <= num_experts; ++ep) {
    if (num_experts % ep != 0 || (tp * dp) % ep != 0) continue;
    const std::vector<int64_t> etps =
        tp == 1 ? std::vector<int64_t>{1} : std::vector<int64_t>{1, tp};
    for (int64_t etp : etps) {
      if ((tp * dp) % (ep * etp) == 0) out.emplace_back(ep, etp);
    }
  }
  return out;
}

}  // namespace

const char* RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

std::vector<Layout> EnumerateLayouts(const ModelShape& shape, int64_t world_size,
                                     int64_t global_batch_size) {
  std::vector<Layout> out;
  for (int64_t tp : {1, 2, 4, 8}) {
    if (tp > shape.gpus_per_node || shape.num_attention_heads % tp != 0) continue;
    for (int64_t pp = 1; pp <= 64; ++pp) {
      if (shape.num_layers % pp != 0 || world_size % (tp * pp) != 0) continue;
      const int64_t dp = world_size / (tp * pp);
      for (int64_t vpp : {1, 2, 4}) {
        if (vpp > 1 && pp == 1) continue;
        if (shape.num_layers % (pp * vpp) != 0) continue;
        for (const auto& [ep, etp] : ExpertGrids(shape.num_experts, tp, dp)) {
          for (int64_t mbs : {1, 2, 4}) {
            if (global_batch_size % (mbs * dp) != 0) continue;
            for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
              const std::vector<std::string> schedules =
                  vpp > 1 ? std::vector<std::string>{"interleaved-1f1b"}
                          : std::vector<std::string>{"1f1b", "zb-h1"};
              for (const std::string& schedule : schedules) {
                out.push_back(Layout{tp, pp, vpp, dp, mbs, rc, schedule, ep, etp});
              }
            }
          }
        }
      }
    }
  }
  return out;
}

std::vector<std::string> LayoutFlags(const Layout& l, int64_t num_layers) {
  std::vector<std::string> f = {"--tensor-model-parallel-size", absl::StrCat(l.tp)};
  if (l.tp > 1) f.push_back("--sequence-parallel");
  f.insert(f.end(), {"--pipeline-model-parallel-size", absl::StrCat(l.pp)});
  if (l.vpp > 1) {
    f.insert(f.end(), {"--num-layers-per-virtual-pipeline-stage",
                       absl::StrCat(num_layers / (l.pp * l.vpp))});
  }
  if (l.schedule == "zb-h1") f.insert(f.end(), {"--pipeline-schedule", "zb-h1"});
  f.insert(f.end(), {"--micro-batch-size", absl::StrCat(l.mbs)});
  if (l.recompute == Recompute::kSelective) f.push_back("--recompute-activations");
  if (l.recompute == Recompute::kFull) {
    f.insert(f.end(), {"--recompute-granularity", "full", "--recompute-method", "uniform",
                       "--recompute-num-layers", "1"});
  }
  f.insert(f.end(),
           {"--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"});
  if (l.ep > 0) {
    f.insert(f.end(), {"--expert-model-parallel-size", absl::StrCat(l.ep),
                       "--expert-tensor-parallel-size", absl::StrCat(l.etp)});
  }
  return f;
}

std::vector<std::string> ModelFlags(const PlanOptions& o, const Layout& l) {
  std::vector<std::string> argv = o.model_argv;
  if (std::none_of(argv.begin(), argv.end(),
                   [](const std::string& a) { return a == "--bf16"; })) {
    argv.push_back("--bf16");
  }
  if (l.ep > 1 && std::none_of(argv.begin(), argv.end(), [](const std::string& a) {
        return IsFlag(a, "--moe-token-dispatcher-type");
      })) {
    argv.insert(argv.end(), {"--moe-token-dispatcher-type", "alltoall"});
  }
  return argv;
}

std::vector<std::string> SimulateArgv(const PlanOptions& o, const Layout& l,
                                      int64_t num_layers) {
  std::vector<std::string> argv = ModelFlags(o, l);
  for (std::string& f : LayoutFlags(l, num_layers)) argv.push_back(std::move(f));
  argv.insert(argv.end(), {"--global-batch-size", absl::StrCat(o.global_batch_size),
                           "--cluster", o.cluster, "--world-size",
                           absl::StrCat(o.world_size)});
  if (o.moe_load_imbalance) argv.insert(argv.end(), {"--moe-load-imbalance", *o.moe_load_imbalance});
  return argv;
}

int64_t OpsPerStage(const Layout& l, int64_t global_batch_size) {
  return global_batch_size / (l.mbs * l.dp) * l.vpp;
}

MfuBreakdown BreakDownMfu(const scheduler::ClusterSpec& c, const StepResult& r,
                          int64_t ops_per_stage) {
  MfuBreakdown b;
  b.stage = r.slowest_stage;
  b.gemm_efficiency = c.gemm_efficiency;
  b.step_seconds = r.step_seconds;
  const StageResult& st = r.stages[static_cast<size_t>(r.slowest_stage)];
  const double n = static_cast<double>(ops_per_stage);
  double gemm = 0;
  for (const OpTime& op : st.op) {
    gemm += n * op.gemm;
    b.memory += n * op.memory;
    b.tp_cp_comm += n * (op.tp_comm + op.cp_comm);
    b.ep_comm += n * op.ep_comm;
  }
  b.useful_gemm = r.model_flops / static_cast<double>(r.world_size) /
                  (c.gpu.bf16_dense_tflops * 1e12 * c.gemm_efficiency);
  b.extra_gemm = gemm - b.useful_gemm;
  b.busy = r.timing.busy[static_cast<size_t>(r.slowest_stage)];
  b.pipeline_idle = st.pipeline_finish - b.busy;
  b.dp_grad_exposed = st.dp_grad_exposed;
  b.param_gather_exposed = st.param_gather_exposed;
  b.optimizer = st.optimizer;
  return b;
}

absl::StatusOr<PlanOptions> ParsePlanArgs(const std::vector<std::string>& argv_in) {
  std::vector<std::string> argv = argv_in;
  PlanOptions o;
  MXMACA_ASSIGN_OR_RETURN(auto gbs, TakeValue(&argv, "--global-batch-size"));
  MXMACA_ASSIGN_OR_RETURN(auto cluster, TakeValue(&argv, "--cluster"));
  MXMACA_ASSIGN_OR_RETURN(auto world, TakeValue(&argv, "--world-size"));
  MXMACA_ASSIGN_OR_RETURN(auto limit, TakeValue(&argv, "--memory-limit-gib"));
  MXMACA_ASSIGN_OR_RETURN(auto top, TakeValue(&argv, "--top"));
  MXMACA_ASSIGN_OR_RETURN(o.moe_load_imbalance, TakeValue(&argv, "--moe-load-imbalance"));
  if (!gbs) return absl::InvalidArgumentError("--global-batch-size B is required");
  if (!cluster) {
    return absl::InvalidArgumentError(
        "--cluster PRESET|FILE is required (presets: h100-sxm, h200-sxm, b200, "
        "a100-sxm-80gb)");
  }
  if (!world) return absl::InvalidArgumentError("--world-size N (GPUs) is required");
  MXMACA_ASSIGN_OR_RETURN(o.global_batch_size, PositiveInt("--global-batch-size", *gbs));
  MXMACA_ASSIGN_OR_RETURN(o.world_size, PositiveInt("--world-size", *world));
  if (top) {
    MXMACA_ASSIGN_OR_RETURN(o.top, PositiveInt("--top", *top));
  }
  if (limit) {
    double g = 0;
    if (!absl::SimpleAtod(*limit, &g) || !(g > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--memory-limit-gib '", *limit, "' is not a positive number"));
    }
    o.memory_limit_gib = g;
  }
  o.cluster = *cluster;
  for (const std::string& a : argv) {
    for (const char* flag : kLayoutFlags) {
      if (IsFlag(a, flag)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "", flag, " is chosen by the planner; give only model flags, "
            "--global-batch-size, --cluster, --world-size, --memory-limit-gib and --top"));
      }
    }
  }
  o.model_argv = std::move(argv);
  return o;
}

absl::StatusOr<PlanResult> Plan(const PlanOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  PlanResult r;
  MXMACA_ASSIGN_OR_RETURN(r.cluster, scheduler::LoadCluster(o.cluster));
  MXMACA_ASSIGN_OR_RETURN(MegatronArgs model, ParseMegatronArgs(o.model_argv));
  if (!model.num_layers || !model.num_attention_heads) {
    return absl::InvalidArgumentError(
        "--num-layers and --num-attention-heads are required model flags");
  }
  ModelShape shape{*model.num_layers, *model.num_attention_heads, r.cluster.gpus_per_node,
                   model.num_experts.value_or(0)};
  r.num_layers = shape.num_layers;
  r.memory_limit_bytes =
      (o.memory_limit_gib ? *o.memory_limit_gib : r.cluster.gpu.hbm_gib) * 1024.0 * 1024.0 *
      1024.0;
  const std::vector<Layout> layouts =
      EnumerateLayouts(shape, o.world_size, o.global_batch_size);
  r.enumerated = static_cast<int64_t>(layouts.size());
  std::vector<PlanEntry> fitting;
  for (const Layout& l : layouts) {
    PlanEntry e;
    e.layout = l;
    e.argv = SimulateArgv(o, l, shape.num_layers);
    absl::StatusOr<SimulateJob> job = PrepareSimulation(e.argv);
    absl::StatusOr<StepResult> step =
        job.ok() ? SimulateStep(job->inputs) : absl::StatusOr<StepResult>(job.status());
    if (!step.ok()) {
      if (r.rejected++ == 0) {
        r.first_rejection =
            absl::StrCat(DescribeLayout(l), ": ", std::string(step.status().message()));
      }
      continue;
    }
    if (step->peak_memory_bytes > r.memory_limit_bytes) {
      ++r.over_memory;
      continue;
    }
    e.result = *std::move(step);
    fitting.push_back(std::move(e));
  }
  r.fitting = static_cast<int64_t>(fitting.size());
  // Stable: equal tokens/s keep the enumeration order.
  std::stable_sort(fitting.begin(), fitting.end(), [](const PlanEntry& a, const PlanEntry& b) {
    return a.result.tokens_per_second > b.result.tokens_per_second;
  });
  if (fitting.size() > static_cast<size_t>(o.top)) fitting.resize(o.top);
  r.best = std::move(fitting);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (r.best.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "no layout fits: %d enumerated, %d rejected by the simulator, %d over the "
        "memory limit of %.4g GiB per rank%s%s",
        r.enumerated, r.rejected, r.over_memory, GiB(r.memory_limit_bytes),
        r.first_rejection.empty() ? "" : "; first rejection: ", r.first_rejection));
  }
  return r;
}

std::string FormatPlan(const PlanOptions& o, const PlanResult& r) {
  std::string out;
  absl::StrAppend(&out, "cluster   ", scheduler::DescribeCluster(r.cluster), "\n");
  absl::StrAppendFormat(
      &out,
      "search    %d GPUs, global batch %d: %d layouts, %d rejected by the simulator, %d over "
      "%.1f GiB per rank, %d fit (%.2f s)\n",
      o.world_size, o.global_batch_size, r.enumerated, r.rejected, r.over_memory,
      GiB(r.memory_limit_bytes), r.fitting, r.seconds);
  if (!r.first_rejection.empty()) {
    absl::StrAppend(&out, "          first rejection: ", r.first_rejection, "\n");
  }
  for (size_t i = 0; i < r.best.size(); ++i) {
    const PlanEntry& e = r.best[i];
    const Layout& l = e.layout;
    const StepResult& s = e.result;
    const std::string model = absl::StrJoin(ModelFlags(o, l), " ");
    absl::StrAppendFormat(&out, "\n#%d  TP %d  PP %d  VPP %d  DP %d%s  mbs %d  recompute %s  "
                          "schedule %s\n",
                          i + 1, l.tp, l.pp, l.vpp, l.dp,
                          l.ep > 0 ? absl::StrFormat("  EP %d  ETP %d", l.ep, l.etp) : "", l.mbs,
                          RecomputeName(l.recompute), l.schedule);
    absl::StrAppendFormat(
        &out,
        "    step %.4f s  tokens/s %.0f  TFLOP/s/GPU %.1f  MFU %.1f%%  bubble %.1f%%  "
        "exposed comm %.4f s  peak memory %.2f GiB (stage %d)\n",
        s.step_seconds, s.tokens_per_second, s.tflops_per_gpu, 100 * s.mfu,
        100 * s.bubble_fraction, s.exposed_comm_seconds, GiB(s.peak_memory_bytes),
        s.peak_memory_stage);
    const std::vector<std::string> flags = LayoutFlags(l, r.num_layers);
    std::vector<std::string> megatron;
    for (size_t k = 0; k < flags.size(); ++k) {
      if (flags[k] == "--pipeline-schedule") {
        ++k;  // MXMACA-only flag: skipped for Megatron
        continue;
      }
      megatron.push_back(flags[k]);
    }
    const std::string layout_flags = absl::StrJoin(flags, " ");
    absl::StrAppend(&out, "    mxmaca train ", model, " ", layout_flags, " --global-batch-size ",
                    o.global_batch_size, " <data, optimizer and logging flags>\n");
    absl::StrAppend(
        &out, "    megatron: torchrun --nnodes ",
        (o.world_size + r.cluster.gpus_per_node - 1) / r.cluster.gpus_per_node,
        " --nproc-per-node ", std::min<int64_t>(o.world_size, r.cluster.gpus_per_node),
        " pretrain_gpt.py ", model, " ", absl::StrJoin(megatron, " "),
        " --global-batch-size ", o.global_batch_size, " ...",
        l.schedule == "zb-h1"
            ? "  (Megatron-LM has no ZB-H1 schedule: this runs plain 1F1B there)"
            : "",
        "\n");
  }
  const PlanEntry& top = r.best[0];
  const MfuBreakdown b =
      BreakDownMfu(r.cluster, top.result, OpsPerStage(top.layout, o.global_batch_size));
  const double e = b.gemm_efficiency, step = b.step_seconds;
  absl::StrAppendFormat(&out,
                        "\nMFU of #1 (%.1f%%), from the slowest rank (stage %d), step %.4f s:\n",
                        100 * top.result.mfu, b.stage, step);
  absl::StrAppendFormat(&out, "  %-44s %7s  %9s\n", "", "seconds", "MFU points");
  absl::StrAppendFormat(&out, "  %-44s %7s  %+8.1f%%\n", "GEMMs at peak x efficiency (ceiling)", "",
                        100 * e);
  const auto line = [&](const char* what, double seconds) {
    absl::StrAppendFormat(&out, "  %-44s %7.4f  %+8.1f%%\n", what, seconds,
                          -100 * e * seconds / step);
  };
  line("GEMM beyond the average (recompute, logits)", b.extra_gemm);
  line("memory-bound kernels", b.memory);
  line("TP/CP communication inside ops", b.tp_cp_comm);
  if (top.layout.ep > 0) line("MoE dispatch + combine (EP) inside ops", b.ep_comm);
  line("pipeline bubble / waits on this rank", b.pipeline_idle);
  line("DP gradient reduce-scatter, exposed", b.dp_grad_exposed);
  line("param all-gather, exposed", b.param_gather_exposed);
  line("optimizer step", b.optimizer);
  absl::StrAppendFormat(&out, "  %-44s %7.4f  %+8.1f%%  (= MFU)\n", "useful GEMM time",
                        b.useful_gemm, 100 * e * b.useful_gemm / step);
  return out;
}

absl::Status RunPlan(const std::vector<std::string>& argv) {
  MXMACA_ASSIGN_OR_RETURN(PlanOptions options, ParsePlanArgs(argv));
  MXMACA_ASSIGN_OR_RETURN(PlanResult result, Plan(options));
  std::fputs(FormatPlan(options, result).c_str(), stdout);
  return absl::OkStatus();
}

}  // namespace mxmaca::api
