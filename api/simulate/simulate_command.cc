// api/simulate/simulate_command.cc: see simulate_command.h.
#include "api/simulate/simulate_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "actors/trace.h"
#include "api/train/train_setup.h"
#include "base/status_macros.h"
#include "layers/moe/moe_layer.h"
#include "layers/pipeline_placement.h"
#include "scheduler/collective_cost.h"
#include "scheduler/schedule_factory.h"

namespace mxmaca::api {
namespace {

constexpr int64_t kGpt2VocabSize = 50257;

// TakeFlag: removes "--name VALUE" or "--name=VALUE" from argv; the last one wins.
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

double GiB(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

}  // namespace

scheduler::ClusterSpec CpuClusterFromCostTable(const CostTable& table, const std::string& source) {
  scheduler::ClusterSpec c;
  c.name = absl::StrCat("cost table ", source);
  c.gpu.name = absl::StrCat("CPU ", table.host, " (", table.cores, " cores, ", table.precision, ")");
  // The roofline fields only feed the memory report and MFU: GEMM "peak" = the measured
  // rate; bandwidths are placeholders (op and collective times come from the table).
  c.gpu.bf16_dense_tflops = std::max(1e-3, table.gemm_gflops / 1e3);
  c.gpu.hbm_gb_per_s = 10;
  c.gpu.hbm_gib = 1024;
  c.gpus_per_node = std::max(1, table.cores);
  c.nvlink_gb_per_s = c.internode_gb_per_s = 10;
  c.gemm_efficiency = c.hbm_efficiency = c.link_efficiency = 1.0;
  return c;
}

absl::StatusOr<SimulateJob> PrepareSimulation(const std::vector<std::string>& argv_in) {
  std::vector<std::string> argv = argv_in;
  MXMACA_ASSIGN_OR_RETURN(std::optional<std::string> cluster, TakeFlag(&argv, "--cluster"));
  MXMACA_ASSIGN_OR_RETURN(std::optional<std::string> cost_table,
                          TakeFlag(&argv, "--cost-table"));
  // MoE: --moe-load-imbalance is the simulator's own; --moe-token-dispatcher-type is a
  // Megatron flag that `mxmaca train` accepts without effect, read here for its cost.
  MXMACA_ASSIGN_OR_RETURN(std::optional<std::string> load_imbalance,
                          TakeFlag(&argv, "--moe-load-imbalance"));
  MXMACA_ASSIGN_OR_RETURN(std::optional<std::string> dispatcher,
                          TakeFlag(&argv, "--moe-token-dispatcher-type"));
  // --attention-backend (Megatron-Core's AttnBackend; `mxmaca train` accepts it without
  // effect): unfused and local materialise the s x s scores, the others are fused.
  MXMACA_ASSIGN_OR_RETURN(std::optional<std::string> attention_backend,
                          TakeFlag(&argv, "--attention-backend"));
  bool materialized_attention = false;
  if (attention_backend) {
    const std::string& b = *attention_backend;
    if (b == "unfused" || b == "local") {
      materialized_attention = true;
    } else if (b != "flash" && b != "fused" && b != "auto") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--attention-backend '", b, "': expected flash, fused, unfused, local or auto"));
    }
  }
  if (!cluster && !cost_table) {
    return absl::InvalidArgumentError(
        "--cluster NAME|FILE is required (presets: h100-sxm, h200-sxm, b200, "
        "a100-sxm-80gb; file format: docs/SIMULATOR.md), or --cost-table FILE from "
        "mxmaca calibrate");
  }
  SimulateJob job;
  if (cost_table) {
    MXMACA_ASSIGN_OR_RETURN(CostTable table, LoadCostTable(*cost_table));
    job.inputs.cost_table = std::make_shared<const CostTable>(std::move(table));
    job.cost_table_source = *cost_table;
  }
  if (cluster) {
    job.cluster_source = *cluster;
    MXMACA_ASSIGN_OR_RETURN(job.inputs.cluster, scheduler::LoadCluster(*cluster));
  } else {
    job.cluster_source = *cost_table;
    job.inputs.cluster = CpuClusterFromCostTable(*job.inputs.cost_table, *cost_table);
  }
  MXMACA_ASSIGN_OR_RETURN(job.args, ParseMegatronArgs(argv));
  MegatronArgs& a = job.args;
  if (!a.world_size_flag || *a.world_size_flag < 1) {
    return absl::InvalidArgumentError("--world-size N (the simulated GPU count) is required");
  }
  if (!a.train_iters && !a.train_samples) a.train_iters = 1;
  if (!a.lr) a.lr = 1e-4;
  int64_t vocab_size = kGpt2VocabSize;
  if (!a.tokenizer_type && !a.vocab_file) {
    a.tokenizer_type = "NullTokenizer";
    if (!a.vocab_size) a.vocab_size = kGpt2VocabSize - 1;
  }
  if (a.tokenizer_type == "GPT2BPETokenizer") {
    // The files are not read: placeholders satisfy the validator.
    if (!a.vocab_file) a.vocab_file = "(not read by simulate)";
    if (!a.merge_file) a.merge_file = "(not read by simulate)";
  }
  MXMACA_RETURN_IF_ERROR(ValidateAndDeriveArgs(&a, static_cast<int>(*a.world_size_flag)));
  if (a.tokenizer_type == "NullTokenizer") vocab_size = *a.vocab_size + 1;
  if (a.num_experts) {
    // The model config as training builds it, at EP 1: training places experts only with
    // EP = TP and ETP 1 (api/train/moe_setup.h), the simulator costs any expert grid.
    MegatronArgs ep1 = a;
    ep1.expert_model_parallel_size = 1;
    ep1.expert_tensor_parallel_size = a.tensor_model_parallel_size;
    MXMACA_ASSIGN_OR_RETURN(job.inputs.model, GptConfigFromArgs(ep1, vocab_size));
    MoeParallelOptions& moe = job.inputs.moe;
    moe.expert_model_parallel_size = a.expert_model_parallel_size;
    moe.expert_tensor_parallel_size =
        a.expert_tensor_parallel_size.value_or(a.tensor_model_parallel_size);
    if (dispatcher) {
      MXMACA_ASSIGN_OR_RETURN(moe.dispatcher, ParseMoeDispatcher(*dispatcher));
    }
    if (load_imbalance) {
      double f = 0;
      if (!absl::SimpleAtod(*load_imbalance, &f) || !(f >= 1.0) || !std::isfinite(f)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--moe-load-imbalance '", *load_imbalance,
            "': expected max/mean tokens per expert, a number >= 1 (mxmaca train logs it "
            "per MoE layer as 'max/mean load')"));
      }
      moe.load_imbalance = f;
    }
  } else {
    if (load_imbalance) {
      return absl::InvalidArgumentError("--moe-load-imbalance needs --num-experts (a MoE model)");
    }
    MXMACA_ASSIGN_OR_RETURN(job.inputs.model, GptConfigFromArgs(a, vocab_size));
  }

  StepModelInputs& in = job.inputs;
  in.micro_batch_size = *a.micro_batch_size;
  in.global_batch_size = *a.global_batch_size;
  in.tensor_parallel_size = a.tensor_model_parallel_size;
  in.context_parallel_size = a.context_parallel_size;
  in.data_parallel_size = a.data_parallel_size;
  in.sequence_parallel = a.sequence_parallel;
  in.distributed_optimizer = a.use_distributed_optimizer;
  in.overlap_grad_reduce = a.overlap_grad_reduce;
  in.overlap_param_gather = a.overlap_param_gather;
  in.materialized_attention = materialized_attention;
  in.num_threads = a.num_threads.value_or(1);
  if (in.sequence_parallel && in.tensor_parallel_size > 1 &&
      (in.micro_batch_size * in.model.seq_length / in.context_parallel_size) %
              in.tensor_parallel_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sequence-parallel: micro-batch tokens b s / c = ",
        in.micro_batch_size * in.model.seq_length / in.context_parallel_size,
        " are not divisible by --tensor-model-parallel-size ", in.tensor_parallel_size));
  }
  const int64_t per_step = in.micro_batch_size * in.data_parallel_size;
  if (in.global_batch_size % per_step != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--global-batch-size ", in.global_batch_size, " is not divisible by --micro-batch-size ",
        in.micro_batch_size, " x data-parallel size ", in.data_parallel_size));
  }
  // Placement and schedule as `mxmaca train` builds them (api/train/parallel_setup.cc).
  layers::PipelinePlacementConfig pc;
  pc.num_layers = in.model.num_layers;
  pc.pipeline_model_parallel_size = a.pipeline_model_parallel_size;
  pc.num_layers_per_virtual_pipeline_stage = a.num_layers_per_virtual_pipeline_stage;
  pc.num_virtual_stages_per_pipeline_rank = a.num_virtual_stages_per_pipeline_rank;
  pc.decoder_first_pipeline_num_layers = a.decoder_first_pipeline_num_layers;
  pc.decoder_last_pipeline_num_layers = a.decoder_last_pipeline_num_layers;
  pc.account_for_embedding_in_pipeline_split = a.account_for_embedding_in_pipeline_split;
  pc.account_for_loss_in_pipeline_split = a.account_for_loss_in_pipeline_split;
  pc.pipeline_model_parallel_layout = a.pipeline_model_parallel_layout;
  MXMACA_ASSIGN_OR_RETURN(in.placement, layers::BuildPipelinePlacement(pc));
  scheduler::ScheduleOptions so;
  const int64_t v = in.placement.virtual_pipeline_model_parallel_size;
  if (a.pipeline_schedule) {
    MXMACA_ASSIGN_OR_RETURN(so.kind, scheduler::ParseScheduleKind(*a.pipeline_schedule));
  } else {
    so.kind = v > 1 ? scheduler::ScheduleKind::kInterleaved1F1B
                    : scheduler::ScheduleKind::kOneFOneB;
  }
  if (so.kind == scheduler::ScheduleKind::kZeroBubbleV) {
    MXMACA_ASSIGN_OR_RETURN(in.placement, layers::ToVShape(in.placement));
  }
  so.num_stages = static_cast<int32_t>(a.pipeline_model_parallel_size);
  so.num_chunks = static_cast<int32_t>(v);
  so.num_microbatches = static_cast<int32_t>(in.global_batch_size / per_step);
  MXMACA_ASSIGN_OR_RETURN(in.schedule, scheduler::BuildSchedule(so));
  return job;
}

