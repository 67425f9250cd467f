// api/simulate/calibrated_step.cc: see calibrated_step.h.
#include "api/simulate/calibrated_step.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "api/simulate/shared_worker_replay.h"

namespace mxmaca::api {
namespace {

constexpr double kFp32 = 4;
using OpTriple = std::array<double, 3>;  // F, B, W seconds

// Layers of a chunk that full recomputation redoes (as step_model.cc).
int64_t RecomputedLayers(const layers::GptConfig& m, int64_t chunk_layers) {
  if (m.recompute_granularity != layers::RecomputeGranularity::kFull) return 0;
  if (m.recompute_method == layers::RecomputeMethod::kUniform) return chunk_layers;
  return std::min(chunk_layers, m.recompute_num_layers);
}

}  // namespace

OpShape OpShapeOf(const StepModelInputs& in) {
  const layers::GptConfig& m = in.model;
  OpShape x;
  x.b = in.micro_batch_size;
  x.s = m.seq_length / std::max<int64_t>(1, in.context_parallel_size);
  x.h = m.hidden_size;
  x.a = m.num_attention_heads;
  x.g = m.query_groups();
  x.d = m.head_dim();
  x.f = m.ffn_hidden_size;
  x.f1 = m.fc1_size();
  x.V = m.padded_vocab_size;
  x.t = in.tensor_parallel_size;
  x.sp = in.sequence_parallel && in.tensor_parallel_size > 1;
  return x;
}

int CalibratedWorkers(const StepModelInputs& in, int cores) {
  const int64_t p = in.placement.pipeline_model_parallel_size;
  const int64_t t = in.tensor_parallel_size;
  const int64_t world = t * in.context_parallel_size * in.data_parallel_size * p;
  const int64_t threads = std::max<int64_t>(1, in.num_threads);
  const int64_t pool = t > 1 ? world : std::min(world, threads);
  const int64_t in_use = std::min<int64_t>(pool, std::max(1, cores));
  return static_cast<int>(std::max<int64_t>(1, in_use / t));
}

absl::StatusOr<StepResult> SimulateCalibratedStep(const StepModelInputs& in) {
  if (in.cost_table == nullptr) {
    return absl::InvalidArgumentError("SimulateCalibratedStep needs a cost table");
  }
  const CostTable& table = *in.cost_table;
  if (in.context_parallel_size != 1) {
    return absl::InvalidArgumentError(
        "simulate --cost-table: context parallelism is not calibrated (the CPU backend runs CP 1)");
  }
  // Memory, parameters and FLOPs from the roofline model; times replaced below.
  StepModelInputs roofline = in;
  roofline.cost_table = nullptr;
  MXMACA_ASSIGN_OR_RETURN(StepResult r, SimulateStep(roofline));

  const int64_t p = in.placement.pipeline_model_parallel_size;
  const int64_t v = in.placement.virtual_pipeline_model_parallel_size;
  const int64_t t = in.tensor_parallel_size;
  const int64_t dp = in.data_parallel_size;
  const int64_t world = t * dp * p;
  const int64_t threads = std::max<int64_t>(1, in.num_threads);
  const int64_t pool = t > 1 ? world : std::min(world, threads);
  const int64_t cores_in_use = std::min<int64_t>(pool, table.cores);
  // mxmaca train builds every rank's GptStage from the model config, whose num_threads is
  // --num-threads (api/train/train_setup.cc), so each layer op runs --num-threads OpenMP
  // threads whatever the pool size (only the optimizer uses threads / pool threads).
  const int64_t threads_per_op = threads;
  r.workers = CalibratedWorkers(in, table.cores);
  if (threads_per_op != table.threads_per_op) {
    r.notes.push_back(absl::StrCat("ops run with ", threads_per_op,
                                   " OpenMP thread(s) here; the table measured ",
                                   table.threads_per_op));
  }
  if (pool > table.cores) {
    r.notes.push_back(absl::StrCat(pool, " pool threads on ", table.cores,
                                   " cores: modelled as ", cores_in_use, " (time-sliced)"));
  }
  const OpShape shape = OpShapeOf(in);
  const int concurrency = static_cast<int>(std::min<int64_t>(r.workers, p * dp));
  MXMACA_ASSIGN_OR_RETURN(auto embedding,
                          table.OpSeconds(CostOpKind::kEmbedding, shape, concurrency));
  MXMACA_ASSIGN_OR_RETURN(auto head, table.OpSeconds(CostOpKind::kLossHead, shape, concurrency));

  scheduler::OpCosts costs;
  costs.per_stage.resize(static_cast<size_t>(p));
  costs.fused_backward = in.schedule.name == "1f1b" || in.schedule.name == "interleaved-1f1b" ||
                         in.schedule.name == "gpipe";
  for (int64_t s = 0; s < p; ++s) {
    std::array<double, 3> sum = {0, 0, 0};
    for (const layers::StageLayout& layout : in.placement.layouts[static_cast<size_t>(s)]) {
      const double n = static_cast<double>(layout.num_layers());
      // Per-layer times measured at the stage depth nearest this chunk's.
      MXMACA_ASSIGN_OR_RETURN(OpTriple layer, table.OpSeconds(CostOpKind::kLayer, shape,
                                                              concurrency, layout.num_layers()));
      for (int k = 0; k < 3; ++k) {
        double op = n * layer[k] + table.op_overhead_s;
        if (layout.has_embedding) op += embedding[k];
        if (layout.has_loss_head) op += head[k];
        sum[k] += op / static_cast<double>(v);
      }
      sum[1] += static_cast<double>(RecomputedLayers(in.model, layout.num_layers())) * layer[0] /
                static_cast<double>(v);
    }
    StageResult& st = r.stages[static_cast<size_t>(s)];
    for (int k = 0; k < 3; ++k) {
      st.op[k] = OpTime();
      st.op[k].gemm = sum[k];  // the measured op (compute, memory and TP collectives)
      costs.per_stage[static_cast<size_t>(s)][k] = sum[k];
    }
  }
  const double rows = static_cast<double>(shape.sp ? shape.b * shape.s / t : shape.b * shape.s);
  r.p2p_seconds = table.p2p.Seconds(rows * static_cast<double>(shape.h) * kFp32);
  costs.comm_latency = p > 1 || v > 1 ? r.p2p_seconds : 0;
  MXMACA_ASSIGN_OR_RETURN(SharedWorkerTiming replay,
                          ReplayOnSharedWorkers(in.schedule, costs, static_cast<int>(dp),
                                                r.workers));
  r.timing = scheduler::ScheduleTiming();
  r.timing.makespan = replay.makespan;
  r.timing.ops = replay.ops;
  r.timing.busy.assign(static_cast<size_t>(p), 0);
  r.timing.idle.assign(static_cast<size_t>(p), 0);
  double idle = 0;
  for (int64_t s = 0; s < p; ++s) {
    for (const scheduler::OpTiming& o : replay.ops[static_cast<size_t>(s)]) {
      r.timing.busy[static_cast<size_t>(s)] += o.finish - o.start;
    }
    r.timing.idle[static_cast<size_t>(s)] = replay.makespan - r.timing.busy[static_cast<size_t>(s)];
    idle += r.timing.idle[static_cast<size_t>(s)];
  }
  r.timing.bubble_fraction =
      replay.makespan > 0 ? idle / (static_cast<double>(p) * replay.makespan) : 0;
  r.bubble_fraction = r.timing.bubble_fraction;

  // Gradient all-reduce over the dp replicas of each (stage, TP rank) group, in-process:
  // the hub sums the dp buffers on one pool thread, so its cost grows with dp (measured at
  // allreduce_ranks); the p x t groups share the cores in use. Optimizer: AdamW over each
  // rank's parameters (its 1/dp share with the distributed optimizer), all ranks on the
  // cores in use.
  double sync_work = 0, optimizer_work = 0;
  for (int64_t s = 0; s < p; ++s) {
    StageResult& st = r.stages[static_cast<size_t>(s)];
    const double params = static_cast<double>(st.parameters);
    st.dp_grad_sync =
        dp > 1 ? table.allreduce.latency_s +
                     params * kFp32 * table.allreduce.seconds_per_byte * static_cast<double>(dp) /
                         static_cast<double>(table.allreduce_ranks)
               : 0;
    const double updated = in.distributed_optimizer ? params / static_cast<double>(dp) : params;
    st.optimizer = updated * table.optimizer_seconds_per_parameter;
    st.param_gather = st.param_gather_exposed = 0;
    sync_work += static_cast<double>(t) * st.dp_grad_sync;
    optimizer_work += static_cast<double>(t * dp) * st.optimizer;
  }
  const double sync = sync_work / static_cast<double>(std::min<int64_t>(cores_in_use, p * t));
  const double optimizer = optimizer_work / static_cast<double>(std::min(cores_in_use, world));
  r.step_overhead_seconds = table.step_overhead_s;
  r.step_seconds = replay.makespan + sync + optimizer + table.step_overhead_s;
  r.slowest_stage = 0;
  for (int64_t s = 0; s < p; ++s) {
    StageResult& st = r.stages[static_cast<size_t>(s)];
    st.pipeline_finish = replay.stage_finish[static_cast<size_t>(s)];
    st.dp_grad_exposed = st.dp_grad_sync;
    st.step_end = r.step_seconds;
    if (st.pipeline_finish > r.stages[static_cast<size_t>(r.slowest_stage)].pipeline_finish) {
      r.slowest_stage = static_cast<int32_t>(s);
    }
  }
  r.exposed_comm_seconds = sync;
  r.tokens_per_second = r.step_seconds > 0 ? static_cast<double>(in.global_batch_size) *
                                                 static_cast<double>(in.model.seq_length) /
                                                 r.step_seconds
                                           : 0;
  r.tflops_per_gpu = r.step_seconds > 0 ? r.model_flops / r.step_seconds /
                                              static_cast<double>(r.world_size) / 1e12
                                        : 0;
  r.mfu = table.gemm_gflops > 0 ? r.tflops_per_gpu * 1e3 / table.gemm_gflops : 0;
  return r;
}

}  // namespace mxmaca::api
