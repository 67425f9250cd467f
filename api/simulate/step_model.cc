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
  bool materialized_attention;  // --attention-backend unfused|local: s x s scores in HBM
  double attention_dropout;
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
  x.materialized_attention = in.materialized_attention;
  x.attention_dropout = static_cast<double>(m.attention_dropout);
  x.flops_per_s = in.cluster.gpu.bf16_dense_tflops * 1e12 * in.cluster.gemm_efficiency;
  x.hbm_bytes_per_s = in.cluster.gpu.hbm_gb_per_s * 1e9 * in.cluster.hbm_efficiency;
  scheduler::ParallelGroups groups{x.tp, x.cp, in.data_parallel_size, 1};
  x.tp_link = scheduler::GroupLink(in.cluster, groups.tp_stride(), x.tp);
  x.cp_link = scheduler::GroupLink(in.cluster, groups.cp_stride(), x.cp);
  return x;
}

// TpBlockExchange: the TP communication of one transformer block (attention or MLP) on
// its [T, h] bf16 activation, per F (and, as the conjugates, per B), as Megatron runs it
// (megatron/core/tensor_parallel/mappings.py). Without SP: one all-reduce (F: after the
// row-parallel linear; B: of the column-parallel linear's input gradient). With SP: an
// all-gather into the column-parallel linear (linear_qkv, linear_fc1) and a
// reduce-scatter out of the row-parallel one (linear_proj, linear_fc2); B: a
// reduce-scatter and an all-gather. Under the ring model all-gather + reduce-scatter
// move the bytes of one ring all-reduce, so SP costs what the all-reduce does whenever
// the ring is the cheaper all-reduce. Not counted: the all-gather of the column-parallel
// linear's input that Megatron repeats in B for the weight gradient with SP (issued
// asynchronously, overlapped with the input-gradient GEMM).
double TpBlockExchange(const Ctx& x) {
  const double bytes = x.T * x.h * kBf16;
  return x.sp ? scheduler::AllGatherSeconds(bytes, x.tp, x.tp_link) +
                    scheduler::ReduceScatterSeconds(bytes, x.tp, x.tp_link)
              : scheduler::AllReduceSeconds(bytes, x.tp, x.tp_link);
}

// TpSequenceGatherOrScatter: one SP all-gather or reduce-scatter of a [T, h] bf16
// activation (the same time under the ring model): the embedding output's
// reduce-scatter (B: all-gather), the loss head input's all-gather (B: reduce-scatter).
double TpSequenceGatherOrScatter(const Ctx& x) {
  return scheduler::AllGatherSeconds(x.T * x.h * kBf16, x.tp, x.tp_link);
}

// CoreAttention: softmax(Q K^T / sqrt(d)) V of one layer, per micro-batch on one rank,
// split into GEMM and memory-bound time, F and B. S = b (a/t) (s/c) s score elements.
// Fused (flash) attention, the default: 2 GEMMs of 2 S d FLOPs each, halved (causal),
// nothing of size S in HBM; B twice F. Materialised (--attention-backend unfused or local:
// Megatron's DotProductAttention, and every run before flash attention, e.g. the 2021
// paper's): both GEMMs over all S scores (the causal mask is applied in the softmax), each
// at roofline time max(2 S d / FLOP rate, 2 S bf16 bytes of the scores it writes or reads /
// HBM rate) — at d ~ 100 these GEMMs are below the ridge point, so the bytes decide; the
// fused scale-mask-softmax reads and writes S (4 S bytes), the attention dropout reads and
// writes S and writes a 1-byte mask (5 S bytes, when --attention-dropout > 0). B: 4 such
// GEMMs (dP, dV, dQ, dK), the dropout backward (read dP and the mask, write: 5 S) and the
// softmax backward (read the probabilities and their gradient, write: 6 S).
struct CoreAttention {
  double f_gemm = 0, f_memory = 0, b_gemm = 0, b_memory = 0;
};

