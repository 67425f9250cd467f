// kernels/cpu/attention.h: causal self-attention core (softmax(QK^T)V) on CPU.
//
// B = batch, S = sequence, NH = query heads, NG = key/value groups (GQA; NG = NH is
// MHA, Ainslie et al. 2023), D = head dim, HPG = NH / NG heads per group. Query head h
// uses key/value group h / HPG (Megatron's repeat_interleave of k/v over heads).
// Layouts (row-major, fp32): q [B, NH, S, D]; k, v [B, NG, S, D]; probs [B, NH, S, S];
// o [B, NH, S, D].
// Math (Vaswani et al. 2017; Megatron's core_attention / FusedScaleMaskSoftmax):
//   scores[i, j] = softmax_scale * q_i . k_j  for allowed j, -inf otherwise
//   probs = softmax_j(scores) (row max subtracted; masked entries exactly 0)
//   o = dropout(probs) @ v
// Allowed keys for query i of sequence b: lo(b, i) <= j <= i with lo = doc_start[b, i]
// when doc_start is given (Megatron --reset-attention-mask: tokens attend only within their
// document), else lo = 0.
// Dropout on the probabilities: element (b, h, i, j) is kept iff
// UniformAt(key, ((b * NH + h) * S + i) * S + j) >= dropout_p and scaled by 1/(1-p)
// (kernels/philox.h); the backward regenerates the mask. dropout_p == 0: no dropout.
// Work is split over (b, h) pairs (forward) and (b, group) pairs (backward, so a group's
// dk/dv sum over its heads in head order without cross-thread reductions); each item is
// the same sequence of fp32 operations whatever ctx.num_threads is: bit-identical results.
// Scratch: up to two [S, S] fp32 buffers per worker thread (thread_local, grown once).
// GEMMs go through kernels/cpu/gemm.h, so ctx.precision == kBf16 rounds their inputs
// (Q, K, probabilities, V, gradients) to bf16 as Megatron's bf16 attention does.
#ifndef MXMACA_KERNELS_CPU_ATTENTION_H_
#define MXMACA_KERNELS_CPU_ATTENTION_H_

#include <cstdint>

#include "kernels/exec_context.h"

namespace mxmaca::kernels::cpu {

// AttentionShape: b = B, s = S, heads = NH, groups = NG (heads % groups == 0),
// head_dim = D.
// dropout_head_offset, dropout_heads: the heads here are heads [dropout_head_offset,
// dropout_head_offset + NH) of a layer with dropout_heads heads (tensor parallelism splits
// the heads); the dropout element index of (b, h, i, j) is then
// ((b * dropout_heads + dropout_head_offset + h) * S + i) * S + j, the index in the full
// [B, dropout_heads, S, S] tensor, so every split draws the single-device mask.
// dropout_heads == 0 (the default): NH heads, offset 0 (the plain formula above).
struct AttentionShape {
  int64_t b, s, heads, groups, head_dim;
  int64_t dropout_head_offset = 0;
  int64_t dropout_heads = 0;
};

// SplitQkv: splits Megatron's fused QKV projection output into head-major q, k, v.
// qkv [B, S, NG * (HPG + 2) * D], per token laid out [NG, HPG + 2, D]: for each group its
// HPG query heads, then its key, then its value (for MHA, NG = NH: [NH, 3, D]) — the
// layout of megatron/core/transformer/attention.py SelfAttention.get_query_key_value_tensors.
// Writes q [B, NH, S, D], k [B, NG, S, D], v [B, NG, S, D].
void SplitQkv(const ExecContext& ctx, const AttentionShape& shape, const float* qkv,
              float* q, float* k, float* v);

// MergeQkvGrad: the inverse of SplitQkv's layout change: dqkv [B, S, NG*(HPG+2)*D] from
// dq [B, NH, S, D], dk, dv [B, NG, S, D]. Overwrites dqkv.
void MergeQkvGrad(const ExecContext& ctx, const AttentionShape& shape, const float* dq,
                  const float* dk, const float* dv, float* dqkv);

// HeadsToTokens: o [B, NH, S, D] -> out [B, S, NH * D] (input of the output projection).
void HeadsToTokens(const ExecContext& ctx, const AttentionShape& shape, const float* o,
                   float* out);

// TokensToHeads: in [B, S, NH * D] -> o [B, NH, S, D] (the transpose of HeadsToTokens,
// used for the gradient).
void TokensToHeads(const ExecContext& ctx, const AttentionShape& shape, const float* in,
                   float* o);

// AttentionForward: causal softmax attention with materialised probabilities.
// doc_start: nullable int32 [B, S] (see above); softmax_scale: usually 1/sqrt(D).
// Writes probs [B, NH, S, S] (softmax output BEFORE dropout, masked entries 0; the stash
// for the backward) and o [B, NH, S, D]. Memory O(B * NH * S^2): fine for S up to a few
// thousand.
void AttentionForward(const ExecContext& ctx, const AttentionShape& shape, const float* q,
                      const float* k, const float* v, const int32_t* doc_start,
                      float softmax_scale, float dropout_p, RngKey key, float* probs,
                      float* o);

// AttentionBackward: gradients of AttentionForward given dout [B, NH, S, D], the inputs
// q, k, v and the stashed probs (same doc_start, scale, dropout_p and key as the
// forward). Overwrites dq [B, NH, S, D], dk, dv [B, NG, S, D] (not accumulated); for GQA
// dk/dv of a group sum over the group's HPG heads in head order.
//   dP' = dout @ v^T; dP = dropout_mask(dP') ; dv = dropout(P)^T @ dout;
//   dS = P * (dP - rowsum(dP * P)); dq = scale * dS @ k; dk = scale * dS^T @ q.
void AttentionBackward(const ExecContext& ctx, const AttentionShape& shape, const float* q,
                       const float* k, const float* v, const float* probs,
                       const int32_t* doc_start, float softmax_scale, float dropout_p,
                       RngKey key, const float* dout, float* dq, float* dk, float* dv);

}  // namespace mxmaca::kernels::cpu

#endif  // MXMACA_KERNELS_CPU_ATTENTION_H_
