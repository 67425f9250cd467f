// layers/transformer_layer.cc
#include "layers/transformer_layer.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

#include "base/status_macros.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/philox.h"
#include "layers/context_parallel/cp_context.h"

namespace mxmaca::layers {

namespace cpu = ::mxmaca::kernels::cpu;
using kernels::ExecContext;

kernels::RngKey DropoutKey(uint64_t seed, int64_t layer, DropoutSite site, int64_t iteration,
                           int64_t micro_batch_id) {
  return {seed, kernels::MakeRngStream(
                    static_cast<uint64_t>(layer + 1), static_cast<uint64_t>(site),
                    static_cast<uint64_t>(iteration), static_cast<uint64_t>(micro_batch_id))};
}

namespace {

// EffectiveGamma: the norm's multiplier: `w` itself, or 1 + w with --apply-layernorm-1p
// (Megatron-Core layernorm_zero_centered_gamma: the weight stores gamma - 1; FusedLayerNorm
// and Transformer Engine's LayerNorm / RMSNorm apply weight + 1). The 1 + w copy lives in
// a per-thread buffer until the next call on this thread.
const float* EffectiveGamma(const GptConfig& config, const float* w, int64_t h) {
  if (!config.apply_layernorm_1p) return w;
  thread_local std::vector<float> buffer;
  buffer.resize(static_cast<size_t>(h));
  for (int64_t i = 0; i < h; ++i) buffer[i] = 1.0f + w[i];
  return buffer.data();
}

}  // namespace

void NormForward(const GptConfig& config, const ExecContext& ctx, const float* x,
                 const float* weight, const float* beta, int64_t n, int64_t h, float* y,
                 float* mean, float* rstd) {
  const float* gamma = EffectiveGamma(config, weight, h);
  if (config.normalization == Normalization::kLayerNorm) {
    cpu::LayerNormForward(ctx, x, gamma, beta, config.norm_epsilon, n, h, y, mean, rstd);
  } else {
    cpu::RmsNormForward(ctx, x, gamma, config.norm_epsilon, n, h, y, rstd);
  }
}

void NormBackwardInput(const GptConfig& config, const ExecContext& ctx, const float* dy,
                       const float* x, const float* weight, const float* mean, const float* rstd,
                       int64_t n, int64_t h, float* dx) {
  const float* gamma = EffectiveGamma(config, weight, h);
  if (config.normalization == Normalization::kLayerNorm) {
    cpu::LayerNormBackwardInput(ctx, dy, x, gamma, mean, rstd, n, h, dx);
  } else {
    cpu::RmsNormBackwardInput(ctx, dy, x, gamma, rstd, n, h, dx);
  }
}

void NormBackwardWeight(const GptConfig& config, const ExecContext& ctx, const float* dy,
                        const float* x, const float* mean, const float* rstd, int64_t n, int64_t h,
                        float* dgamma, float* dbeta) {
  if (config.normalization == Normalization::kLayerNorm) {
    cpu::LayerNormBackwardWeight(ctx, dy, x, mean, rstd, n, h, dgamma, dbeta);
  } else {
    cpu::RmsNormBackwardWeight(ctx, dy, x, rstd, n, h, dgamma);
  }
}

namespace {

// Linear: y [T, out] = x [T, in] W^T (+ bias), W [out, in].
void LinearForward(const ExecContext& ctx, const float* x, const float* w, const float* bias,
                   int64_t t, int64_t in, int64_t out, float* y) {
  cpu::Gemm(ctx, false, true, t, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
  if (bias != nullptr) cpu::AddBias(ctx, y, bias, t, out);
}

// dx [T, in] = dy [T, out] W [out, in].
void LinearBackwardInput(const ExecContext& ctx, const float* dy, const float* w, int64_t t,
                         int64_t in, int64_t out, float* dx) {
  cpu::Gemm(ctx, false, false, t, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}

// dW [out, in] = dy^T x and dbias [out] = column sums of dy, into the sink.
void LinearBackwardWeight(const ExecContext& ctx, const float* dy, const float* x, int64_t t,
                          int64_t in, int64_t out, int w_id, int b_id, WeightGradSink* sink) {
  float* dw = sink->Begin(w_id);
  cpu::Gemm(ctx, true, false, out, in, t, 1.0f, dy, out, x, in, 0.0f, dw, in);
  sink->End(w_id);
  if (b_id >= 0) {
    float* db = sink->Begin(b_id);
    cpu::BiasGrad(ctx, dy, t, out, db);
    sink->End(b_id);
  }
}

bool IsLayerNorm(const GptConfig& c) { return c.normalization == Normalization::kLayerNorm; }

int TpSize(const LayerCall& call) { return call.tp != nullptr ? call.tp->size : 1; }
bool Sp(const LayerCall& call) { return call.tp != nullptr && call.tp->sp(); }
// LocalTokens: rows of the layer's input/output on this rank: b s, or b s/p with SP.
int64_t LocalTokens(const LayerCall& call) {
  return Sp(call) ? call.b * (call.s / call.tp->size) : call.b * call.s;
}

cpu::AttentionShape Shape(const LayerCall& call) {
  const GptConfig& c = *call.config;
  cpu::AttentionShape shape{call.b, call.s, c.num_attention_heads, c.query_groups(), c.head_dim()};
  if (TpSize(call) > 1) {
    // This rank's heads are [r np/p, (r+1) np/p) of np: dropout keyed by the global head.
    shape.dropout_head_offset = call.tp->rank * c.num_attention_heads;
    shape.dropout_heads = c.num_attention_heads * call.tp->size;
  }
  return shape;
}

float AttentionDropout(const LayerCall& call) {
  return call.training ? call.config->attention_dropout : 0.0f;
}
float HiddenDropout(const LayerCall& call) {
  return call.training ? call.config->hidden_dropout : 0.0f;
}

// CpHiddenDropout: with context parallelism, one call per run of local rows that hold
// consecutive original positions, keyed by the unsharded element index (cp_context.h).
void CpHiddenDropout(const LayerCall& call, bool forward, const float* x, float* y, int64_t h,
                     kernels::RngKey key) {
  const float p = HiddenDropout(call);
  const cp::ContextParallelAttention& a = *call.cp_attention;
  const bool sp = Sp(call);
  for (const cp::CpTokenRun& r :
       cp::CpLocalTokenRuns(a.config().layout, a.cp_rank(), call.b, sp ? call.tp->rank : 0,
                            sp ? call.tp->size : 1)) {
    const int64_t at = r.local_row * h, n = r.rows * h, offset = r.global_row * h;
    if (forward) {
      cpu::DropoutForward(call.ctx, x + at, y + at, n, p, key, offset);
    } else {
      cpu::DropoutBackward(call.ctx, x + at, y + at, n, p, key, offset);
    }
  }
}

// HiddenDropoutForward / Backward: dropout of a [rows, h] activation of the residual
// stream, masks keyed by the global element index of the [b, s, h] tensor (under SP the
// local rows are each sequence's positions [r s/p, ...): one offset per sequence;
// with CP one per run of consecutive original positions, CpHiddenDropout).
void HiddenDropoutForward(const LayerCall& call, const float* x, float* y, int64_t h,
                          kernels::RngKey key) {
  const float p = HiddenDropout(call);
  if (call.cp_attention != nullptr) {
    CpHiddenDropout(call, true, x, y, h, key);
    return;
  }
  if (!Sp(call)) {
    cpu::DropoutForward(call.ctx, x, y, call.b * call.s * h, p, key, 0);
    return;
  }
  const int64_t n = (call.s / call.tp->size) * h;
  for (int64_t bi = 0; bi < call.b; ++bi) {
    cpu::DropoutForward(call.ctx, x + bi * n, y + bi * n, n, p, key,
                        SequenceShardIndexOffset(*call.tp, bi, call.s, h));
  }
}
void HiddenDropoutBackward(const LayerCall& call, const float* dy, float* dx, int64_t h,
                           kernels::RngKey key) {
  const float p = HiddenDropout(call);
  if (call.cp_attention != nullptr) {
    CpHiddenDropout(call, false, dy, dx, h, key);
    return;
  }
  if (!Sp(call)) {
    cpu::DropoutBackward(call.ctx, dy, dx, call.b * call.s * h, p, key, 0);
    return;
  }
  const int64_t n = (call.s / call.tp->size) * h;
  for (int64_t bi = 0; bi < call.b; ++bi) {
    cpu::DropoutBackward(call.ctx, dy + bi * n, dx + bi * n, n, p, key,
                         SequenceShardIndexOffset(*call.tp, bi, call.s, h));
  }
}

// RowParallelOutput: the partial product `partial` [T, h] of a row-parallel linear summed
// over the TP ranks: all-reduced in place (returns partial), or with SP reduce-scattered
// into `local` [T/p, h] (returns local). TP 1: partial unchanged.
absl::StatusOr<float*> RowParallelOutput(const LayerCall& call, float* partial, float* local,
                                         int64_t h) {
  if (TpSize(call) == 1) return partial;
  if (Sp(call)) {
    MXMACA_RETURN_IF_ERROR(
        ReduceScatterToSequenceParallelRegion(*call.tp, partial, call.b, call.s, h, local));
    return local;
  }
  MXMACA_RETURN_IF_ERROR(ReduceFromTensorParallelRegion(*call.tp, partial, call.b * call.s * h));
  return partial;
}

// NormGradsAllReduce: with SP the norm gradients of this micro-batch come from this
// rank's rows only: sum them over TP so every rank holds the full (identical) gradient.
absl::Status NormGradsAllReduce(const LayerCall& call, float* dgamma, float* dbeta, int64_t h) {
  if (!Sp(call)) return absl::OkStatus();
  MXMACA_RETURN_IF_ERROR(AllReduceSum(*call.tp, dgamma, h));
  if (dbeta != nullptr) MXMACA_RETURN_IF_ERROR(AllReduceSum(*call.tp, dbeta, h));
  return absl::OkStatus();
}

// ApplyForwardKeep: frees what F does not keep (ForwardKeep).
void ApplyForwardKeep(ForwardKeep keep, LayerStash* st) {
  switch (keep) {
    case ForwardKeep::kAll:
      break;
    case ForwardKeep::kNoProbs:
      st->probs.Free();
      break;
    case ForwardKeep::kInputOnly:
      st->FreeAllButInput();
      break;
  }
}

// MlpOutputToResidual: the end of F's MLP block (dense or MoE): hidden dropout on this
// rank's MLP output y [tl, h] (in place), out = residual2 + y, then what F does not keep.
void MlpOutputToResidual(const LayerCall& call, LayerStash* st, float* y, float* out,
                         ForwardKeep keep) {
  const GptConfig& c = *call.config;
  const int64_t h = c.hidden_size;
  if (HiddenDropout(call) > 0.0f) {
    HiddenDropoutForward(call, y, y, h,
                         DropoutKey(c.seed, call.global_layer, DropoutSite::kMlpOutput,
                                    call.iteration, call.micro_batch_id));
  }
  cpu::Add(call.ctx, st->residual2.data(), y, out, LocalTokens(call) * h);
  ApplyForwardKeep(keep, st);
}

}  // namespace

absl::Status TransformerLayer::Forward(const LayerCall& call, LayerStash* st, float* out,
                                       ForwardKeep keep, LayerScratch* scratch) const {
  const GptConfig& c = *call.config;
  const ExecContext& ctx = call.ctx;
  MemoryTracker* tr = call.tracker;
  const int64_t t = call.b * call.s, tl = LocalTokens(call), h = c.hidden_size,
                np = c.num_attention_heads, ng = c.query_groups(), hn = c.head_dim(),
                qkv_n = c.qkv_size(), pj = c.attention_projection_size(), f = c.ffn_hidden_size,
                f1 = c.fc1_size();
  const bool ln = IsLayerNorm(c), sp = Sp(call);
  const float* x = st->input.data();

  // Attention block. With SP the norm runs on the local rows and its output is gathered
  // (the column-parallel input); ln1_out keeps the full [T, h] for W.
  st->ln1_out.Allocate(tr, t * h);
  if (ln) st->ln1_mean.Allocate(tr, tl);
  st->ln1_rstd.Allocate(tr, tl);
  float* ln1_local = sp ? LayerScratch::Get(scratch->c, tl * h) : st->ln1_out.data();
  NormForward(c, ctx, x, P(ids_.input_norm_weight), P(ids_.input_norm_bias), tl, h, ln1_local,
              ln ? st->ln1_mean.data() : nullptr, st->ln1_rstd.data());
  if (sp) {
    MXMACA_RETURN_IF_ERROR(GatherFromSequenceParallelRegion(*call.tp, ln1_local, call.b, call.s, h,
                                                            st->ln1_out.data()));
  }
  float* qkv = LayerScratch::Get(scratch->a, t * qkv_n);
  LinearForward(ctx, st->ln1_out.data(), P(ids_.qkv_weight), P(ids_.qkv_bias), t, h, qkv_n, qkv);
  const cpu::AttentionShape shape = Shape(call);
  st->q.Allocate(tr, call.b * np * call.s * hn);
  st->k.Allocate(tr, call.b * ng * call.s * hn);
  st->v.Allocate(tr, call.b * ng * call.s * hn);
  cpu::SplitQkv(ctx, shape, qkv, st->q.data(), st->k.data(), st->v.data());
  if (c.qk_layernorm) {
    // Per-head norms of q and k (rows of hn), before RoPE; the inputs are kept for B/W.
    const int64_t nq = call.b * np * call.s, nk = call.b * ng * call.s;
    st->q_pre.Allocate(tr, nq * hn);
    st->k_pre.Allocate(tr, nk * hn);
    std::memcpy(st->q_pre.data(), st->q.data(), sizeof(float) * nq * hn);
    std::memcpy(st->k_pre.data(), st->k.data(), sizeof(float) * nk * hn);
    if (ln) st->q_mean.Allocate(tr, nq);
    if (ln) st->k_mean.Allocate(tr, nk);
    st->q_rstd.Allocate(tr, nq);
    st->k_rstd.Allocate(tr, nk);
    NormForward(c, ctx, st->q_pre.data(), P(ids_.q_norm_weight), P(ids_.q_norm_bias), nq, hn,
                st->q.data(), ln ? st->q_mean.data() : nullptr, st->q_rstd.data());
    NormForward(c, ctx, st->k_pre.data(), P(ids_.k_norm_weight), P(ids_.k_norm_bias), nk, hn,
                st->k.data(), ln ? st->k_mean.data() : nullptr, st->k_rstd.data());
  }
  if (c.position_embedding_type == PositionEmbeddingType::kRope) {
    cpu::RopeForward(ctx, st->q.data(), call.rope_positions, call.b, call.s, np, hn, c.rotary_dim(),
                     c.rope_frequencies());
    cpu::RopeForward(ctx, st->k.data(), call.rope_positions, call.b, call.s, ng, hn, c.rotary_dim(),
                     c.rope_frequencies());
  }
  float* o = LayerScratch::Get(scratch->b, call.b * np * call.s * hn);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hn)));
  if (call.cp_attention != nullptr) {
    // Context parallelism: ring attention; `probs` keeps the lse [b, np, s_local].
    st->probs.Allocate(tr, call.b * np * call.s);
    MXMACA_RETURN_IF_ERROR(call.cp_attention->Forward(ctx, st->q.data(), st->k.data(),
                                                      st->v.data(), call.doc_start, o,
                                                      st->probs.data()));
  } else {
    st->probs.Allocate(tr, call.b * np * call.s * call.s);
    cpu::AttentionForward(ctx, shape, st->q.data(), st->k.data(), st->v.data(), call.doc_start,
                          scale, AttentionDropout(call),
                          DropoutKey(c.seed, call.global_layer, DropoutSite::kAttentionProbs,
                                     call.iteration, call.micro_batch_id),
                          st->probs.data(), o);
  }
  st->context.Allocate(tr, t * pj);
  cpu::HeadsToTokens(ctx, shape, o, st->context.data());
  // linear_proj (row-parallel): partial product, sum over TP, then the bias once.
  float* proj_partial = LayerScratch::Get(scratch->a, t * h);
  cpu::Gemm(ctx, false, true, t, h, pj, 1.0f, st->context.data(), pj, P(ids_.proj_weight), pj, 0.0f,
            proj_partial, h);
  MXMACA_ASSIGN_OR_RETURN(
      float* proj, RowParallelOutput(call, proj_partial,
                                     sp ? LayerScratch::Get(scratch->c, tl * h) : nullptr, h));
  if (ids_.proj_bias >= 0) cpu::AddBias(ctx, proj, P(ids_.proj_bias), tl, h);
  if (HiddenDropout(call) > 0.0f) {
    HiddenDropoutForward(call, proj, proj, h,
                         DropoutKey(c.seed, call.global_layer, DropoutSite::kAttentionOutput,
                                    call.iteration, call.micro_batch_id));
  }
  st->residual2.Allocate(tr, tl * h);
  cpu::Add(ctx, x, proj, st->residual2.data(), tl * h);