CoreAttention CoreAttentionTimes(const Ctx& x) {
  const double S = x.b * (x.a / x.t) * (x.s / x.c) * x.s;
  CoreAttention r;
  if (!x.materialized_attention) {
    r.f_gemm = 2 * S * x.d / x.flops_per_s;  // 2 GEMMs x 2 S d x 1/2 (causal)
    r.b_gemm = 2 * r.f_gemm;
    return r;
  }
  const double gemm = std::max(2 * S * x.d / x.flops_per_s, S * kBf16 / x.hbm_bytes_per_s);
  const double dropout = x.attention_dropout > 0 ? 5 * S : 0;
  r.f_gemm = 2 * gemm;
  r.b_gemm = 4 * gemm;
  r.f_memory = (2 * S * kBf16 + dropout) / x.hbm_bytes_per_s;
  r.b_memory = (3 * S * kBf16 + dropout) / x.hbm_bytes_per_s;
  return r;
}

// AttentionScoresStashBytes: what a materialised attention keeps for B per layer and
// micro-batch (Korthikanti et al. 2022's 5 a s^2 b term, / t, with CP (s/c) s): the
// softmax output 2 S, and with dropout its mask S and output 2 S. Flash attention: 0.
double AttentionScoresStashBytes(const Ctx& x) {
  if (!x.materialized_attention) return 0;
  const double S = x.b * (x.a / x.t) * (x.s / x.c) * x.s;
  return (x.attention_dropout > 0 ? 5 : 2) * S;
}

// One transformer layer's F, B, W (no recomputation), per micro-batch, on one rank.
// GEMM FLOPs at TP shard sizes: QKV 2 T h (a + 2g) d / t, core attention (causal,
// flash: half of the s x s scores) 2 b (a/t) (s/c) s d x 2 GEMMs x 1/2, projection
// 2 T a d h / t, fc1 2 T h f1 / t, fc2 2 T f h / t. B: the input-gradient GEMMs (same
// FLOPs as F's linears) plus core attention's backward (2x its forward); W: the weight-
// gradient GEMMs (same FLOPs as F's linears) — Megatron's 1:1:1 split of the linears.
// Memory-bound, bf16, forward: 2 norms (read + write Tn h each), 2 bias-dropout-adds
// (read 2, write 1, mask 1 byte per element), the activation (read T f1 / t, write
// T f / t); backward twice that. TP: TpBlockExchange for each of the 2 blocks, in F
// and in B; CP: all-gather of K and V in F, reduce-scatter of their gradients in B,
// exposed only beyond core attention's compute (ring attention overlaps them).
std::array<OpTime, 3> LayerOps(const Ctx& x) {
  const double linear = 2 * x.T * x.h * (x.a + 2 * x.g) * x.d / x.t +
                        2 * x.T * x.a * x.d * x.h / x.t + 2 * x.T * x.h * x.f1 / x.t +
                        2 * x.T * x.f * x.h / x.t;
  const CoreAttention attention = CoreAttentionTimes(x);
  const double elementwise_bytes = 2 * 2 * x.Tn * x.h * kBf16 +
                                   2 * (3 * x.Tn * x.h * kBf16 + x.Tn * x.h) +
                                   (x.T * x.f1 / x.t + x.T * x.f / x.t) * kBf16;
  std::array<OpTime, 3> op;
  op[0].gemm = linear / x.flops_per_s + attention.f_gemm;
  op[1].gemm = linear / x.flops_per_s + attention.b_gemm;
  op[2].gemm = linear / x.flops_per_s;
  op[0].memory = elementwise_bytes / x.hbm_bytes_per_s + attention.f_memory;
  op[1].memory = 2 * elementwise_bytes / x.hbm_bytes_per_s + attention.b_memory;
  op[0].tp_comm = op[1].tp_comm = 2 * TpBlockExchange(x);
  if (x.cp > 1) {
    const double kv_bytes = 2 * x.b * x.s * (x.g / x.t) * x.d * kBf16;  // whole sequence
    // Ring attention passes K/V chunks while it computes on the previous ones: only the
    // part longer than core attention's compute is exposed.
    const double attention_forward = attention.f_gemm + attention.f_memory;
    op[0].cp_comm = std::max(
        0.0, scheduler::AllGatherSeconds(kv_bytes, x.cp, x.cp_link) - attention_forward);
    const double attention_backward = attention.b_gemm + attention.b_memory;
    op[1].cp_comm = std::max(
        0.0, scheduler::ReduceScatterSeconds(kv_bytes, x.cp, x.cp_link) - attention_backward);
  }
  return op;
}

