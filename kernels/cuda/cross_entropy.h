// kernels/cuda/cross_entropy.h: fused softmax cross-entropy over a padded vocabulary, GPU.
//
// The CUDA twin of kernels/cpu/cross_entropy.h (same math, shapes, shard semantics):
// N = tokens, VP = padded vocab (logits columns), V <= VP = softmax columns (the real
// vocab by default, VP for Megatron's --softmax-over-padded-vocab). logits,
// dlogits: [N, VP] fp32; targets int32 [N]; loss, lse, dloss: [N] fp32; all device
// pointers. A target outside [0, V) = "not in this vocab shard" (loss = lse, no one-hot
// term in the backward); with lse replaced by the all-reduced global logsumexp the
// backward is Megatron's _VocabParallelCrossEntropy gradient. Columns >= V: never in the
// softmax, zero gradient. One block per row: max, then sum exp(x - max) in fp32 with a
// fixed-order block reduction.
#ifndef MXMACA_KERNELS_CUDA_CROSS_ENTROPY_H_
#define MXMACA_KERNELS_CUDA_CROSS_ENTROPY_H_

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/exec_context.h"

namespace mxmaca::kernels::cuda {

// CrossEntropyForward: lse[i] = logsumexp(logits[i, :V]); loss[i] = lse[i] -
// logits[i, targets[i]] (or lse[i] when the target is outside [0, V)).
// Errors: v > vp, v < 1, negative n.
CudaStatus CrossEntropyForward(const ExecContext& ctx, const float* logits,
                               const int32_t* targets, int64_t n, int64_t vp, int64_t v,
                               float* loss, float* lse);

// CrossEntropyBackward: dlogits[i, c] = dloss[i] * (exp(logits[i, c] - lse[i]) -
// [c == targets[i]]) for c < V, 0 for V <= c < VP. dlogits may alias logits (in place);
// otherwise they must not overlap.
CudaStatus CrossEntropyBackward(const ExecContext& ctx, const float* logits,
                                const int32_t* targets, const float* lse,
                                const float* dloss, int64_t n, int64_t vp, int64_t v,
                                float* dlogits);

}  // namespace mxmaca::kernels::cuda

#endif  // MXMACA_KERNELS_CUDA_CROSS_ENTROPY_H_