  // MLP block.
  st->ln2_out.Allocate(tr, t * h);
  if (ln) st->ln2_mean.Allocate(tr, tl);
  st->ln2_rstd.Allocate(tr, tl);
  float* ln2_local = sp ? LayerScratch::Get(scratch->c, tl * h) : st->ln2_out.data();
  NormForward(c, ctx, st->residual2.data(), P(ids_.mlp_norm_weight), P(ids_.mlp_norm_bias), tl, h,
              ln2_local, ln ? st->ln2_mean.data() : nullptr, st->ln2_rstd.data());
  if (sp) {
    MXMACA_RETURN_IF_ERROR(GatherFromSequenceParallelRegion(*call.tp, ln2_local, call.b, call.s, h,
                                                            st->ln2_out.data()));
  }
  if (moe_ != nullptr) return MoEForward(call, st, out, keep, scratch);
  st->fc1_out.Allocate(tr, t * f1);
  LinearForward(ctx, st->ln2_out.data(), P(ids_.fc1_weight), P(ids_.fc1_bias), t, h, f1,
                st->fc1_out.data());
  st->act_out.Allocate(tr, t * f);
  if (c.swiglu) {
    cpu::SwigluForward(ctx, st->fc1_out.data(), st->act_out.data(), t, f);
  } else if (c.gelu_tanh_approximation) {
    kernels::cpu::GeluTanhForward(ctx, st->fc1_out.data(), st->act_out.data(), t * f);
  } else {
    cpu::GeluForward(ctx, st->fc1_out.data(), st->act_out.data(), t * f);
  }
  // linear_fc2 (row-parallel).
  float* fc2_partial = LayerScratch::Get(scratch->a, t * h);
  cpu::Gemm(ctx, false, true, t, h, f, 1.0f, st->act_out.data(), f, P(ids_.fc2_weight), f, 0.0f,
            fc2_partial, h);
  MXMACA_ASSIGN_OR_RETURN(
      float* fc2, RowParallelOutput(call, fc2_partial,
                                    sp ? LayerScratch::Get(scratch->c, tl * h) : nullptr, h));
  if (ids_.fc2_bias >= 0) cpu::AddBias(ctx, fc2, P(ids_.fc2_bias), tl, h);
  MlpOutputToResidual(call, st, fc2, out, keep);
  return absl::OkStatus();
}

