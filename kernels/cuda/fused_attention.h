// kernels/cuda/fused_attention.h: causal attention in one pass over key tiles (online
// softmax, FlashAttention-2's algorithm: Dao 2023, "FlashAttention-2: Faster Attention
// with Better Parallelism and Work Partitioning"), fp32, without the [S, S] matrices.
//
// Same math, masking (causal + doc_start), GQA grouping and dropout mask (element
// ((b * NH + h) * S + i) * S + j of the Philox stream `key`) as attention.h's
// AttentionForward/Backward, but the stash is lse [B, NH, S] (log-sum-exp of the scaled,
// masked scores) instead of the probabilities, so memory is O(B NH S D).
// Shapes: q, o, dout, dq [B, NH, S, D]; k, v, dk, dv [B, NG, S, D]; lse, delta [B, NH, S].
// Tiles of 64 queries x 64 keys in shared memory (up to ~165 KB per block for D = 128),
// fp32 SIMT arithmetic (no tensor cores; ctx.precision is ignored: always fp32).
// Supported head dims: 32, 64, 128. Deterministic: no atomics (dk/dv are owned by one
// block per key tile that loops over the group's heads in order; dq by one block per
// query tile).
#ifndef MXMACA_KERNELS_CUDA_FUSED_ATTENTION_H_
#define MXMACA_KERNELS_CUDA_FUSED_ATTENTION_H_

#include <cstdint>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/exec_context.h"

namespace mxmaca::kernels::cuda {

// FusedAttentionForward: o = dropout(softmax(scale q k^T, masked)) v and its lse.
// Errors: bad shape, head_dim not in {32, 64, 128}, dropout_p outside [0, 1), launch
// failures (file:line).
CudaStatus FusedAttentionForward(const ExecContext& ctx, const AttentionShape& shape,
                                 const float* q, const float* k, const float* v,
                                 const int32_t* doc_start, float softmax_scale,
                                 float dropout_p, RngKey key, float* o, float* lse);

// FusedAttentionBackward: dq, dk, dv (overwritten) from dout, the inputs, the forward's
// o and lse, and the same doc_start, scale, dropout_p and key. delta: [B, NH, S] device
// workspace (rowsum(dout * o)).
CudaStatus FusedAttentionBackward(const ExecContext& ctx, const AttentionShape& shape,
                                  const float* q, const float* k, const float* v,
                                  const float* o, const float* lse, const int32_t* doc_start,
                                  float softmax_scale, float dropout_p, RngKey key,
                                  const float* dout, float* dq, float* dk, float* dv,
                                  float* delta);

// FusedAttentionForward / FusedAttentionBackward with the dropout key in DEVICE memory (read
// as each kernel starts; see elementwise.h). device_key may be null only when dropout_p == 0.
CudaStatus FusedAttentionForward(const ExecContext& ctx, const AttentionShape& shape,
                                 const float* q, const float* k, const float* v,
                                 const int32_t* doc_start, float softmax_scale,
                                 float dropout_p, const RngKey* device_key, float* o, float* lse);
CudaStatus FusedAttentionBackward(const ExecContext& ctx, const AttentionShape& shape,
                                  const float* q, const float* k, const float* v,
                                  const float* o, const float* lse, const int32_t* doc_start,
                                  float softmax_scale, float dropout_p, const RngKey* device_key,
                                  const float* dout, float* dq, float* dk, float* dv,
                                  float* delta);

}  // namespace mxmaca::kernels::cuda

#endif  // MXMACA_KERNELS_CUDA_FUSED_ATTENTION_H_
