// layers/transformer_layer.cc
#include "layers/transformer_layer.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

#include "base/status_macros.h"
#include "kernels/philox.h"
#include "layers/context_parallel/cp_context.h"
#include "layers/modules/linear.h"
#include "layers/modules/norm.h"

namespace mxmaca::layers {

kernels::RngKey DropoutKey(uint64_t seed, int64_t layer, DropoutSite site, int64_t iteration,
                           int64_t micro_batch_id) {
  return {seed, kernels::MakeRngStream(
                    static_cast<uint64_t>(layer + 1), static_cast<uint64_t>(site),
                    static_cast<uint64_t>(iteration), static_cast<uint64_t>(micro_batch_id))};
}

namespace {

using modules::LinearBackwardInput;
using modules::LinearForward;
using modules::LinearProduct;

// LinearBackwardWeight: dW [out, in] = dy^T x and dbias [out] = column sums of dy, into the
// sink's zeroed per-micro-batch buffers (dW added into the arena itself when the sink
// accumulates, WeightGradSink::accumulates).
absl::Status LinearBackwardWeight(device::DeviceKernels& k, const float* dy, const float* x,
                                  int64_t t, int64_t in, int64_t out, int w_id, int b_id,
                                  WeightGradSink* sink) {
  // One tensor open at a time (the sink's buffers are pooled: a second open buffer would
  // take another pooled block of a different size).
  float* dw = sink->Begin(w_id);
  MXMACA_RETURN_IF_ERROR(
      modules::LinearBackwardWeight(k, dy, x, t, in, out, dw, nullptr, sink->accumulates(w_id)));
  sink->End(w_id);
  if (b_id >= 0) {
    float* db = sink->Begin(b_id);
    MXMACA_RETURN_IF_ERROR(modules::LinearBiasGrad(k, dy, t, out, db));
    sink->End(b_id);
  }
  return absl::OkStatus();
}

bool IsLayerNorm(const GptConfig& c) { return c.normalization == Normalization::kLayerNorm; }

int TpSize(const LayerCall& call) { return call.tp != nullptr ? call.tp->size : 1; }
bool Sp(const LayerCall& call) { return call.tp != nullptr && call.tp->sp(); }
// LocalTokens: rows of the layer's input/output on this rank: b s, or b s/p with SP.
int64_t LocalTokens(const LayerCall& call) {
  return Sp(call) ? call.b * (call.s / call.tp->size) : call.b * call.s;
}

device::AttentionDims Shape(const LayerCall& call) {
  const GptConfig& c = *call.config;
  device::AttentionDims shape{call.b, call.s, c.num_attention_heads, c.query_groups(),
                              c.head_dim()};
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

// KeyOf: the dropout key of `site` where the kernels read it: LayerCall::dropout_keys,
// or `host` (filled here) when the call has none.
const kernels::RngKey* KeyOf(const LayerCall& call, DropoutSite site, kernels::RngKey* host) {
  if (call.dropout_keys != nullptr) {
    return call.dropout_keys + LayerDropoutKeyIndex(site);
  }
  *host =
      DropoutKey(call.config->seed, call.global_layer, site, call.iteration, call.micro_batch_id);
  return host;
}

// CpHiddenDropout: with context parallelism, one call per run of local rows that hold
// consecutive original positions, keyed by the unsharded element index (cp_context.h).
absl::Status CpHiddenDropout(const LayerCall& call, bool forward, const float* x, float* y,
                             int64_t h, const kernels::RngKey* key) {
  const float p = HiddenDropout(call);
  const cp::ContextParallelAttention& a = *call.cp_attention;
  const bool sp = Sp(call);
  for (const cp::CpTokenRun& r :
       cp::CpLocalTokenRuns(a.config().layout, a.cp_rank(), call.b, sp ? call.tp->rank : 0,
                            sp ? call.tp->size : 1)) {
    const int64_t at = r.local_row * h, n = r.rows * h, offset = r.global_row * h;
    if (forward) {
      MXMACA_RETURN_IF_ERROR(call.kernels->DropoutForward(x + at, y + at, n, p, key, offset));
    } else {
      MXMACA_RETURN_IF_ERROR(call.kernels->DropoutBackward(x + at, y + at, n, p, key, offset));
    }
  }
  return absl::OkStatus();
}

// HiddenDropoutForward / Backward: dropout of a [rows, h] activation of the residual
// stream, masks keyed by the global element index of the [b, s, h] tensor (under SP the
// local rows are each sequence's positions [r s/p, ...): one offset per sequence;
// with CP one per run of consecutive original positions, CpHiddenDropout).
absl::Status HiddenDropoutForward(const LayerCall& call, const float* x, float* y, int64_t h,
                                  DropoutSite site) {
  const float p = HiddenDropout(call);
  kernels::RngKey host_key;
  const kernels::RngKey* key = KeyOf(call, site, &host_key);
  device::DeviceKernels& k = *call.kernels;
  if (call.cp_attention != nullptr) return CpHiddenDropout(call, true, x, y, h, key);
  if (!Sp(call)) return k.DropoutForward(x, y, call.b * call.s * h, p, key, 0);
  const int64_t n = (call.s / call.tp->size) * h;
  for (int64_t bi = 0; bi < call.b; ++bi) {
    MXMACA_RETURN_IF_ERROR(k.DropoutForward(x + bi * n, y + bi * n, n, p, key,
                                            SequenceShardIndexOffset(*call.tp, bi, call.s, h)));
  }
  return absl::OkStatus();
}
absl::Status HiddenDropoutBackward(const LayerCall& call, const float* dy, float* dx, int64_t h,
                                   DropoutSite site) {
  const float p = HiddenDropout(call);
  kernels::RngKey host_key;
  const kernels::RngKey* key = KeyOf(call, site, &host_key);
  device::DeviceKernels& k = *call.kernels;
  if (call.cp_attention != nullptr) return CpHiddenDropout(call, false, dy, dx, h, key);
  if (!Sp(call)) return k.DropoutBackward(dy, dx, call.b * call.s * h, p, key, 0);
  const int64_t n = (call.s / call.tp->size) * h;
  for (int64_t bi = 0; bi < call.b; ++bi) {
    MXMACA_RETURN_IF_ERROR(k.DropoutBackward(dy + bi * n, dx + bi * n, n, p, key,
                                             SequenceShardIndexOffset(*call.tp, bi, call.s, h)));
  }
  return absl::OkStatus();
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
absl::Status MlpOutputToResidual(const LayerCall& call, LayerStash* st, float* y, float* out,
                                 ForwardKeep keep) {
  const int64_t h = call.config->hidden_size;
  if (HiddenDropout(call) > 0.0f) {
    MXMACA_RETURN_IF_ERROR(HiddenDropoutForward(call, y, y, h, DropoutSite::kMlpOutput));
  }
  MXMACA_RETURN_IF_ERROR(call.kernels->Add(st->residual2.data(), y, out, LocalTokens(call) * h));
  ApplyForwardKeep(keep, st);
  return absl::OkStatus();
}

}  // namespace

absl::Status TransformerLayer::Forward(const LayerCall& call, LayerStash* st, float* out,
                                       ForwardKeep keep, LayerScratch* scratch) const {
  const GptConfig& c = *call.config;
  device::DeviceKernels& k = *call.kernels;
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
  MXMACA_RETURN_IF_ERROR(
      modules::Norm(c).Forward(k, x, P(call, ids_.input_norm_weight), P(call, ids_.input_norm_bias),
                               tl, h, ln1_local, ln ? st->ln1_mean.data() : nullptr,
                               st->ln1_rstd.data(), LayerScratch::Get(scratch->gamma, h)));
  if (sp) {
    MXMACA_RETURN_IF_ERROR(GatherFromSequenceParallelRegion(*call.tp, ln1_local, call.b, call.s, h,
                                                            st->ln1_out.data()));
  }
  float* qkv = LayerScratch::Get(scratch->a, t * qkv_n);
  MXMACA_RETURN_IF_ERROR(LinearForward(k, st->ln1_out.data(), P(call, ids_.qkv_weight),
                                       P(call, ids_.qkv_bias), t, h, qkv_n, qkv));
  const device::AttentionDims shape = Shape(call);
  st->q.Allocate(tr, call.b * np * call.s * hn);
  st->k.Allocate(tr, call.b * ng * call.s * hn);
  st->v.Allocate(tr, call.b * ng * call.s * hn);
  MXMACA_RETURN_IF_ERROR(k.SplitQkv(shape, qkv, st->q.data(), st->k.data(), st->v.data()));
  if (c.qk_layernorm) {
    // Per-head norms of q and k (rows of hn), before RoPE; the inputs are kept for B/W.
    const int64_t nq = call.b * np * call.s, nk = call.b * ng * call.s;
    st->q_pre.Allocate(tr, nq * hn);
    st->k_pre.Allocate(tr, nk * hn);
    MXMACA_RETURN_IF_ERROR(
        k.CopyDeviceToDevice(st->q_pre.data(), st->q.data(), sizeof(float) * nq * hn));
    MXMACA_RETURN_IF_ERROR(
        k.CopyDeviceToDevice(st->k_pre.data(), st->k.data(), sizeof(float) * nk * hn));
    if (ln) st->q_mean.Allocate(tr, nq);
    if (ln) st->k_mean.Allocate(tr, nk);
    st->q_rstd.Allocate(tr, nq);
    st->k_rstd.Allocate(tr, nk);
    float* gamma = LayerScratch::Get(scratch->gamma, hn);
    MXMACA_RETURN_IF_ERROR(modules::Norm(c).Forward(
        k, st->q_pre.data(), P(call, ids_.q_norm_weight), P(call, ids_.q_norm_bias), nq, hn,
        st->q.data(), ln ? st->q_mean.data() : nullptr, st->q_rstd.data(), gamma));
    MXMACA_RETURN_IF_ERROR(modules::Norm(c).Forward(
        k, st->k_pre.data(), P(call, ids_.k_norm_weight), P(call, ids_.k_norm_bias), nk, hn,
        st->k.data(), ln ? st->k_mean.data() : nullptr, st->k_rstd.data(), gamma));
  }
  if (c.position_embedding_type == PositionEmbeddingType::kRope) {
    MXMACA_RETURN_IF_ERROR(k.RopeForward(st->q.data(), call.rope_positions, call.b, call.s, np, hn,
                                         c.rotary_dim(), c.rope_frequencies()));
    MXMACA_RETURN_IF_ERROR(k.RopeForward(st->k.data(), call.rope_positions, call.b, call.s, ng, hn,
                                         c.rotary_dim(), c.rope_frequencies()));
  }
  float* o = LayerScratch::Get(scratch->b, call.b * np * call.s * hn);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hn)));
  if (call.cp_attention != nullptr) {
    // Context parallelism: ring attention; `probs` keeps the lse [b, np, s_local].
    st->probs.Allocate(tr, call.b * np * call.s);
    MXMACA_RETURN_IF_ERROR(call.cp_attention->Forward(
        call.ctx, st->q.data(), st->k.data(), st->v.data(), call.doc_start, o, st->probs.data()));
  } else {
    kernels::RngKey host_key;
    const kernels::RngKey* key = KeyOf(call, DropoutSite::kAttentionProbs, &host_key);
    if (call.fused_attention) {
      // Fused attention: `probs` keeps the log-sum-exp [b, np, s].
      st->probs.Allocate(tr, call.b * np * call.s);
      MXMACA_RETURN_IF_ERROR(
          k.FusedAttentionForward(shape, st->q.data(), st->k.data(), st->v.data(), call.doc_start,
                                  scale, AttentionDropout(call), key, o, st->probs.data()));
    } else {
      st->probs.Allocate(tr, call.b * np * call.s * call.s);
      MXMACA_RETURN_IF_ERROR(k.AttentionForward(shape, st->q.data(), st->k.data(), st->v.data(),
                                                call.doc_start, scale, AttentionDropout(call), key,
                                                st->probs.data(), o));
    }
  }
  st->context.Allocate(tr, t * pj);
  MXMACA_RETURN_IF_ERROR(k.HeadsToTokens(shape, o, st->context.data()));
  // linear_proj (row-parallel): partial product, sum over TP, then the bias once.
  float* proj_partial = LayerScratch::Get(scratch->a, t * h);
  MXMACA_RETURN_IF_ERROR(
      LinearProduct(k, st->context.data(), P(call, ids_.proj_weight), t, pj, h, proj_partial));
  MXMACA_ASSIGN_OR_RETURN(
      float* proj, RowParallelOutput(call, proj_partial,
                                     sp ? LayerScratch::Get(scratch->c, tl * h) : nullptr, h));
  if (ids_.proj_bias >= 0) MXMACA_RETURN_IF_ERROR(k.AddBias(proj, P(call, ids_.proj_bias), tl, h));
  if (HiddenDropout(call) > 0.0f) {
    MXMACA_RETURN_IF_ERROR(
        HiddenDropoutForward(call, proj, proj, h, DropoutSite::kAttentionOutput));
  }
  st->residual2.Allocate(tr, tl * h);
  MXMACA_RETURN_IF_ERROR(k.Add(x, proj, st->residual2.data(), tl * h));