void Add(OpTime* into, const OpTime& from, double k = 1) {
  into->gemm += k * from.gemm;
  into->memory += k * from.memory;
  into->tp_comm += k * from.tp_comm;
  into->cp_comm += k * from.cp_comm;
  into->ep_comm += k * from.ep_comm;
}

// The MoE block's inputs from the step's context (null for a dense model).
MoeBlockInputs MoeInputs(const Ctx& x, const StepModelInputs& in) {
  MoeBlockInputs b;
  b.T = x.T;
  b.tp = x.tp;
  b.flops_per_s = x.flops_per_s;
  b.hbm_bytes_per_s = x.hbm_bytes_per_s;
  b.tp_exchange_seconds = TpBlockExchange(x);
  b.cluster = &in.cluster;
  b.parallel = in.moe;
  return b;
}

// One MoE transformer layer's F, B, W: LayerOps without the dense MLP (its fc1 / fc2
// GEMMs, activation and TP exchange), plus the MoE block (moe_cost.h).
std::array<OpTime, 3> MoeLayerOps(const Ctx& x, const layers::GptConfig& m,
                                  const MoeBlockInputs& moe) {
  std::array<OpTime, 3> op = LayerOps(x);
  const double mlp = 2 * x.T * x.h * x.f1 / x.t + 2 * x.T * x.f * x.h / x.t;
  const double activation_bytes = (x.T * x.f1 / x.t + x.T * x.f / x.t) * kBf16;
  op[0].gemm -= mlp / x.flops_per_s;
  op[1].gemm -= mlp / x.flops_per_s;
  op[2].gemm -= mlp / x.flops_per_s;
  op[0].memory -= activation_bytes / x.hbm_bytes_per_s;
  op[1].memory -= 2 * activation_bytes / x.hbm_bytes_per_s;
  op[0].tp_comm = op[1].tp_comm = TpBlockExchange(x);  // the attention block's only
  const std::array<OpTime, 3> block = MoeMlpBlockOps(m, moe);
  for (int k = 0; k < 3; ++k) Add(&op[k], block[k]);
  return op;
}

// MoE layers among global layers [first, last).
int64_t CountMoeLayers(const layers::GptConfig& m, int64_t first, int64_t last) {
  int64_t n = 0;
  for (int64_t l = first; l < last; ++l) n += m.is_moe_layer(l) ? 1 : 0;
  return n;
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
                               const layers::StageLayout& layout, const MoeBlockInputs* moe) {
  const std::array<OpTime, 3> layer = LayerOps(x);
  const int64_t n_moe =
      moe == nullptr ? 0 : CountMoeLayers(m, layout.first_layer, layout.last_layer);
  const double n = static_cast<double>(layout.num_layers() - n_moe);
  std::array<OpTime, 3> op;
  for (int k = 0; k < 3; ++k) Add(&op[k], layer[k], n);
  const int64_t recomputed_layers = RecomputedLayers(m, layout.num_layers());
  if (n_moe == 0) {
    Add(&op[1], layer[0], static_cast<double>(recomputed_layers));  // B reruns their F
  } else {
    // The first recomputed_layers layers of the chunk are recomputed (all with uniform).
    const int64_t recomputed_moe =
        CountMoeLayers(m, layout.first_layer, layout.first_layer + recomputed_layers);
    const std::array<OpTime, 3> moe_layer = MoeLayerOps(x, m, *moe);
    for (int k = 0; k < 3; ++k) Add(&op[k], moe_layer[k], static_cast<double>(n_moe));
    Add(&op[1], layer[0], static_cast<double>(recomputed_layers - recomputed_moe));
    Add(&op[1], moe_layer[0], static_cast<double>(recomputed_moe));
  }
  const double all_layers = static_cast<double>(layout.num_layers());
  if (m.recompute_granularity == layers::RecomputeGranularity::kSelective) {
    // Selective recomputation reruns core attention's forward inside B.
    const CoreAttention attention = CoreAttentionTimes(x);
    op[1].gemm += all_layers * attention.f_gemm;
    op[1].memory += all_layers * attention.f_memory;
  }
  if (layout.has_embedding) {
    // Lookup (read + write T h), then the vocab-parallel all-reduce (its B: none) or,
    // with SP, the reduce-scatter into the sequence-parallel region (its B: all-gather).
    op[0].memory += 2 * x.T * x.h * kBf16 / x.hbm_bytes_per_s;
    op[1].memory += 2 * x.T * x.h * kFp32 / x.hbm_bytes_per_s;  // scatter-add of grads
    if (x.tp > 1) {
      if (x.sp) {
        op[0].tp_comm += TpSequenceGatherOrScatter(x);
        op[1].tp_comm += TpSequenceGatherOrScatter(x);
      } else {
        op[0].tp_comm += scheduler::AllReduceSeconds(x.T * x.h * kBf16, x.tp, x.tp_link);
      }
    }
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
        op[0].tp_comm += TpSequenceGatherOrScatter(x);
        op[1].tp_comm += TpSequenceGatherOrScatter(x);
      }
    }
  }
  return op;
}

