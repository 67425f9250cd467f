// layers/transformer_layer.cc
#include "layers/transformer_layer.h"

#include <cmath>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/philox.h"

namespace mxmaca::layers {

namespace cpu = ::mxmaca::kernels::cpu;
using kernels::ExecContext;

kernels::RngKey DropoutKey(uint64_t seed, int64_t layer, DropoutSite site, int64_t iteration,
                           int64_t micro_batch_id) {
  return {seed, kernels::MakeRngStream(
                    static_cast<uint64_t>(layer + 1), static_cast<uint64_t>(site),
                    static_cast<uint64_t>(iteration), static_cast<uint64_t>(micro_batch_id))};
}

void NormForward(const GptConfig& config, const ExecContext& ctx, const float* x,
                 const float* gamma, const float* beta, int64_t n, int64_t h, float* y, float* mean,
                 float* rstd) {
  if (config.normalization == Normalization::kLayerNorm) {
    cpu::LayerNormForward(ctx, x, gamma, beta, config.norm_epsilon, n, h, y, mean, rstd);
  } else {
    cpu::RmsNormForward(ctx, x, gamma, config.norm_epsilon, n, h, y, rstd);
  }
}

void NormBackwardInput(const GptConfig& config, const ExecContext& ctx, const float* dy,
                       const float* x, const float* gamma, const float* mean, const float* rstd,
                       int64_t n, int64_t h, float* dx) {
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

cpu::AttentionShape Shape(const LayerCall& call) {
  const GptConfig& c = *call.config;
  return {call.b, call.s, c.num_attention_heads, c.query_groups(), c.head_dim()};
}

float AttentionDropout(const LayerCall& call) {
  return call.training ? call.config->attention_dropout : 0.0f;
}
float HiddenDropout(const LayerCall& call) {
  return call.training ? call.config->hidden_dropout : 0.0f;
}

}  // namespace

void TransformerLayer::Forward(const LayerCall& call, LayerStash* st, float* out, ForwardKeep keep,
                               LayerScratch* scratch) const {
  const GptConfig& c = *call.config;
  const ExecContext& ctx = call.ctx;
  MemoryTracker* tr = call.tracker;
  const int64_t t = call.b * call.s, h = c.hidden_size, np = c.num_attention_heads,
                ng = c.query_groups(), hn = c.head_dim(), qkv_n = c.qkv_size(),
                pj = c.attention_projection_size(), f = c.ffn_hidden_size, f1 = c.fc1_size();
  const bool ln = IsLayerNorm(c);
  const float* x = st->input.data();

  // Attention block.
  st->ln1_out.Allocate(tr, t * h);
  if (ln) st->ln1_mean.Allocate(tr, t);
  st->ln1_rstd.Allocate(tr, t);
  NormForward(c, ctx, x, P(ids_.input_norm_weight), P(ids_.input_norm_bias), t, h,
              st->ln1_out.data(), ln ? st->ln1_mean.data() : nullptr, st->ln1_rstd.data());
  float* qkv = LayerScratch::Get(scratch->a, t * qkv_n);
  LinearForward(ctx, st->ln1_out.data(), P(ids_.qkv_weight), P(ids_.qkv_bias), t, h, qkv_n, qkv);
  const cpu::AttentionShape shape = Shape(call);
  st->q.Allocate(tr, call.b * np * call.s * hn);
  st->k.Allocate(tr, call.b * ng * call.s * hn);
  st->v.Allocate(tr, call.b * ng * call.s * hn);
  cpu::SplitQkv(ctx, shape, qkv, st->q.data(), st->k.data(), st->v.data());
  if (c.position_embedding_type == PositionEmbeddingType::kRope) {
    cpu::RopeForward(ctx, st->q.data(), call.rope_positions, call.b, call.s, np, hn, c.rotary_dim(),
                     c.rotary_base);
    cpu::RopeForward(ctx, st->k.data(), call.rope_positions, call.b, call.s, ng, hn, c.rotary_dim(),
                     c.rotary_base);
  }
  st->probs.Allocate(tr, call.b * np * call.s * call.s);
  float* o = LayerScratch::Get(scratch->b, call.b * np * call.s * hn);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hn)));
  cpu::AttentionForward(ctx, shape, st->q.data(), st->k.data(), st->v.data(), call.doc_start, scale,
                        AttentionDropout(call),
                        DropoutKey(c.seed, call.global_layer, DropoutSite::kAttentionProbs,
                                   call.iteration, call.micro_batch_id),
                        st->probs.data(), o);
  st->context.Allocate(tr, t * pj);
  cpu::HeadsToTokens(ctx, shape, o, st->context.data());
  float* proj = LayerScratch::Get(scratch->a, t * h);
  LinearForward(ctx, st->context.data(), P(ids_.proj_weight), P(ids_.proj_bias), t, pj, h, proj);
  if (HiddenDropout(call) > 0.0f) {
    cpu::DropoutForward(ctx, proj, proj, t * h, HiddenDropout(call),
                        DropoutKey(c.seed, call.global_layer, DropoutSite::kAttentionOutput,
                                   call.iteration, call.micro_batch_id),
                        0);
  }
  st->residual2.Allocate(tr, t * h);
  cpu::Add(ctx, x, proj, st->residual2.data(), t * h);

  // MLP block.
  st->ln2_out.Allocate(tr, t * h);
  if (ln) st->ln2_mean.Allocate(tr, t);
  st->ln2_rstd.Allocate(tr, t);
  NormForward(c, ctx, st->residual2.data(), P(ids_.mlp_norm_weight), P(ids_.mlp_norm_bias), t, h,
              st->ln2_out.data(), ln ? st->ln2_mean.data() : nullptr, st->ln2_rstd.data());
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
  float* fc2 = LayerScratch::Get(scratch->a, t * h);
  LinearForward(ctx, st->act_out.data(), P(ids_.fc2_weight), P(ids_.fc2_bias), t, f, h, fc2);
  if (HiddenDropout(call) > 0.0f) {
    cpu::DropoutForward(ctx, fc2, fc2, t * h, HiddenDropout(call),
                        DropoutKey(c.seed, call.global_layer, DropoutSite::kMlpOutput,
                                   call.iteration, call.micro_batch_id),
                        0);
  }
  cpu::Add(ctx, st->residual2.data(), fc2, out, t * h);

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