  // MLP block.
  st->ln2_out.Allocate(tr, t * h);
  if (ln) st->ln2_mean.Allocate(tr, tl);
  st->ln2_rstd.Allocate(tr, tl);
  float* ln2_local = sp ? LayerScratch::Get(scratch->c, tl * h) : st->ln2_out.data();
  MXMACA_RETURN_IF_ERROR(modules::Norm(c).Forward(
      k, st->residual2.data(), P(call, ids_.mlp_norm_weight), P(call, ids_.mlp_norm_bias), tl, h,
      ln2_local, ln ? st->ln2_mean.data() : nullptr, st->ln2_rstd.data(),
      LayerScratch::Get(scratch->gamma, h)));
  if (sp) {
    MXMACA_RETURN_IF_ERROR(GatherFromSequenceParallelRegion(*call.tp, ln2_local, call.b, call.s, h,
                                                            st->ln2_out.data()));
  }
  if (moe_ != nullptr) return MoEForward(call, st, out, keep, scratch);
  st->fc1_out.Allocate(tr, t * f1);
  MXMACA_RETURN_IF_ERROR(LinearForward(k, st->ln2_out.data(), P(call, ids_.fc1_weight),
                                       P(call, ids_.fc1_bias), t, h, f1, st->fc1_out.data()));
  st->act_out.Allocate(tr, t * f);
  if (c.swiglu) {
    MXMACA_RETURN_IF_ERROR(k.SwigluForward(st->fc1_out.data(), st->act_out.data(), t, f));
  } else if (c.gelu_tanh_approximation) {
    MXMACA_RETURN_IF_ERROR(k.GeluTanhForward(st->fc1_out.data(), st->act_out.data(), t * f));
  } else {
    MXMACA_RETURN_IF_ERROR(k.GeluForward(st->fc1_out.data(), st->act_out.data(), t * f));
  }
  // linear_fc2 (row-parallel).
  float* fc2_partial = LayerScratch::Get(scratch->a, t * h);
  MXMACA_RETURN_IF_ERROR(
      LinearProduct(k, st->act_out.data(), P(call, ids_.fc2_weight), t, f, h, fc2_partial));
  MXMACA_ASSIGN_OR_RETURN(
      float* fc2, RowParallelOutput(call, fc2_partial,
                                    sp ? LayerScratch::Get(scratch->c, tl * h) : nullptr, h));
  if (ids_.fc2_bias >= 0) MXMACA_RETURN_IF_ERROR(k.AddBias(fc2, P(call, ids_.fc2_bias), tl, h));
  return MlpOutputToResidual(call, st, fc2, out, keep);
}