std::string FormatReport(const SimulateJob& job, const StepResult& r) {
  const StepModelInputs& in = job.inputs;
  const scheduler::ClusterSpec& c = in.cluster;
  std::string out;
  const int64_t nodes = (r.world_size + c.gpus_per_node - 1) / c.gpus_per_node;
  absl::StrAppend(&out, "cluster   ", scheduler::DescribeCluster(c), "\n");
  if (c.nodes > 0 && nodes > c.nodes) {
    absl::StrAppend(&out, "warning   world size ", r.world_size, " needs ", nodes,
                    " nodes; the cluster has ", c.nodes, "\n");
  }
  absl::StrAppendFormat(
      &out,
      "layout    world %d = TP %d%s x CP %d x DP %d x PP %d on %d node(s); schedule %s, "
      "v %d, %d micro-batches of %d x %d tokens per replica\n",
      r.world_size, in.tensor_parallel_size, in.sequence_parallel ? " (SP)" : "",
      in.context_parallel_size, in.data_parallel_size, in.schedule.num_stages, nodes,
      in.schedule.name, in.schedule.num_chunks, in.schedule.num_microbatches,
      in.micro_batch_size, in.model.seq_length);
  if (in.cost_table != nullptr) {
    absl::StrAppendFormat(&out,
                          "cost table        %s (measured %s, load %.2f): %d worker(s) shared by "
                          "%d strand(s); step overhead %.2f ms\n",
                          job.cost_table_source, in.cost_table->measured_at,
                          in.cost_table->load_average_1m, r.workers,
                          in.schedule.num_stages * in.data_parallel_size,
                          1e3 * r.step_overhead_seconds);
    for (const std::string& note : r.notes) absl::StrAppend(&out, "note              ", note, "\n");
  }
  if (in.model.moe != nullptr) {
    const layers::moe::MoELayerConfig& moe = *in.model.moe;
    const MoeParallelOptions& o = in.moe;
    const int64_t etp_ep = o.expert_tensor_parallel_size * o.expert_model_parallel_size;
    const int64_t edp =
        in.tensor_parallel_size * in.context_parallel_size * in.data_parallel_size / etp_ep;
    int64_t moe_layers = 0;
    for (int64_t l = 0; l < in.model.num_layers; ++l) moe_layers += in.model.is_moe_layer(l);
    const bool ep_in_node = scheduler::GroupFitsInNode(o.expert_tensor_parallel_size,
                                                       o.expert_model_parallel_size,
                                                       c.gpus_per_node);
    absl::StrAppendFormat(
        &out,
        "moe       %d of %d layers MoE: %d experts, top-%d, expert ffn %d%s; EP %d x ETP %d "
        "(EDP %d), EP group %s; dispatcher %s; load imbalance %.3g (effective %.3g%s)\n",
        moe_layers, in.model.num_layers, moe.router.num_experts, moe.router.topk,
        moe.expert.ffn_hidden_size,
        moe.shared_expert_ffn_hidden_size > 0
            ? absl::StrCat(", shared expert ", moe.shared_expert_ffn_hidden_size)
            : std::string(),
        o.expert_model_parallel_size, o.expert_tensor_parallel_size, edp,
        ep_in_node ? "inside a node (NVLink)" : "across nodes (network)",
        MoeDispatcherName(o.dispatcher), o.load_imbalance, MoeEffectiveLoad(moe, o),
        moe.router.capacity_factor ? absl::StrFormat(", capacity factor %g%s",
                                                     *moe.router.capacity_factor,
                                                     moe.router.pad_to_capacity ? " padded" : "")
                                   : std::string(", dropless"));
  }
  absl::StrAppendFormat(&out, "step time         %.4f s\n", r.step_seconds);
  absl::StrAppendFormat(&out, "tokens/s          %.0f\n", r.tokens_per_second);
  absl::StrAppendFormat(&out, "TFLOP/s per GPU   %.1f (Megatron's formula, %.4g FLOPs/step)\n",
                        r.tflops_per_gpu, r.model_flops);
  absl::StrAppendFormat(&out, "MFU               %.1f%% of %g TFLOP/s\n", 100 * r.mfu,
                        c.gpu.bf16_dense_tflops);
  absl::StrAppendFormat(&out, "bubble share      %.1f%% (pipeline replay, all stages)\n",
                        100 * r.bubble_fraction);
  absl::StrAppendFormat(&out,
                        "exposed comm      %.4f s on stage %d (TP/CP%s inside ops + DP not "
                        "overlapped); p2p hand-over %.1f us\n",
                        r.exposed_comm_seconds, r.slowest_stage,
                        in.model.moe != nullptr ? "/EP" : "", 1e6 * r.p2p_seconds);
  absl::StrAppendFormat(&out, "peak memory       %.2f GiB on stage %d of %g GiB HBM%s\n",
                        GiB(r.peak_memory_bytes), r.peak_memory_stage, c.gpu.hbm_gib,
                        GiB(r.peak_memory_bytes) > c.gpu.hbm_gib ? "  ** DOES NOT FIT **" : "");
  absl::StrAppendFormat(&out, "%s\n", std::string(100, '-'));
  absl::StrAppendFormat(&out,
                        "stage  F ms   B ms   W ms  (TP comm F+B ms)  finish s  DP sync/exposed "
                        "s  optim s  params  | GiB: params grads optim act(xN) transient total\n");
  for (size_t s = 0; s < r.stages.size(); ++s) {
    const StageResult& st = r.stages[s];
    absl::StrAppendFormat(
        &out,
        "%5d %6.2f %6.2f %6.2f  (%6.2f)           %8.3f  %6.3f/%6.3f      %6.3f  %.3gB | "
        "%.2f %.2f %.2f %.2f(x%d) %.2f %.2f\n",
        s, 1e3 * st.op[0].total(), 1e3 * st.op[1].total(), 1e3 * st.op[2].total(),
        1e3 * (st.op[0].tp_comm + st.op[1].tp_comm), st.pipeline_finish, st.dp_grad_sync,
        st.dp_grad_exposed, st.optimizer, static_cast<double>(st.parameters) / 1e9,
        GiB(st.param_bytes), GiB(st.grad_bytes), GiB(st.optimizer_bytes),
        GiB(st.activation_bytes), st.stashed_microbatches, GiB(st.transient_bytes),
        GiB(st.total_bytes()));
  }
  if (in.model.moe != nullptr) {
    absl::StrAppend(&out, "MoE per stage: EP comm (dispatch + combine) in F+B ms, routed-expert "
                          "params on the rank, EDP grad sync s, expert param all-gather s\n");
    for (size_t s = 0; s < r.stages.size(); ++s) {
      const StageResult& st = r.stages[s];
      absl::StrAppendFormat(&out, "%5d  EP comm %7.2f ms  expert params %.3gB  EDP sync %6.3f s  "
                            "gather %6.3f s\n",
                            s, 1e3 * (st.op[0].ep_comm + st.op[1].ep_comm),
                            st.expert_parameters / 1e9, st.edp_grad_sync,
                            st.expert_param_gather);
    }
  }
  return out;
}

