// api/simulate/step_model.cc: see step_model.h; the formulas are listed in
// docs/SIMULATOR.md ("The model").
#include "api/simulate/step_model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "api/simulate/calibrated_step.h"
#include "base/status_macros.h"
#include "layers/flops.h"
#include "layers/stage_memory.h"
#include "scheduler/collective_cost.h"

namespace mxmaca::api {
namespace {

using scheduler::LinkCost;

constexpr double kBf16 = 2, kFp32 = 4;
// Adam step bytes per parameter (fused multi-tensor Adam over fp32 main params): read
// grad 4, read+write master 8, exp_avg 8, exp_avg_sq 8, write bf16 param 2, plus the
// grad-norm pass reading the grad again 4.
constexpr double kAdamBytesPerParam = 34;

// Everything the per-op formulas need, resolved once.
struct Ctx {
  double b, s, h, a, g, d, f, f1, V, t, c;
  double T;         // b s / c tokens per micro-batch on this rank
  double Tn;        // rows of the norm / residual / dropout work: T / t with SP, else T
  bool sp;
  double flops_per_s;  // peak x gemm_efficiency
  double hbm_bytes_per_s;
  LinkCost tp_link, cp_link;
  int64_t tp, cp;
};

Ctx MakeCtx(const StepModelInputs& in) {
  const layers::GptConfig& m = in.model;
  Ctx x;
  x.b = static_cast<double>(in.micro_batch_size);
  x.s = static_cast<double>(m.seq_length);
  x.h = static_cast<double>(m.hidden_size);
  x.a = static_cast<double>(m.num_attention_heads);
  x.g = static_cast<double>(m.query_groups());
  x.d = static_cast<double>(m.head_dim());
  x.f = static_cast<double>(m.ffn_hidden_size);
  x.f1 = static_cast<double>(m.fc1_size());
  x.V = static_cast<double>(m.padded_vocab_size);
  x.tp = in.tensor_parallel_size;
  x.cp = in.context_parallel_size;
  x.t = static_cast<double>(x.tp);
  x.c = static_cast<double>(x.cp);
  x.T = x.b * x.s / x.c;
  x.sp = in.sequence_parallel && x.tp > 1;
  x.Tn = x.sp ? x.T / x.t : x.T;
  x.flops_per_s = in.cluster.gpu.bf16_dense_tflops * 1e12 * in.cluster.gemm_efficiency;
  x.hbm_bytes_per_s = in.cluster.gpu.hbm_gb_per_s * 1e9 * in.cluster.hbm_efficiency;
  scheduler::ParallelGroups groups{x.tp, x.cp, in.data_parallel_size, 1};
  x.tp_link = scheduler::GroupLink(in.cluster, groups.tp_stride(), x.tp);
  x.cp_link = scheduler::GroupLink(in.cluster, groups.cp_stride(), x.cp);
  return x;
}

// A TP "conjugate pair" on a [T, h] bf16 activation: all-reduce without SP; with SP
// the all-gather (into a column-parallel linear) or reduce-scatter (out of a row-parallel
// one), which cost the same under the ring model.
double TpExchange(const Ctx& x) {
  const double bytes = x.T * x.h * kBf16;
  return x.sp ? scheduler::AllGatherSeconds(bytes, x.tp, x.tp_link)
              : scheduler::AllReduceSeconds(bytes, x.tp, x.tp_link);
}

// One transformer layer's F, B, W (no recomputation), per micro-batch, on one rank.
// GEMM FLOPs at TP shard sizes: QKV 2 T h (a + 2g) d / t, core attention (causal,
// flash: half of the s x s scores) 2 b (a/t) (s/c) s d x 2 GEMMs x 1/2, projection
// 2 T a d h / t, fc1 2 T h f1 / t, fc2 2 T f h / t. B: the input-gradient GEMMs (same
// FLOPs as F's linears) plus core attention's backward (2x its forward); W: the weight-
// gradient GEMMs (same FLOPs as F's linears) — Megatron's 1:1:1 split of the linears.
// Memory-bound, bf16, forward: 2 norms (read + write Tn h each), 2 bias-dropout-adds
// (read 2, write 1, mask 1 byte per element), the activation (read T f1 / t, write
// T f / t); backward twice that. TP: 2 exchanges in F and 2 in B (Megatron's f/g
// operators); CP: all-gather of K and V in F, reduce-scatter of their gradients in B,
// exposed only beyond core attention's compute (ring attention overlaps them).
std::array<OpTime, 3> LayerOps(const Ctx& x) {
  const double linear = 2 * x.T * x.h * (x.a + 2 * x.g) * x.d / x.t +
                        2 * x.T * x.a * x.d * x.h / x.t + 2 * x.T * x.h * x.f1 / x.t +
                        2 * x.T * x.f * x.h / x.t;
  const double attention = 2 * x.b * (x.a / x.t) * (x.s / x.c) * x.s * x.d;  // 2 GEMMs x 1/2
  const double elementwise_bytes = 2 * 2 * x.Tn * x.h * kBf16 +
                                   2 * (3 * x.Tn * x.h * kBf16 + x.Tn * x.h) +
                                   (x.T * x.f1 / x.t + x.T * x.f / x.t) * kBf16;
  std::array<OpTime, 3> op;
  op[0].gemm = (linear + attention) / x.flops_per_s;
  op[1].gemm = (linear + 2 * attention) / x.flops_per_s;
  op[2].gemm = linear / x.flops_per_s;
  op[0].memory = elementwise_bytes / x.hbm_bytes_per_s;
  op[1].memory = 2 * elementwise_bytes / x.hbm_bytes_per_s;
  op[0].tp_comm = op[1].tp_comm = 2 * TpExchange(x);
  if (x.cp > 1) {
    const double kv_bytes = 2 * x.b * x.s * (x.g / x.t) * x.d * kBf16;  // whole sequence
    // Ring attention passes K/V chunks while it computes on the previous ones: only the
    // part longer than core attention's compute is exposed.
    const double attention_forward = attention / x.flops_per_s;
    op[0].cp_comm = std::max(
        0.0, scheduler::AllGatherSeconds(kv_bytes, x.cp, x.cp_link) - attention_forward);
    op[1].cp_comm = std::max(
        0.0, scheduler::ReduceScatterSeconds(kv_bytes, x.cp, x.cp_link) - 2 * attention_forward);
  }
  return op;
}

// Core attention's forward alone (what selective recomputation redoes in B).
double AttentionCoreForward(const Ctx& x) {
  return 2 * x.b * (x.a / x.t) * (x.s / x.c) * x.s * x.d / x.flops_per_s;
}

void Add(OpTime* into, const OpTime& from, double k = 1) {
  into->gemm += k * from.gemm;
  into->memory += k * from.memory;
  into->tp_comm += k * from.tp_comm;
  into->cp_comm += k * from.cp_comm;
}

// Layers of a chunk that full recomputation redoes: all with method uniform, the first
// recompute_num_layers with block.
int64_t RecomputedLayers(const layers::GptConfig& m, int64_t chunk_layers) {
  if (m.recompute_granularity != layers::RecomputeGranularity::kFull) return 0;
  if (m.recompute_method == layers::RecomputeMethod::kUniform) return chunk_layers;
  return std::min(chunk_layers, m.recompute_num_layers);
}

// ChunkOps: F, B, W of one model chunk (layers plus embedding / loss head).
std::array<OpTime, 3> ChunkOps(const Ctx& x, const layers::GptConfig& m,
                               const layers::StageLayout& layout) {
  const std::array<OpTime, 3> layer = LayerOps(x);
  const double n = static_cast<double>(layout.num_layers());
  std::array<OpTime, 3> op;
  for (int k = 0; k < 3; ++k) Add(&op[k], layer[k], n);
  const double recomputed = static_cast<double>(RecomputedLayers(m, layout.num_layers()));
  Add(&op[1], layer[0], recomputed);  // B reruns the forward of recomputed layers
  if (m.recompute_granularity == layers::RecomputeGranularity::kSelective) {
    op[1].gemm += n * AttentionCoreForward(x);
  }
  if (layout.has_embedding) {
    // Lookup (read + write T h), then the vocab-parallel all-reduce (or reduce-scatter).
    op[0].memory += 2 * x.T * x.h * kBf16 / x.hbm_bytes_per_s;
    op[1].memory += 2 * x.T * x.h * kFp32 / x.hbm_bytes_per_s;  // scatter-add of grads
    if (x.tp > 1) op[0].tp_comm += TpExchange(x);
  }
  if (layout.has_loss_head) {
    // Final norm, logits GEMM 2 T h V / t (F; B and W the same), fp32 cross-entropy over
    // T V / t logits (F: cast, max, exp-sum: ~3 passes; B: 2 passes), with SP an
    // all-gather of the norm output in F and a reduce-scatter in B, and 3 all-reduces of
    // T fp32 values (max, sum, target logit) for the vocab-parallel cross-entropy.
    const double logits = 2 * x.T * x.h * x.V / x.t / x.flops_per_s;
    op[0].gemm += logits;
    op[1].gemm += logits;
    op[2].gemm += logits;
    const double ce = x.T * x.V / x.t * kFp32;
    op[0].memory += (3 * ce + 2 * x.Tn * x.h * kBf16) / x.hbm_bytes_per_s;
    op[1].memory += (2 * ce + 4 * x.Tn * x.h * kBf16) / x.hbm_bytes_per_s;
    if (x.tp > 1) {
      op[0].tp_comm += 3 * scheduler::AllReduceSeconds(x.T * kFp32, x.tp, x.tp_link);
      if (x.sp) {
        op[0].tp_comm += TpExchange(x);
        op[1].tp_comm += TpExchange(x);
      }
    }
  }
  return op;
}

// Activation bytes one micro-batch leaves stashed on a chunk (Korthikanti et al. 2022,
// "Reducing Activation Recomputation in Large Transformer Models", eq. 1-4 in bf16,
// without the 5 a s^2 b term: fused (flash) attention keeps no s x s tensors):
// per layer 34 T h / t with SP, T h (10 + 24 / t) without; a layer recomputed in full
// keeps only its input, 2 T h (/ t with SP) once per recomputed group (uniform: groups
// of recompute_num_layers; block: each of the first recompute_num_layers layers).
// Embedding chunk: its output and dropout mask, 3 T h (/ t with SP). Loss head: the fp32
// softmax of the vocab shard, 4 T V / t, and the final norm's input 2 T h (/ t with SP).
double ChunkStashBytes(const Ctx& x, const layers::GptConfig& m,
                       const layers::StageLayout& layout) {
  const double per_layer = x.sp ? 34 * x.T * x.h / x.t : x.T * x.h * (10 + 24 / x.t);
  const double input = 2 * x.Tn * x.h;
  const int64_t n = layout.num_layers();
  double bytes = 0;
  if (m.recompute_granularity == layers::RecomputeGranularity::kFull) {
    const int64_t k = std::max<int64_t>(1, m.recompute_num_layers);
    if (m.recompute_method == layers::RecomputeMethod::kUniform) {
      bytes += static_cast<double>((n + k - 1) / k) * input;
    } else {
      const int64_t r = std::min(n, k);
      bytes += static_cast<double>(r) * input + static_cast<double>(n - r) * per_layer;
    }
  } else {
    bytes += static_cast<double>(n) * per_layer;
  }
  if (layout.has_embedding) bytes += 3 * x.Tn * x.h;
  if (layout.has_loss_head) bytes += 4 * x.T * x.V / x.t + input;
  return bytes;
}

// The activations one recomputed group re-materialises during B (full recomputation).
double RecomputeTransientBytes(const Ctx& x, const layers::GptConfig& m, int64_t chunk_layers) {
  if (m.recompute_granularity != layers::RecomputeGranularity::kFull) return 0;
  const double per_layer = x.sp ? 34 * x.T * x.h / x.t : x.T * x.h * (10 + 24 / x.t);
  const int64_t k = m.recompute_method == layers::RecomputeMethod::kUniform
                        ? std::min(chunk_layers, std::max<int64_t>(1, m.recompute_num_layers))
                        : std::min<int64_t>(chunk_layers, 1);
  return static_cast<double>(k) * per_layer;
}

}  // namespace

absl::StatusOr<StepResult> SimulateStep(const StepModelInputs& in) {
  if (in.cost_table != nullptr) return SimulateCalibratedStep(in);
  const int64_t p = in.placement.pipeline_model_parallel_size;
  const int64_t v = in.placement.virtual_pipeline_model_parallel_size;
  if (in.micro_batch_size < 1 || in.global_batch_size < 1 || in.tensor_parallel_size < 1 ||
      in.context_parallel_size < 1 || in.data_parallel_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "simulate: sizes must be >= 1 (micro batch ", in.micro_batch_size, ", global batch ",
        in.global_batch_size, ", tp ", in.tensor_parallel_size, ", cp ",
        in.context_parallel_size, ", dp ", in.data_parallel_size, ")"));
  }
  if (in.schedule.num_stages != p || static_cast<int64_t>(in.placement.layouts.size()) != p) {
    return absl::InvalidArgumentError(absl::StrCat("simulate: schedule has ",
                                                   in.schedule.num_stages,
                                                   " stages, placement ", p));
  }
  const Ctx x = MakeCtx(in);
  const layers::GptConfig& m = in.model;
  const int64_t dp = in.data_parallel_size;
  scheduler::ParallelGroups groups{in.tensor_parallel_size, in.context_parallel_size, dp, p};

  StepResult r;
  r.world_size = in.tensor_parallel_size * in.context_parallel_size * dp * p;
  r.stages.resize(static_cast<size_t>(p));
  scheduler::OpCosts costs;
  costs.per_stage.resize(static_cast<size_t>(p));
  costs.fused_backward = in.schedule.name == "1f1b" || in.schedule.name == "interleaved-1f1b" ||
                         in.schedule.name == "gpipe";
  std::vector<double> stash(static_cast<size_t>(p), 0), transient(static_cast<size_t>(p), 0);
  for (int64_t s = 0; s < p; ++s) {
    StageResult& st = r.stages[static_cast<size_t>(s)];
    for (const layers::StageLayout& layout : in.placement.layouts[static_cast<size_t>(s)]) {
      const std::array<OpTime, 3> ops = ChunkOps(x, m, layout);
      for (int k = 0; k < 3; ++k) Add(&st.op[k], ops[k], 1.0 / static_cast<double>(v));
      // Parameters of the TP shard: the stage's count / t (norms are replicated; their
      // share is negligible).
      st.parameters += layers::CountStageParameters(m, layout) / in.tensor_parallel_size;
      stash[static_cast<size_t>(s)] += ChunkStashBytes(x, m, layout) / static_cast<double>(v);
      transient[static_cast<size_t>(s)] = std::max(
          transient[static_cast<size_t>(s)], RecomputeTransientBytes(x, m, layout.num_layers()));
    }
    for (int k = 0; k < 3; ++k) costs.per_stage[static_cast<size_t>(s)][k] = st.op[k].total();
  }
  // Pipeline hand-over: the [T, h] bf16 activation (T / t rows per rank with SP).
  r.p2p_seconds = scheduler::SendRecvSeconds(x.Tn * x.h * kBf16,
                                             scheduler::PipelineNeighbourLink(in.cluster, groups));
  costs.comm_latency = p > 1 || v > 1 ? r.p2p_seconds : 0;
  MXMACA_ASSIGN_OR_RETURN(r.timing, scheduler::SimulateSchedule(in.schedule, costs));
  r.bubble_fraction = r.timing.bubble_fraction;
  const std::vector<int32_t> stashed = scheduler::PeakStashedMicrobatches(in.schedule);

  // Data parallel: gradients reduced over dp x cp ranks (Megatron's data-parallel group
  // with CP), stride t.
  const int64_t dp_cp = dp * in.context_parallel_size;
  const LinkCost dp_link = scheduler::GroupLink(in.cluster, in.tensor_parallel_size, dp_cp);
  for (int64_t s = 0; s < p; ++s) {
    StageResult& st = r.stages[static_cast<size_t>(s)];
    const auto& ops = r.timing.ops[static_cast<size_t>(s)];
    st.pipeline_finish = ops.empty() ? 0 : ops.back().finish;
    const double params = static_cast<double>(st.parameters);
    if (in.distributed_optimizer) {
      st.dp_grad_sync = scheduler::ReduceScatterSeconds(params * kFp32, dp_cp, dp_link);
      st.param_gather = scheduler::AllGatherSeconds(params * kBf16, dp_cp, dp_link);
    } else {
      st.dp_grad_sync = scheduler::AllReduceSeconds(params * kFp32, dp_cp, dp_link);
    }
    // Overlap: with --overlap-grad-reduce the buckets go out while the last micro-batch's
    // backward runs (its B and W on all v chunks); without it everything is exposed. The
    // param all-gather hides behind the next step's first forward (v chunks' F) with
    // --overlap-param-gather.
    const double last_backward = static_cast<double>(v) * (st.op[1].total() + st.op[2].total());
    st.dp_grad_exposed = in.overlap_grad_reduce
                             ? std::max(0.0, st.dp_grad_sync - last_backward)
                             : st.dp_grad_sync;
    const double first_forward = static_cast<double>(v) * st.op[0].total();
    st.param_gather_exposed = in.overlap_param_gather
                                  ? std::max(0.0, st.param_gather - first_forward)
                                  : st.param_gather;
    const double updated = in.distributed_optimizer
                               ? std::ceil(params / static_cast<double>(dp_cp))
                               : params;
    st.optimizer = updated * kAdamBytesPerParam / x.hbm_bytes_per_s;
    st.step_end = st.pipeline_finish + st.dp_grad_exposed + st.optimizer + st.param_gather_exposed;
    // Memory: bf16 params 2, fp32 main grads 4, fp32 master + exp_avg + exp_avg_sq 12
    // (sharded over dp x cp with the distributed optimizer): Megatron's 18 (or
    // 6 + 12 / d) bytes per parameter.
    st.param_bytes = params * kBf16;
    st.grad_bytes = params * kFp32;
    st.optimizer_bytes = 3 * kFp32 * updated;
    st.stashed_microbatches = stashed[static_cast<size_t>(s)];
    st.activation_bytes =
        static_cast<double>(st.stashed_microbatches) * stash[static_cast<size_t>(s)];
    st.transient_bytes = transient[static_cast<size_t>(s)];
    if (st.step_end > r.step_seconds) {
      r.step_seconds = st.step_end;
      r.slowest_stage = static_cast<int32_t>(s);
    }
    if (st.total_bytes() > r.peak_memory_bytes) {
      r.peak_memory_bytes = st.total_bytes();
      r.peak_memory_stage = static_cast<int32_t>(s);
    }
  }
  const StageResult& slow = r.stages[static_cast<size_t>(r.slowest_stage)];
  const double ops_per_stage =
      static_cast<double>(in.schedule.num_microbatches) * static_cast<double>(v);
  r.exposed_comm_seconds =
      ops_per_stage * (slow.op[0].tp_comm + slow.op[0].cp_comm + slow.op[1].tp_comm +
                       slow.op[1].cp_comm + slow.op[2].tp_comm) +
      slow.dp_grad_exposed + slow.param_gather_exposed;
  layers::DenseGptShape shape;
  shape.num_layers = m.num_layers;
  shape.hidden_size = m.hidden_size;
  shape.ffn_hidden_size = m.ffn_hidden_size;
  shape.num_attention_heads = m.num_attention_heads;
  shape.num_query_groups = m.query_groups();
  shape.kv_channels = m.head_dim();
  shape.seq_length = m.seq_length;
  shape.padded_vocab_size = m.padded_vocab_size;
  shape.swiglu = m.swiglu;
  r.model_flops = layers::NumFloatingPointOperations(shape, in.global_batch_size);
  if (r.step_seconds > 0) {
    r.tokens_per_second =
        static_cast<double>(in.global_batch_size) * x.s / r.step_seconds;
    r.tflops_per_gpu =
        r.model_flops / r.step_seconds / static_cast<double>(r.world_size) / 1e12;
    r.mfu = r.tflops_per_gpu / in.cluster.gpu.bf16_dense_tflops;
  }
  return r;
}

}  // namespace mxmaca::api