absl::Status TransformerLayer::BackwardInput(const LayerCall& call, LayerStash* st, const float* dy,
                                             float* dx, LayerScratch* scratch) const {
  const GptConfig& c = *call.config;
  device::DeviceKernels& k = *call.kernels;
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
  MXMACA_RETURN_IF_ERROR(HiddenDropoutBackward(call, dy, d_fc2_local, h, DropoutSite::kMlpOutput));
  if (sp) {
    MXMACA_RETURN_IF_ERROR(GatherFromSequenceParallelRegion(*call.tp, d_fc2_local, call.b, call.s,
                                                            h, st->d_fc2.data()));
  }
  if (moe_ != nullptr) {
    MXMACA_RETURN_IF_ERROR(MoEBackwardInput(call, st, scratch));
  } else {
    float* d_act = LayerScratch::Get(scratch->a, t * f);
    MXMACA_RETURN_IF_ERROR(
        LinearBackwardInput(k, st->d_fc2.data(), P(call, ids_.fc2_weight), t, f, h, d_act));
    st->d_fc1.Allocate(tr, t * f1);
    if (c.swiglu) {
      MXMACA_RETURN_IF_ERROR(k.SwigluBackward(st->fc1_out.data(), d_act, st->d_fc1.data(), t, f));
    } else if (c.gelu_tanh_approximation) {
      MXMACA_RETURN_IF_ERROR(
          k.GeluTanhBackward(st->fc1_out.data(), d_act, st->d_fc1.data(), t * f));
    } else {
      MXMACA_RETURN_IF_ERROR(k.GeluBackward(st->fc1_out.data(), d_act, st->d_fc1.data(), t * f));
    }
    st->fc1_out.Free();
    // linear_fc1 (column-parallel): input gradient summed over TP (or reduce-scattered).
    st->d_ln2_out.Allocate(tr, tl * h);
    {
      float* partial = sp ? LayerScratch::Get(scratch->a, t * h) : st->d_ln2_out.data();
      MXMACA_RETURN_IF_ERROR(
          LinearBackwardInput(k, st->d_fc1.data(), P(call, ids_.fc1_weight), t, h, f1, partial));
      MXMACA_ASSIGN_OR_RETURN(float* summed,
                              RowParallelOutput(call, partial, st->d_ln2_out.data(), h));
      (void)summed;  // == st->d_ln2_out.data() in every case
    }
  }
  float* dx2 = LayerScratch::Get(scratch->c, tl * h);
  MXMACA_RETURN_IF_ERROR(modules::Norm(c).BackwardInput(
      k, st->d_ln2_out.data(), st->residual2.data(), P(call, ids_.mlp_norm_weight),
      ln ? st->ln2_mean.data() : nullptr, st->ln2_rstd.data(), tl, h, dx2,
      LayerScratch::Get(scratch->gamma, h)));
  MXMACA_RETURN_IF_ERROR(k.Add(dy, dx2, dx2, tl * h));

  // Attention block.
  st->d_proj.Allocate(tr, t * h);
  float* d_proj_local = sp ? LayerScratch::Get(scratch->d, tl * h) : st->d_proj.data();
  MXMACA_RETURN_IF_ERROR(
      HiddenDropoutBackward(call, dx2, d_proj_local, h, DropoutSite::kAttentionOutput));
  if (sp) {
    MXMACA_RETURN_IF_ERROR(GatherFromSequenceParallelRegion(*call.tp, d_proj_local, call.b, call.s,
                                                            h, st->d_proj.data()));
  }
  float* d_context = LayerScratch::Get(scratch->a, t * pj);
  MXMACA_RETURN_IF_ERROR(
      LinearBackwardInput(k, st->d_proj.data(), P(call, ids_.proj_weight), t, pj, h, d_context));
  const device::AttentionDims shape = Shape(call);
  float* d_o = LayerScratch::Get(scratch->b, call.b * np * call.s * hn);
  MXMACA_RETURN_IF_ERROR(k.TokensToHeads(shape, d_context, d_o));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hn)));
  kernels::RngKey host_key;
  const kernels::RngKey* attn_key = KeyOf(call, DropoutSite::kAttentionProbs, &host_key);
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
      MXMACA_RETURN_IF_ERROR(call.cp_attention->Forward(
          call.ctx, st->q.data(), st->k.data(), st->v.data(), call.doc_start, o, st->probs.data()));
    } else {
      MXMACA_RETURN_IF_ERROR(k.TokensToHeads(shape, st->context.data(), o));
    }
    MXMACA_RETURN_IF_ERROR(call.cp_attention->Backward(call.ctx, st->q.data(), st->k.data(),
                                                       st->v.data(), call.doc_start, o,
                                                       st->probs.data(), d_o, dq, dk, dv));
  } else if (call.fused_attention) {
    // Fused attention: the forward's output again (from `context`, or recomputed with the
    // log-sum-exp under selective recompute); the backward recomputes the probabilities.
    float* o = LayerScratch::Get(scratch->a, call.b * np * call.s * hn);
    if (st->probs.empty()) {
      st->probs.Allocate(tr, call.b * np * call.s);
      MXMACA_RETURN_IF_ERROR(
          k.FusedAttentionForward(shape, st->q.data(), st->k.data(), st->v.data(), call.doc_start,
                                  scale, AttentionDropout(call), attn_key, o, st->probs.data()));
    } else {
      MXMACA_RETURN_IF_ERROR(k.TokensToHeads(shape, st->context.data(), o));
    }
    MXMACA_RETURN_IF_ERROR(k.FusedAttentionBackward(
        shape, st->q.data(), st->k.data(), st->v.data(), o, st->probs.data(), call.doc_start, scale,
        AttentionDropout(call), attn_key, d_o, dq, dk, dv,
        LayerScratch::Get(scratch->delta, call.b * np * call.s)));
  } else {
    if (st->probs.empty()) {
      // Selective recompute: the probabilities again, from the stashed q, k, v.
      st->probs.Allocate(tr, call.b * np * call.s * call.s);
      float* o = LayerScratch::Get(scratch->a, call.b * np * call.s * hn);
      MXMACA_RETURN_IF_ERROR(k.AttentionForward(shape, st->q.data(), st->k.data(), st->v.data(),
                                                call.doc_start, scale, AttentionDropout(call),
                                                attn_key, st->probs.data(), o));
    }
    MXMACA_RETURN_IF_ERROR(k.AttentionBackward(shape, st->q.data(), st->k.data(), st->v.data(),
                                               st->probs.data(), call.doc_start, scale,
                                               AttentionDropout(call), attn_key, d_o, dq, dk, dv));
  }
  st->probs.Free();
  st->q.Free();
  st->k.Free();
  st->v.Free();
  if (c.position_embedding_type == PositionEmbeddingType::kRope) {
    MXMACA_RETURN_IF_ERROR(k.RopeBackward(dq, call.rope_positions, call.b, call.s, np, hn,
                                          c.rotary_dim(), c.rope_frequencies()));
    MXMACA_RETURN_IF_ERROR(k.RopeBackward(dk, call.rope_positions, call.b, call.s, ng, hn,
                                          c.rotary_dim(), c.rope_frequencies()));
  }
  if (c.qk_layernorm) {
    // Through the per-head norms; their output gradients are kept for W.
    const int64_t nq = call.b * np * call.s, nk = call.b * ng * call.s;
    st->d_q_norm.Allocate(tr, nq * hn);
    st->d_k_norm.Allocate(tr, nk * hn);
    MXMACA_RETURN_IF_ERROR(k.CopyDeviceToDevice(st->d_q_norm.data(), dq, sizeof(float) * nq * hn));
    MXMACA_RETURN_IF_ERROR(k.CopyDeviceToDevice(st->d_k_norm.data(), dk, sizeof(float) * nk * hn));
    float* gamma = LayerScratch::Get(scratch->gamma, hn);
    MXMACA_RETURN_IF_ERROR(modules::Norm(c).BackwardInput(
        k, st->d_q_norm.data(), st->q_pre.data(), P(call, ids_.q_norm_weight),
        ln ? st->q_mean.data() : nullptr, st->q_rstd.data(), nq, hn, dq, gamma));
    MXMACA_RETURN_IF_ERROR(modules::Norm(c).BackwardInput(
        k, st->d_k_norm.data(), st->k_pre.data(), P(call, ids_.k_norm_weight),
        ln ? st->k_mean.data() : nullptr, st->k_rstd.data(), nk, hn, dk, gamma));
  }
  st->d_qkv.Allocate(tr, t * qkv_n);
  MXMACA_RETURN_IF_ERROR(k.MergeQkvGrad(shape, dq, dk, dv, st->d_qkv.data()));
  // linear_qkv (column-parallel): input gradient summed over TP (or reduce-scattered).
  st->d_ln1_out.Allocate(tr, tl * h);
  {
    float* partial = sp ? LayerScratch::Get(scratch->a, t * h) : st->d_ln1_out.data();
    MXMACA_RETURN_IF_ERROR(
        LinearBackwardInput(k, st->d_qkv.data(), P(call, ids_.qkv_weight), t, h, qkv_n, partial));
    MXMACA_ASSIGN_OR_RETURN(float* summed,
                            RowParallelOutput(call, partial, st->d_ln1_out.data(), h));
    (void)summed;
  }
  MXMACA_RETURN_IF_ERROR(modules::Norm(c).BackwardInput(
      k, st->d_ln1_out.data(), st->input.data(), P(call, ids_.input_norm_weight),
      ln ? st->ln1_mean.data() : nullptr, st->ln1_rstd.data(), tl, h, dx,
      LayerScratch::Get(scratch->gamma, h)));
  MXMACA_RETURN_IF_ERROR(k.Add(dx2, dx, dx, tl * h));
  return absl::OkStatus();
}