absl::Status WriteSimulatedTrace(const SimulateJob& job, const StepResult& r,
                                 const std::string& path) {
  MXMACA_ASSIGN_OR_RETURN(auto writer, actors::ChromeTraceWriter::Open(path));
  const auto us = [](double seconds) { return static_cast<int64_t>(std::llround(seconds * 1e6)); };
  for (size_t s = 0; s < r.stages.size(); ++s) {
    const int32_t track = static_cast<int32_t>(s);
    writer->NameTrack(track, absl::StrCat("pipeline stage ", s));
    const auto& ops = job.inputs.schedule.stages[s];
    for (size_t i = 0; i < ops.size(); ++i) {
      const scheduler::OpTiming& t = r.timing.ops[s][i];
      actors::TraceSpan span;
      span.name = scheduler::ToString(ops[i]);
      span.category = "compute";
      span.track = track;
      span.start_us = us(t.start);
      span.duration_us = std::max<int64_t>(0, us(t.finish) - us(t.start));
      span.microbatch = ops[i].microbatch;
      writer->Add(span);
    }
    const StageResult& st = r.stages[s];
    double at = st.pipeline_finish;
    const auto add = [&](const char* name, const char* cat, double start, double dur) {
      if (dur <= 0) return;
      writer->Add({name, cat, track, us(start), std::max<int64_t>(1, us(dur)), 0, -1});
    };
    // The gradient sync runs from (finish - overlapped part) to finish + exposed.
    add("dp grad sync", "comm", at + st.dp_grad_exposed - st.dp_grad_sync, st.dp_grad_sync);
    at += st.dp_grad_exposed;
    add("optimizer", "optimizer", at, st.optimizer);
    at += st.optimizer;
    add("param all-gather", "comm", at, st.param_gather_exposed);
  }
  return writer->Close();
}

absl::Status RunSimulate(const std::vector<std::string>& argv) {
  MXMACA_ASSIGN_OR_RETURN(SimulateJob job, PrepareSimulation(argv));
  MXMACA_ASSIGN_OR_RETURN(StepResult result, SimulateStep(job.inputs));
  std::fputs(FormatReport(job, result).c_str(), stdout);
  if (job.args.trace_file) {
    MXMACA_RETURN_IF_ERROR(WriteSimulatedTrace(job, result, *job.args.trace_file));
    std::printf("trace             %s (open in ui.perfetto.dev)\n", job.args.trace_file->c_str());
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::api