absl::Status TransformerLayer::BackwardInput(const LayerCall& call, LayerStash* st, const float* dy,
                                             float* dx, LayerScratch* scratch) const {
  const GptConfig& c = *call.config;
  const ExecContext& ctx = call.ctx;
  MemoryTracker* tr = call.tracker;
  const int64_t t = call.b * call.s, tl = LocalTokens(call), h = c.hidden_size,
                np = c.num_attention_heads, ng = c.query_groups(), hn = c.head_dim(),
                qkv_n = c.qkv_size(), pj = c.attention_projection_size(), f = c.ffn_hidden_size,
                f1 = c.fc1_size();
  const bool ln = IsLayerNorm(c), sp = Sp(call);

  // MLP block. d_fc2 is the gradient of fc2's (summed) output, kept in full [T, h] for W
  // (with SP gathered from the local rows: the conjugate of the forward reduce-scatter).
  st->d_fc2.Allocate(tr, t * h);
  float* d_fc2_local = sp ? LayerScratch::Get(scratch->c, tl * h) : st->d_fc2.data();
  // The dropout backward copies when the probability is 0.
  HiddenDropoutBackward(call, dy, d_fc2_local, h,
                        DropoutKey(c.seed, call.global_layer, DropoutSite::kMlpOutput,
                                   call.iteration, call.micro_batch_id));
  if (sp) {
    MXMACA_RETURN_IF_ERROR(GatherFromSequenceParallelRegion(*call.tp, d_fc2_local, call.b, call.s,
                                                            h, st->d_fc2.data()));
  }
  if (moe_ != nullptr) {
    MXMACA_RETURN_IF_ERROR(MoEBackwardInput(call, st, scratch));
  } else {
    float* d_act = LayerScratch::Get(scratch->a, t * f);
    LinearBackwardInput(ctx, st->d_fc2.data(), P(ids_.fc2_weight), t, f, h, d_act);
    st->d_fc1.Allocate(tr, t * f1);
    if (c.swiglu) {
      cpu::SwigluBackward(ctx, st->fc1_out.data(), d_act, st->d_fc1.data(), t, f);
    } else if (c.gelu_tanh_approximation) {
      kernels::cpu::GeluTanhBackward(ctx, st->fc1_out.data(), d_act, st->d_fc1.data(), t * f);
    } else {
      cpu::GeluBackward(ctx, st->fc1_out.data(), d_act, st->d_fc1.data(), t * f);
    }
    st->fc1_out.Free();
    // linear_fc1 (column-parallel): input gradient summed over TP (or reduce-scattered).
    st->d_ln2_out.Allocate(tr, tl * h);
    {
      float* partial = sp ? LayerScratch::Get(scratch->a, t * h) : st->d_ln2_out.data();
      LinearBackwardInput(ctx, st->d_fc1.data(), P(ids_.fc1_weight), t, h, f1, partial);
      MXMACA_ASSIGN_OR_RETURN(float* summed,
                              RowParallelOutput(call, partial, st->d_ln2_out.data(), h));
      (void)summed;  // == st->d_ln2_out.data() in every case
    }
  }
  float* dx2 = LayerScratch::Get(scratch->c, tl * h);
  NormBackwardInput(c, ctx, st->d_ln2_out.data(), st->residual2.data(), P(ids_.mlp_norm_weight),
                    ln ? st->ln2_mean.data() : nullptr, st->ln2_rstd.data(), tl, h, dx2);
  cpu::Add(ctx, dy, dx2, dx2, tl * h);

  // Attention block.
  st->d_proj.Allocate(tr, t * h);
  float* d_proj_local = sp ? LayerScratch::Get(scratch->d, tl * h) : st->d_proj.data();
  HiddenDropoutBackward(call, dx2, d_proj_local, h,
                        DropoutKey(c.seed, call.global_layer, DropoutSite::kAttentionOutput,
                                   call.iteration, call.micro_batch_id));
  if (sp) {
    MXMACA_RETURN_IF_ERROR(GatherFromSequenceParallelRegion(*call.tp, d_proj_local, call.b, call.s,
                                                            h, st->d_proj.data()));
  }
  float* d_context = LayerScratch::Get(scratch->a, t * pj);
  LinearBackwardInput(ctx, st->d_proj.data(), P(ids_.proj_weight), t, pj, h, d_context);
  const cpu::AttentionShape shape = Shape(call);
  float* d_o = LayerScratch::Get(scratch->b, call.b * np * call.s * hn);
  cpu::TokensToHeads(ctx, shape, d_context, d_o);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hn)));
  const kernels::RngKey attn_key = DropoutKey(
      c.seed, call.global_layer, DropoutSite::kAttentionProbs, call.iteration, call.micro_batch_id);
  float* dq = LayerScratch::Get(scratch->d, call.b * np * call.s * hn);
  float* dkv = LayerScratch::Get(scratch->e, 2 * call.b * ng * call.s * hn);
  float* dk = dkv;
  float* dv = dkv + call.b * ng * call.s * hn;
  if (call.cp_attention != nullptr) {
    // Context parallelism: the forward's output again (from `context`, or recomputed with
    // the lse under selective recompute), then the ring backward.
    float* o = LayerScratch::Get(scratch->a, call.b * np * call.s * hn);
    if (st->probs.empty()) {
      st->probs.Allocate(tr, call.b * np * call.s);
      MXMACA_RETURN_IF_ERROR(call.cp_attention->Forward(ctx, st->q.data(), st->k.data(),
                                                        st->v.data(), call.doc_start, o,
                                                        st->probs.data()));
    } else {
      cpu::TokensToHeads(ctx, shape, st->context.data(), o);
    }
    MXMACA_RETURN_IF_ERROR(call.cp_attention->Backward(ctx, st->q.data(), st->k.data(),
                                                       st->v.data(), call.doc_start, o,
                                                       st->probs.data(), d_o, dq, dk, dv));
  } else {
    if (st->probs.empty()) {
      // Selective recompute: the probabilities again, from the stashed q, k, v.
      st->probs.Allocate(tr, call.b * np * call.s * call.s);
      float* o = LayerScratch::Get(scratch->a, call.b * np * call.s * hn);
      cpu::AttentionForward(ctx, shape, st->q.data(), st->k.data(), st->v.data(), call.doc_start,
                            scale, AttentionDropout(call), attn_key, st->probs.data(), o);
    }
    cpu::AttentionBackward(ctx, shape, st->q.data(), st->k.data(), st->v.data(), st->probs.data(),
                           call.doc_start, scale, AttentionDropout(call), attn_key, d_o, dq, dk,
                           dv);
  }
  st->probs.Free();
  st->q.Free();
  st->k.Free();
  st->v.Free();
  if (c.position_embedding_type == PositionEmbeddingType::kRope) {
    cpu::RopeBackward(ctx, dq, call.rope_positions, call.b, call.s, np, hn, c.rotary_dim(),
                      c.rope_frequencies());
    cpu::RopeBackward(ctx, dk, call.rope_positions, call.b, call.s, ng, hn, c.rotary_dim(),
                      c.rope_frequencies());
  }
  if (c.qk_layernorm) {
    // Through the per-head norms; their output gradients are kept for W.
    const int64_t nq = call.b * np * call.s, nk = call.b * ng * call.s;
    st->d_q_norm.Allocate(tr, nq * hn);
    st->d_k_norm.Allocate(tr, nk * hn);
    std::memcpy(st->d_q_norm.data(), dq, sizeof(float) * nq * hn);
    std::memcpy(st->d_k_norm.data(), dk, sizeof(float) * nk * hn);
    NormBackwardInput(c, ctx, st->d_q_norm.data(), st->q_pre.data(), P(ids_.q_norm_weight),
                      ln ? st->q_mean.data() : nullptr, st->q_rstd.data(), nq, hn, dq);
    NormBackwardInput(c, ctx, st->d_k_norm.data(), st->k_pre.data(), P(ids_.k_norm_weight),
                      ln ? st->k_mean.data() : nullptr, st->k_rstd.data(), nk, hn, dk);
  }
  st->d_qkv.Allocate(tr, t * qkv_n);
  cpu::MergeQkvGrad(ctx, shape, dq, dk, dv, st->d_qkv.data());
  // linear_qkv (column-parallel): input gradient summed over TP (or reduce-scattered).
  st->d_ln1_out.Allocate(tr, tl * h);
  {
    float* partial = sp ? LayerScratch::Get(scratch->a, t * h) : st->d_ln1_out.data();
    LinearBackwardInput(ctx, st->d_qkv.data(), P(ids_.qkv_weight), t, h, qkv_n, partial);
    MXMACA_ASSIGN_OR_RETURN(float* summed,
                            RowParallelOutput(call, partial, st->d_ln1_out.data(), h));
    (void)summed;
  }
  NormBackwardInput(c, ctx, st->d_ln1_out.data(), st->input.data(), P(ids_.input_norm_weight),
                    ln ? st->ln1_mean.data() : nullptr, st->ln1_rstd.data(), tl, h, dx);
  cpu::Add(ctx, dx2, dx, dx, tl * h);
  return absl::OkStatus();
}

