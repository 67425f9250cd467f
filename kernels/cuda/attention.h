// kernels/cuda/attention.h: causal self-attention core (softmax(QK^T)V) on the GPU.
//
// The CUDA twin of kernels/cpu/attention.h: same shapes, layouts, masking (causal, and
// per-document under doc_start), dropout mask (Philox, bit-identical to the CPU
// backend's), stash (probabilities before dropout) and GQA head grouping:
//   B = batch, S = sequence, NH = query heads, NG = key/value groups, D = head dim,
//   HPG = NH / NG. q [B, NH, S, D]; k, v [B, NG, S, D]; probs, scratch [B, NH, S, S];
//   o [B, NH, S, D]. fp32 device pointers.
// Implementation: the heads of one group are contiguous in q, so each (b, group) is one
// product of a [HPG*S, D] block with its [S, D] keys: scores, o, dq, dk and dv are
// cuBLASLt strided-batched GEMMs over B*NG (gemm.h; ctx.precision == kBf16 rounds their
// inputs to bf16, as the CPU backend does), and the masked softmax (forward) and
// softmax gradient (backward) are row kernels (one block per query row). dk/dv of a group
// sum over its heads inside one GEMM (reduction order is cuBLAS's, not head order).
// Memory O(B NH S^2), like the CPU path. Not a fused (flash) kernel: the full S x S
// product is computed and the masked half discarded.
#ifndef MXMACA_KERNELS_CUDA_ATTENTION_H_
#define MXMACA_KERNELS_CUDA_ATTENTION_H_

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm.h"
#include "kernels/exec_context.h"
#include "kernels/host_device.h"

namespace mxmaca::kernels::cuda {

// AttentionShape: b = B, s = S, heads = NH, groups = NG (heads % groups == 0), head_dim = D.
// dropout_heads / dropout_head_offset: as kernels/cpu/attention.h (tensor parallelism:
// this rank's heads are [offset, offset + heads) of dropout_heads, and the probability
// dropout mask is keyed by the global head, ((b * dropout_heads + offset + h) * S + i) * S
// + j); 0 / 0 means heads / 0.
struct AttentionShape {
  int64_t b, s, heads, groups, head_dim;
  int64_t dropout_head_offset = 0;
  int64_t dropout_heads = 0;
};

// DropoutMaskRow: the dropout-mask row of attention row `row` = (b * NH + h) * S + i.
MXMACA_HOST_DEVICE int64_t DropoutMaskRow(const AttentionShape& sh, int64_t row) {
  if (sh.dropout_heads == 0) return row;
  const int64_t i = row % sh.s, bh = row / sh.s, b = bh / sh.heads, h = bh % sh.heads;
  return (b * sh.dropout_heads + sh.dropout_head_offset + h) * sh.s + i;
}

// SplitQkv: qkv [B, S, NG*(HPG+2)*D] (per token [NG, HPG+2, D]: a group's HPG query
// heads, then its key, then its value; Megatron's SelfAttention layout) -> q, k, v.
CudaStatus SplitQkv(const ExecContext& ctx, const AttentionShape& shape, const float* qkv,
                    float* q, float* k, float* v);

// MergeQkvGrad: the inverse layout change: dqkv from dq, dk, dv. Overwrites dqkv.
CudaStatus MergeQkvGrad(const ExecContext& ctx, const AttentionShape& shape, const float* dq,
                        const float* dk, const float* dv, float* dqkv);

// HeadsToTokens: o [B, NH, S, D] -> out [B, S, NH*D].
CudaStatus HeadsToTokens(const ExecContext& ctx, const AttentionShape& shape, const float* o,
                         float* out);

// TokensToHeads: in [B, S, NH*D] -> o [B, NH, S, D].
CudaStatus TokensToHeads(const ExecContext& ctx, const AttentionShape& shape, const float* in,
                         float* o);

// AttentionForward: writes probs (softmax before dropout, masked entries 0) and o.
// doc_start: nullable device int32 [B, S]. scratch: [B, NH, S, S] device workspace, used
// (and required) only when dropout_p > 0 (the dropped probabilities for the o GEMM).
// Errors: bad shape (heads % groups, non-positive dims), dropout_p outside [0, 1),
// missing scratch, cuBLASLt/CUDA failures (file:line).
CudaStatus AttentionForward(const ExecContext& ctx, GemmHandle& gemm,
                            const AttentionShape& shape, const float* q, const float* k,
                            const float* v, const int32_t* doc_start, float softmax_scale,
                            float dropout_p, RngKey key, float* probs, float* o,
                            float* scratch);

// AttentionBackward: dq [B, NH, S, D], dk, dv [B, NG, S, D] (overwritten) from dout, the
// inputs, the stashed probs and the forward's doc_start, scale, dropout_p and key.
// scratch: [B, NH, S, S] device workspace (always required).
CudaStatus AttentionBackward(const ExecContext& ctx, GemmHandle& gemm,
                             const AttentionShape& shape, const float* q, const float* k,
                             const float* v, const float* probs, const int32_t* doc_start,
                             float softmax_scale, float dropout_p, RngKey key,
                             const float* dout, float* dq, float* dk, float* dv,
                             float* scratch);

// AttentionForward / AttentionBackward with the dropout key in DEVICE memory (read when the
// kernels run; see elementwise.h): graph-capturable with per-micro-batch keys. device_key
// may be null only when dropout_p == 0.
CudaStatus AttentionForward(const ExecContext& ctx, GemmHandle& gemm,
                            const AttentionShape& shape, const float* q, const float* k,
                            const float* v, const int32_t* doc_start, float softmax_scale,
                            float dropout_p, const RngKey* device_key, float* probs, float* o,
                            float* scratch);
CudaStatus AttentionBackward(const ExecContext& ctx, GemmHandle& gemm,
                             const AttentionShape& shape, const float* q, const float* k,
                             const float* v, const float* probs, const int32_t* doc_start,
                             float softmax_scale, float dropout_p, const RngKey* device_key,
                             const float* dout, float* dq, float* dk, float* dv,
                             float* scratch);

}  // namespace mxmaca::kernels::cuda

#endif  // MXMACA_KERNELS_CUDA_ATTENTION_H_