void TransformerLayer::BackwardInput(const LayerCall& call, LayerStash* st, const float* dy,
                                     float* dx, LayerScratch* scratch) const {
  const GptConfig& c = *call.config;
  const ExecContext& ctx = call.ctx;
  MemoryTracker* tr = call.tracker;
  const int64_t t = call.b * call.s, h = c.hidden_size, np = c.num_attention_heads,
                ng = c.query_groups(), hn = c.head_dim(), qkv_n = c.qkv_size(),
                pj = c.attention_projection_size(), f = c.ffn_hidden_size, f1 = c.fc1_size();
  const bool ln = IsLayerNorm(c);
  const float hidden_p = HiddenDropout(call);

  // MLP block.
  st->d_fc2.Allocate(tr, t * h);
  // DropoutBackward copies when hidden_p is 0.
  cpu::DropoutBackward(ctx, dy, st->d_fc2.data(), t * h, hidden_p,
                       DropoutKey(c.seed, call.global_layer, DropoutSite::kMlpOutput,
                                  call.iteration, call.micro_batch_id),
                       0);
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
  st->d_ln2_out.Allocate(tr, t * h);
  LinearBackwardInput(ctx, st->d_fc1.data(), P(ids_.fc1_weight), t, h, f1, st->d_ln2_out.data());
  float* dx2 = LayerScratch::Get(scratch->c, t * h);
  NormBackwardInput(c, ctx, st->d_ln2_out.data(), st->residual2.data(), P(ids_.mlp_norm_weight),
                    ln ? st->ln2_mean.data() : nullptr, st->ln2_rstd.data(), t, h, dx2);
  cpu::Add(ctx, dy, dx2, dx2, t * h);

  // Attention block.
  st->d_proj.Allocate(tr, t * h);
  cpu::DropoutBackward(ctx, dx2, st->d_proj.data(), t * h, hidden_p,
                       DropoutKey(c.seed, call.global_layer, DropoutSite::kAttentionOutput,
                                  call.iteration, call.micro_batch_id),
                       0);
  float* d_context = LayerScratch::Get(scratch->a, t * pj);
  LinearBackwardInput(ctx, st->d_proj.data(), P(ids_.proj_weight), t, pj, h, d_context);
  const cpu::AttentionShape shape = Shape(call);
  float* d_o = LayerScratch::Get(scratch->b, call.b * np * call.s * hn);
  cpu::TokensToHeads(ctx, shape, d_context, d_o);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hn)));
  const kernels::RngKey attn_key = DropoutKey(
      c.seed, call.global_layer, DropoutSite::kAttentionProbs, call.iteration, call.micro_batch_id);
  if (st->probs.empty()) {
    // Selective recompute: the probabilities again, from the stashed q, k, v.
    st->probs.Allocate(tr, call.b * np * call.s * call.s);
    float* o = LayerScratch::Get(scratch->a, call.b * np * call.s * hn);
    cpu::AttentionForward(ctx, shape, st->q.data(), st->k.data(), st->v.data(), call.doc_start,
                          scale, AttentionDropout(call), attn_key, st->probs.data(), o);
  }
  float* dq = LayerScratch::Get(scratch->d, call.b * np * call.s * hn);
  float* dkv = LayerScratch::Get(scratch->e, 2 * call.b * ng * call.s * hn);
  float* dk = dkv;
  float* dv = dkv + call.b * ng * call.s * hn;
  cpu::AttentionBackward(ctx, shape, st->q.data(), st->k.data(), st->v.data(), st->probs.data(),
                         call.doc_start, scale, AttentionDropout(call), attn_key, d_o, dq, dk, dv);
  st->probs.Free();
  st->q.Free();
  st->k.Free();
  st->v.Free();
  if (c.position_embedding_type == PositionEmbeddingType::kRope) {
    cpu::RopeBackward(ctx, dq, call.rope_positions, call.b, call.s, np, hn, c.rotary_dim(),
                      c.rotary_base);
    cpu::RopeBackward(ctx, dk, call.rope_positions, call.b, call.s, ng, hn, c.rotary_dim(),
                      c.rotary_base);
  }
  st->d_qkv.Allocate(tr, t * qkv_n);
  cpu::MergeQkvGrad(ctx, shape, dq, dk, dv, st->d_qkv.data());
  st->d_ln1_out.Allocate(tr, t * h);
  LinearBackwardInput(ctx, st->d_qkv.data(), P(ids_.qkv_weight), t, h, qkv_n, st->d_ln1_out.data());
  NormBackwardInput(c, ctx, st->d_ln1_out.data(), st->input.data(), P(ids_.input_norm_weight),
                    ln ? st->ln1_mean.data() : nullptr, st->ln1_rstd.data(), t, h, dx);
  cpu::Add(ctx, dx2, dx, dx, t * h);
}