absl::Status TransformerLayer::BackwardWeight(const LayerCall& call, LayerStash* st,
                                              WeightGradSink* sink) const {
  const GptConfig& c = *call.config;
  device::DeviceKernels& k = *call.kernels;
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
      MXMACA_RETURN_IF_ERROR(
          ScatterToSequenceParallelRegion(*call.tp, x, call.b, call.s, h, x_local.data()));
      MXMACA_RETURN_IF_ERROR(
          ScatterToSequenceParallelRegion(*call.tp, dy, call.b, call.s, h, dy_local.data()));
      x = x_local.data();
      dy = dy_local.data();
    }
    MXMACA_RETURN_IF_ERROR(moe_->BackwardWeight(call.ctx, x, dy, *st->moe,
                                                [sink](int id) { return sink->Begin(id); }));
    for (int id : moe_->parameter_ids()) sink->End(id);
  } else {
    MXMACA_RETURN_IF_ERROR(LinearBackwardWeight(k, st->d_fc2.data(), st->act_out.data(), t, f, h,
                                                ids_.fc2_weight, ids_.fc2_bias, sink));
    MXMACA_RETURN_IF_ERROR(LinearBackwardWeight(k, st->d_fc1.data(), st->ln2_out.data(), t, h, f1,
                                                ids_.fc1_weight, ids_.fc1_bias, sink));
  }
  {
    float* dg = sink->Begin(ids_.mlp_norm_weight);
    float* db = ln ? sink->Begin(ids_.mlp_norm_bias) : nullptr;
    MXMACA_RETURN_IF_ERROR(modules::Norm(c).BackwardWeight(
        k, st->d_ln2_out.data(), st->residual2.data(), ln ? st->ln2_mean.data() : nullptr,
        st->ln2_rstd.data(), tl, h, dg, db));
    MXMACA_RETURN_IF_ERROR(NormGradsAllReduce(call, dg, db, h));
    sink->End(ids_.mlp_norm_weight);
    if (ln) sink->End(ids_.mlp_norm_bias);
  }
  MXMACA_RETURN_IF_ERROR(LinearBackwardWeight(k, st->d_proj.data(), st->context.data(), t, pj, h,
                                              ids_.proj_weight, ids_.proj_bias, sink));
  MXMACA_RETURN_IF_ERROR(LinearBackwardWeight(k, st->d_qkv.data(), st->ln1_out.data(), t, h, qkv_n,
                                              ids_.qkv_weight, ids_.qkv_bias, sink));
  if (c.qk_layernorm) {
    // Each TP rank saw its own heads: the gradients are summed over TP (Megatron's
    // finalize_model_grads sums q_layernorm / k_layernorm grads over the TP group).
    const int64_t hn = c.head_dim();
    const int64_t nq = call.b * c.num_attention_heads * call.s,
                  nk = call.b * c.query_groups() * call.s;
    for (const auto& [d, x, mean, rstd, w_id, b_id, n] :
         {std::tuple{&st->d_q_norm, &st->q_pre, &st->q_mean, &st->q_rstd, ids_.q_norm_weight,
                     ids_.q_norm_bias, nq},
          std::tuple{&st->d_k_norm, &st->k_pre, &st->k_mean, &st->k_rstd, ids_.k_norm_weight,
                     ids_.k_norm_bias, nk}}) {
      float* dg = sink->Begin(w_id);
      float* db = ln ? sink->Begin(b_id) : nullptr;
      MXMACA_RETURN_IF_ERROR(modules::Norm(c).BackwardWeight(
          k, d->data(), x->data(), ln ? mean->data() : nullptr, rstd->data(), n, hn, dg, db));
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
    MXMACA_RETURN_IF_ERROR(modules::Norm(c).BackwardWeight(
        k, st->d_ln1_out.data(), st->input.data(), ln ? st->ln1_mean.data() : nullptr,
        st->ln1_rstd.data(), tl, h, dg, db));
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
    MXMACA_RETURN_IF_ERROR(
        ScatterToSequenceParallelRegion(*call.tp, x, call.b, call.s, h, x_local));
    x = x_local;
  }
  float* y_full = LayerScratch::Get(scratch->a, mc.num_tokens * h);
  MXMACA_RETURN_IF_ERROR(moe_->Forward(call.ctx, mc, x, y_full, st->moe.get(), call.moe_metrics));
  st->moe_bytes.Set(call.tracker, moe::MoEStashBytes(*st->moe));
  float* y = y_full;
  if (Sp(call) && !local) {
    y = LayerScratch::Get(scratch->c, tl * h);
    MXMACA_RETURN_IF_ERROR(ScatterToSequenceParallelRegion(*call.tp, y_full, call.b, call.s, h, y));
  }
  return MlpOutputToResidual(call, st, y, out, keep);
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
    MXMACA_RETURN_IF_ERROR(
        ScatterToSequenceParallelRegion(*call.tp, st->ln2_out.data(), call.b, call.s, h, x_local));
    MXMACA_RETURN_IF_ERROR(
        ScatterToSequenceParallelRegion(*call.tp, st->d_fc2.data(), call.b, call.s, h, dy_local));
    MXMACA_RETURN_IF_ERROR(moe_->BackwardInput(call.ctx, x_local, dy_local,
                                               call.moe_aux_loss_grad_scale, st->moe.get(),
                                               st->d_ln2_out.data()));
    st->moe_bytes.Set(call.tracker, moe::MoEStashBytes(*st->moe));
    return absl::OkStatus();
  }
  float* dx_full = LayerScratch::Get(scratch->a, t * h);
  MXMACA_RETURN_IF_ERROR(moe_->BackwardInput(call.ctx, st->ln2_out.data(), st->d_fc2.data(),
                                             call.moe_aux_loss_grad_scale, st->moe.get(), dx_full));
  st->moe_bytes.Set(call.tracker, moe::MoEStashBytes(*st->moe));
  if (Sp(call)) {
    MXMACA_RETURN_IF_ERROR(ScatterToSequenceParallelRegion(*call.tp, dx_full, call.b, call.s, h,
                                                           st->d_ln2_out.data()));
  } else {
    MXMACA_RETURN_IF_ERROR(call.kernels->CopyDeviceToDevice(
        st->d_ln2_out.data(), dx_full, sizeof(float) * static_cast<size_t>(t * h)));
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::layers