absl::Status TransformerLayer::BackwardWeight(const LayerCall& call, LayerStash* st,
                                              WeightGradSink* sink) const {
  const GptConfig& c = *call.config;
  const ExecContext& ctx = call.ctx;
  const int64_t t = call.b * call.s, tl = LocalTokens(call), h = c.hidden_size,
                qkv_n = c.qkv_size(), pj = c.attention_projection_size(), f = c.ffn_hidden_size,
                f1 = c.fc1_size();
  const bool ln = IsLayerNorm(c);

  if (moe_ != nullptr) {
    // Through the sink: each micro-batch's MoE gradients are folded in micro-batch order,
    // as every other tensor's.
    if (!st->moe) return absl::FailedPreconditionError("MoE layer: W without the stash of B");
    const float* x = st->ln2_out.data();
    const float* dy = st->d_fc2.data();
    std::vector<float> x_local, dy_local;
    if (MoEOnLocalTokens(call)) {  // the router and shared expert saw this rank's rows
      x_local.resize(static_cast<size_t>(tl * h));
      dy_local.resize(static_cast<size_t>(tl * h));
      ScatterToSequenceParallelRegion(*call.tp, x, call.b, call.s, h, x_local.data());
      ScatterToSequenceParallelRegion(*call.tp, dy, call.b, call.s, h, dy_local.data());
      x = x_local.data();
      dy = dy_local.data();
    }
    MXMACA_RETURN_IF_ERROR(moe_->BackwardWeight(ctx, x, dy, *st->moe,
                                                [sink](int id) { return sink->Begin(id); }));
    for (int id : moe_->parameter_ids()) sink->End(id);
  } else {
    LinearBackwardWeight(ctx, st->d_fc2.data(), st->act_out.data(), t, f, h, ids_.fc2_weight,
                         ids_.fc2_bias, sink);
    LinearBackwardWeight(ctx, st->d_fc1.data(), st->ln2_out.data(), t, h, f1, ids_.fc1_weight,
                         ids_.fc1_bias, sink);
  }
  {
    float* dg = sink->Begin(ids_.mlp_norm_weight);
    float* db = ln ? sink->Begin(ids_.mlp_norm_bias) : nullptr;
    NormBackwardWeight(c, ctx, st->d_ln2_out.data(), st->residual2.data(),
                       ln ? st->ln2_mean.data() : nullptr, st->ln2_rstd.data(), tl, h, dg, db);
    MXMACA_RETURN_IF_ERROR(NormGradsAllReduce(call, dg, db, h));
    sink->End(ids_.mlp_norm_weight);
    if (ln) sink->End(ids_.mlp_norm_bias);
  }
  LinearBackwardWeight(ctx, st->d_proj.data(), st->context.data(), t, pj, h, ids_.proj_weight,
                       ids_.proj_bias, sink);
  LinearBackwardWeight(ctx, st->d_qkv.data(), st->ln1_out.data(), t, h, qkv_n, ids_.qkv_weight,
                       ids_.qkv_bias, sink);
  if (c.qk_layernorm) {
    // Each TP rank saw its own heads: the gradients are summed over TP (Megatron's
    // finalize_model_grads sums q_layernorm / k_layernorm grads over the TP group).
    const int64_t hn = c.head_dim();
    const int64_t nq = call.b * c.num_attention_heads * call.s, nk = call.b * c.query_groups() * call.s;
    for (const auto& [d, x, mean, rstd, w_id, b_id, n] :
         {std::tuple{&st->d_q_norm, &st->q_pre, &st->q_mean, &st->q_rstd, ids_.q_norm_weight,
                     ids_.q_norm_bias, nq},
          std::tuple{&st->d_k_norm, &st->k_pre, &st->k_mean, &st->k_rstd, ids_.k_norm_weight,
                     ids_.k_norm_bias, nk}}) {
      float* dg = sink->Begin(w_id);
      float* db = ln ? sink->Begin(b_id) : nullptr;
      NormBackwardWeight(c, ctx, d->data(), x->data(), ln ? mean->data() : nullptr, rstd->data(),
                         n, hn, dg, db);
      if (call.tp != nullptr && call.tp->size > 1) {
        MXMACA_RETURN_IF_ERROR(AllReduceSum(*call.tp, dg, hn));
        if (db != nullptr) MXMACA_RETURN_IF_ERROR(AllReduceSum(*call.tp, db, hn));
      }
      sink->End(w_id);
      if (ln) sink->End(b_id);
    }
  }
  {
    float* dg = sink->Begin(ids_.input_norm_weight);
    float* db = ln ? sink->Begin(ids_.input_norm_bias) : nullptr;
    NormBackwardWeight(c, ctx, st->d_ln1_out.data(), st->input.data(),
                       ln ? st->ln1_mean.data() : nullptr, st->ln1_rstd.data(), tl, h, dg, db);
    MXMACA_RETURN_IF_ERROR(NormGradsAllReduce(call, dg, db, h));
    sink->End(ids_.input_norm_weight);
    if (ln) sink->End(ids_.input_norm_bias);
  }
  st->FreeAll();
  return absl::OkStatus();
}