void TransformerLayer::BackwardWeight(const LayerCall& call, LayerStash* st,
                                      WeightGradSink* sink) const {
  const GptConfig& c = *call.config;
  const ExecContext& ctx = call.ctx;
  const int64_t t = call.b * call.s, h = c.hidden_size, qkv_n = c.qkv_size(),
                pj = c.attention_projection_size(), f = c.ffn_hidden_size, f1 = c.fc1_size();
  const bool ln = IsLayerNorm(c);

  LinearBackwardWeight(ctx, st->d_fc2.data(), st->act_out.data(), t, f, h, ids_.fc2_weight,
                       ids_.fc2_bias, sink);
  LinearBackwardWeight(ctx, st->d_fc1.data(), st->ln2_out.data(), t, h, f1, ids_.fc1_weight,
                       ids_.fc1_bias, sink);
  {
    float* dg = sink->Begin(ids_.mlp_norm_weight);
    float* db = ln ? sink->Begin(ids_.mlp_norm_bias) : nullptr;
    NormBackwardWeight(c, ctx, st->d_ln2_out.data(), st->residual2.data(),
                       ln ? st->ln2_mean.data() : nullptr, st->ln2_rstd.data(), t, h, dg, db);
    sink->End(ids_.mlp_norm_weight);
    if (ln) sink->End(ids_.mlp_norm_bias);
  }
  LinearBackwardWeight(ctx, st->d_proj.data(), st->context.data(), t, pj, h, ids_.proj_weight,
                       ids_.proj_bias, sink);
  LinearBackwardWeight(ctx, st->d_qkv.data(), st->ln1_out.data(), t, h, qkv_n, ids_.qkv_weight,
                       ids_.qkv_bias, sink);
  {
    float* dg = sink->Begin(ids_.input_norm_weight);
    float* db = ln ? sink->Begin(ids_.input_norm_bias) : nullptr;
    NormBackwardWeight(c, ctx, st->d_ln1_out.data(), st->input.data(),
                       ln ? st->ln1_mean.data() : nullptr, st->ln1_rstd.data(), t, h, dg, db);
    sink->End(ids_.input_norm_weight);
    if (ln) sink->End(ids_.input_norm_bias);
  }
  st->FreeAll();
}

}  // namespace mxmaca::layers