// A MoE layer's stash: Korthikanti et al.'s per-layer terms without the MLP block's
// 19 T h / t (attention 11, norms 4, with SP or t = 1: 15 Tn h), plus the MoE block's
// (moe_cost.h MoeMlpBlockStashBytes).
double MoeLayerStashBytes(const Ctx& x, const layers::GptConfig& m, const MoeBlockInputs& moe) {
  const double scores = m.recompute_granularity == layers::RecomputeGranularity::kSelective
                            ? 0
                            : AttentionScoresStashBytes(x);
  return 15 * x.Tn * x.h + scores + MoeMlpBlockStashBytes(m, moe);
}

// Activation bytes one micro-batch leaves stashed on a chunk (Korthikanti et al. 2022,
// "Reducing Activation Recomputation in Large Transformer Models", eq. 1-4 in bf16,
// without the 5 a s^2 b term unless attention is materialised (fused / flash attention
// keeps no s x s tensors; AttentionScoresStashBytes):
// per layer 34 T h / t with SP, T h (10 + 24 / t) without; a layer recomputed in full
// keeps only its input, 2 T h (/ t with SP) once per recomputed group (uniform: groups
// of recompute_num_layers; block: each of the first recompute_num_layers layers).
// Embedding chunk: its output and dropout mask, 3 T h (/ t with SP). Loss head: the fp32
// softmax of the vocab shard, 4 T V / t, and the final norm's input 2 T h (/ t with SP).
double ChunkStashBytes(const Ctx& x, const layers::GptConfig& m,
                       const layers::StageLayout& layout, const MoeBlockInputs* moe) {
  // Materialised attention's scores (AttentionScoresStashBytes) unless selective
  // recomputation reruns core attention.
  const double scores = m.recompute_granularity == layers::RecomputeGranularity::kSelective
                            ? 0
                            : AttentionScoresStashBytes(x);
  const double per_layer =
      (x.sp ? 34 * x.T * x.h / x.t : x.T * x.h * (10 + 24 / x.t)) + scores;
  const double input = 2 * x.Tn * x.h;
  const int64_t n = layout.num_layers();
  // Sum of the whole-layer stashes of global layers [first, last): per_layer for dense
  // layers, MoeLayerStashBytes for MoE layers.
  const auto layers_stash = [&](int64_t first, int64_t last) {
    const int64_t n_moe = moe == nullptr ? 0 : CountMoeLayers(m, first, last);
    if (n_moe == 0) return static_cast<double>(last - first) * per_layer;
    return static_cast<double>(last - first - n_moe) * per_layer +
           static_cast<double>(n_moe) * MoeLayerStashBytes(x, m, *moe);
  };
  double bytes = 0;
  if (m.recompute_granularity == layers::RecomputeGranularity::kFull) {
    const int64_t k = std::max<int64_t>(1, m.recompute_num_layers);
    if (m.recompute_method == layers::RecomputeMethod::kUniform) {
      bytes += static_cast<double>((n + k - 1) / k) * input;
    } else {
      const int64_t r = std::min(n, k);
      bytes += static_cast<double>(r) * input +
               layers_stash(layout.first_layer + r, layout.last_layer);
    }
  } else {
    bytes += layers_stash(layout.first_layer, layout.last_layer);
  }
  if (layout.has_embedding) bytes += 3 * x.Tn * x.h;
  if (layout.has_loss_head) bytes += 4 * x.T * x.V / x.t + input;
  return bytes;
}