// MoEOnLocalTokens: expert parallelism with sequence parallelism: the MoE block routes
// this rank's own rows (the SP part of ln2_out), the TP group being the token group
// (layers/moe/moe_layer.h). Otherwise every TP rank routes all T tokens.
bool TransformerLayer::MoEOnLocalTokens(const LayerCall& call) const {
  return moe_ != nullptr && moe_->config().expert_model_parallel_size > 1 && Sp(call);
}

// MoE MLP block of Forward: ln2_out [T, h] (whole on every TP rank) -> MoELayer -> this
// rank's rows -> hidden dropout -> residual add. With MoEOnLocalTokens the MoELayer gets
// this rank's rows [b s/p, h] and returns them.
absl::Status TransformerLayer::MoEForward(const LayerCall& call, LayerStash* st, float* out,
                                          ForwardKeep keep, LayerScratch* scratch) const {
  const GptConfig& c = *call.config;
  const int64_t t = call.b * call.s, tl = LocalTokens(call), h = c.hidden_size;
  if (!st->moe) st->moe = std::make_shared<moe::MoEStash>();
  if (moe_->config().expert_model_parallel_size > 1 && call.tp != nullptr && call.tp->size > 1 &&
      !Sp(call)) {
    return absl::InvalidArgumentError(
        "MoE layer: expert parallelism with tensor parallelism needs --sequence-parallel");
  }
  const bool local = MoEOnLocalTokens(call);
  moe::MoECall mc;
  mc.num_tokens = local ? tl : t;
  mc.seq_length = local ? call.s / call.tp->size : call.s;
  mc.training = call.training;
  mc.count_for_expert_bias = call.moe_metrics != nullptr;  // not in a recomputation
  const float* x = st->ln2_out.data();
  if (local) {
    float* x_local = LayerScratch::Get(scratch->b, tl * h);
    ScatterToSequenceParallelRegion(*call.tp, x, call.b, call.s, h, x_local);
    x = x_local;
  }
  float* y_full = LayerScratch::Get(scratch->a, mc.num_tokens * h);
  MXMACA_RETURN_IF_ERROR(moe_->Forward(call.ctx, mc, x, y_full, st->moe.get(), call.moe_metrics));
  st->moe_bytes.Set(call.tracker, moe::MoEStashBytes(*st->moe));
  float* y = y_full;
  if (Sp(call) && !local) {
    y = LayerScratch::Get(scratch->c, tl * h);
    ScatterToSequenceParallelRegion(*call.tp, y_full, call.b, call.s, h, y);
  }
  MlpOutputToResidual(call, st, y, out, keep);
  return absl::OkStatus();
}

// MoE MLP block of BackwardInput: d_fc2 (dL/d(MoE output), whole [T, h]) -> MoELayer B ->
// d_ln2_out (this rank's rows).
absl::Status TransformerLayer::MoEBackwardInput(const LayerCall& call, LayerStash* st,
                                                LayerScratch* scratch) const {
  const GptConfig& c = *call.config;
  const int64_t t = call.b * call.s, tl = LocalTokens(call), h = c.hidden_size;
  if (!st->moe) return absl::FailedPreconditionError("MoE layer: B without the stash of F");
  st->d_ln2_out.Allocate(call.tracker, tl * h);
  if (MoEOnLocalTokens(call)) {
    float* x_local = LayerScratch::Get(scratch->b, tl * h);
    float* dy_local = LayerScratch::Get(scratch->c, tl * h);
    ScatterToSequenceParallelRegion(*call.tp, st->ln2_out.data(), call.b, call.s, h, x_local);
    ScatterToSequenceParallelRegion(*call.tp, st->d_fc2.data(), call.b, call.s, h, dy_local);
    MXMACA_RETURN_IF_ERROR(moe_->BackwardInput(call.ctx, x_local, dy_local,
                                               call.moe_aux_loss_grad_scale, st->moe.get(),
                                               st->d_ln2_out.data()));
    st->moe_bytes.Set(call.tracker, moe::MoEStashBytes(*st->moe));
    return absl::OkStatus();
  }
  float* dx_full = LayerScratch::Get(scratch->a, t * h);
  MXMACA_RETURN_IF_ERROR(moe_->BackwardInput(call.ctx, st->ln2_out.data(), st->d_fc2.data(),
                                             call.moe_aux_loss_grad_scale, st->moe.get(),
                                             dx_full));
  st->moe_bytes.Set(call.tracker, moe::MoEStashBytes(*st->moe));
  if (Sp(call)) {
    ScatterToSequenceParallelRegion(*call.tp, dx_full, call.b, call.s, h, st->d_ln2_out.data());
  } else {
    std::memcpy(st->d_ln2_out.data(), dx_full, sizeof(float) * static_cast<size_t>(t * h));
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::layers