// The activations one recomputed group re-materialises during B (full recomputation);
// with MoE layers in the model, a group is costed at the larger of the two layer kinds.
double RecomputeTransientBytes(const Ctx& x, const layers::GptConfig& m, int64_t chunk_layers,
                               const MoeBlockInputs* moe) {
  if (m.recompute_granularity != layers::RecomputeGranularity::kFull) return 0;
  double per_layer =
      (x.sp ? 34 * x.T * x.h / x.t : x.T * x.h * (10 + 24 / x.t)) + AttentionScoresStashBytes(x);
  if (moe != nullptr) per_layer = std::max(per_layer, MoeLayerStashBytes(x, m, *moe));
  const int64_t k = m.recompute_method == layers::RecomputeMethod::kUniform
                        ? std::min(chunk_layers, std::max<int64_t>(1, m.recompute_num_layers))
                        : std::min<int64_t>(chunk_layers, 1);
  return static_cast<double>(k) * per_layer;
}

// CheckMoe: the MoE settings the model can cost (OK for a dense model).
absl::Status CheckMoe(const StepModelInputs& in) {
  if (in.model.moe == nullptr) return absl::OkStatus();
  const MoeParallelOptions& o = in.moe;
  const int64_t experts = in.model.moe->router.num_experts;
  const int64_t ranks = in.tensor_parallel_size * in.context_parallel_size * in.data_parallel_size;
  if (in.tensor_parallel_size > 1 && !in.sequence_parallel) {
    return absl::InvalidArgumentError(
        "simulate: MoE with --tensor-model-parallel-size > 1 needs --sequence-parallel "
        "(Megatron-Core requires it for MoE with TP; the model costs the sequence-parallel "
        "token flow)");
  }
  if (o.expert_model_parallel_size < 1 || o.expert_tensor_parallel_size < 1 ||
      experts % o.expert_model_parallel_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "simulate: --expert-model-parallel-size ", o.expert_model_parallel_size,
        " must be >= 1 and divide --num-experts ", experts,
        " (--expert-tensor-parallel-size ", o.expert_tensor_parallel_size, ")"));
  }
  if (ranks % (o.expert_model_parallel_size * o.expert_tensor_parallel_size) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "simulate: expert tensor (", o.expert_tensor_parallel_size, ") x expert (",
        o.expert_model_parallel_size, ") parallel size must divide TP x CP x DP = ", ranks));
  }
  if (!(o.load_imbalance >= 1.0) || !std::isfinite(o.load_imbalance)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "simulate: --moe-load-imbalance ", o.load_imbalance,
        ": expected max/mean tokens per expert, a finite number >= 1"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<StepResult> SimulateStep(const StepModelInputs& in) {
  if (in.cost_table != nullptr) {
    if (in.model.moe != nullptr) {
      return absl::InvalidArgumentError(
          "simulate: MoE with a measured cost table (--cost-table) is not modelled; use the "
          "roofline (--cluster)");
    }
    return SimulateCalibratedStep(in);
  }
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
  MXMACA_RETURN_IF_ERROR(CheckMoe(in));
  const bool is_moe = m.moe != nullptr;
  const MoeBlockInputs moe_inputs = is_moe ? MoeInputs(x, in) : MoeBlockInputs();
  const MoeBlockInputs* moe = is_moe ? &moe_inputs : nullptr;

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
      const std::array<OpTime, 3> ops = ChunkOps(x, m, layout, moe);
      for (int k = 0; k < 3; ++k) Add(&st.op[k], ops[k], 1.0 / static_cast<double>(v));
      // Parameters of the TP shard: the stage's count / t (norms are replicated; their
      // share is negligible).
      const int64_t n_moe =
          is_moe ? CountMoeLayers(m, layout.first_layer, layout.last_layer) : 0;
      if (n_moe == 0) {
        st.parameters += layers::CountStageParameters(m, layout) / in.tensor_parallel_size;
      } else {
        // MoE layers: no dense MLP; the shared expert is TP-sharded, the router replicated,
        // the routed experts sharded over EP x ETP (counted apart: they sync over EDP).
        const int64_t tp_sharded = layers::CountStageParameters(m, layout) -
                                   n_moe * (DenseMlpParameters(m) - MoeSharedExpertParameters(m));
        st.parameters += tp_sharded / in.tensor_parallel_size +
                         n_moe * m.moe->router.num_experts * m.hidden_size;
        st.expert_parameters +=
            static_cast<double>(n_moe) * MoeExpertParametersPerRank(m, in.moe);
      }
      stash[static_cast<size_t>(s)] +=
          ChunkStashBytes(x, m, layout, moe) / static_cast<double>(v);
      transient[static_cast<size_t>(s)] =
          std::max(transient[static_cast<size_t>(s)],
                   RecomputeTransientBytes(x, m, layout.num_layers(), moe));
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
  const int64_t edp = is_moe ? in.tensor_parallel_size * dp_cp /
                                   (in.moe.expert_tensor_parallel_size *
                                    in.moe.expert_model_parallel_size)
                             : 1;
  const scheduler::ExpertParallelGroups expert_groups{in.moe.expert_tensor_parallel_size,
                                                      in.moe.expert_model_parallel_size, edp, p};
  const LinkCost edp_link =
      scheduler::GroupLink(in.cluster, expert_groups.edp_stride(), expert_groups.edp);
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
    double expert_updated = 0;
    if (is_moe) {
      // Routed experts: gradients reduced over the expert-data-parallel group (EDP ranks
      // etp x ep apart in the expert grid), in the same window as the dense buckets.
      const double expert = st.expert_parameters;
      if (in.distributed_optimizer) {
        st.edp_grad_sync = scheduler::ReduceScatterSeconds(expert * kFp32, edp, edp_link);
        st.expert_param_gather = scheduler::AllGatherSeconds(expert * kBf16, edp, edp_link);
        expert_updated = std::ceil(expert / static_cast<double>(edp));
      } else {
        st.edp_grad_sync = scheduler::AllReduceSeconds(expert * kFp32, edp, edp_link);
        expert_updated = expert;
      }
      const double grad_sync = st.dp_grad_sync + st.edp_grad_sync;
      const double gather = st.param_gather + st.expert_param_gather;
      st.dp_grad_exposed =
          in.overlap_grad_reduce ? std::max(0.0, grad_sync - last_backward) : grad_sync;
      st.param_gather_exposed =
          in.overlap_param_gather ? std::max(0.0, gather - first_forward) : gather;
      st.optimizer += expert_updated * kAdamBytesPerParam / x.hbm_bytes_per_s;
    }
    st.step_end = st.pipeline_finish + st.dp_grad_exposed + st.optimizer + st.param_gather_exposed;
    // Memory: bf16 params 2, fp32 main grads 4, fp32 master + exp_avg + exp_avg_sq 12
    // (sharded over dp x cp with the distributed optimizer): Megatron's 18 (or
    // 6 + 12 / d) bytes per parameter.
    st.param_bytes = params * kBf16;
    st.grad_bytes = params * kFp32;
    st.optimizer_bytes = 3 * kFp32 * updated;
    if (is_moe) {
      st.param_bytes += st.expert_parameters * kBf16;
      st.grad_bytes += st.expert_parameters * kFp32;
      st.optimizer_bytes += 3 * kFp32 * expert_updated;
    }
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
                       slow.op[1].cp_comm + slow.op[2].tp_comm + slow.op[0].ep_comm +
                       slow.op[1].ep_comm) +
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
  if (is_moe) {  // the MoE terms of Megatron's formula (layers/flops.h)
    shape.num_moe_layers = CountMoeLayers(m, 0, m.num_layers);
    shape.moe_ffn_hidden_size = m.moe->expert.ffn_hidden_size;
    shape.moe_router_topk = m.moe->router.topk;
    shape.shared_expert_ffn_hidden_size = m.moe->shared_expert_ffn_hidden_size;
  }
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
