// kernels/cpu/cross_entropy.h: fused softmax cross-entropy over a padded vocabulary.
//
// N = tokens, VP = padded vocab (columns of the logits; Megatron pads the vocab to a
// multiple of --make-vocab-size-divisible-by * TP), V <= VP = the SOFTMAX COLUMNS: the
// leading columns that enter the softmax. logits, dlogits: [N, VP] fp32 (row stride VP);
// targets int32 [N]; loss, lse, dloss: [N] fp32.
// Which V to pass: the real vocabulary size (MXMACA's default: the loss does not depend on
// the padding, hence not on TP), or V = VP to include the padded columns in the softmax as
// Megatron does (--softmax-over-padded-vocab; the loss then depends on the padded size,
// i.e. on TP). The kernels need nothing else for that: the columns [0, V) are the softmax,
// whatever they hold.
// A target outside [0, V) means "the target is not in this vocabulary shard" (vocab
// parallelism: targets are shard-local and only one shard holds each): the forward then
// reports loss = lse (no target logit subtracted) and the backward omits the one-hot term.
// With lse replaced by the all-reduced global logsumexp, CrossEntropyBackward is exactly
// the vocab-parallel gradient (Megatron's _VocabParallelCrossEntropy).
// Columns >= V are outside the softmax (padding, by default): they never enter the max
// or the sum of exps and get zero gradient.
// Each row's logsumexp is computed as max + log(sum exp(x - max)) with the sum in fp32
// (8 interleaved partial sums) — per-row, so independent of the thread count.
// Single-shard form; the vocab-parallel version (Megatron's
// megatron/core/tensor_parallel/cross_entropy.py) is built from these pieces in layers/.
#ifndef MXMACA_KERNELS_CPU_CROSS_ENTROPY_H_
#define MXMACA_KERNELS_CPU_CROSS_ENTROPY_H_

#include <cstdint>

#include "kernels/exec_context.h"

namespace mxmaca::kernels::cpu {

// CrossEntropyForward: lse[i] = logsumexp(logits[i, :V]); loss[i] = lse[i] -
// logits[i, targets[i]] (or lse[i] when targets[i] is outside [0, V)). lse is the stash
// for the backward.
void CrossEntropyForward(const ExecContext& ctx, const float* logits,
                         const int32_t* targets, int64_t n, int64_t vp, int64_t v,
                         float* loss, float* lse);

// CrossEntropyBackward: dlogits[i, c] = dloss[i] * (exp(logits[i, c] - lse[i]) -
// [c == targets[i]]) for c < V; 0 for V <= c < VP. lse: the forward's stash (or the
// global logsumexp across vocab shards). dlogits may alias logits (in place,
// as llm.c does, to avoid a second [N, VP] buffer); otherwise they must not overlap.
void CrossEntropyBackward(const ExecContext& ctx, const float* logits,
                          const int32_t* targets, const float* lse, const float* dloss,
                          int64_t n, int64_t vp, int64_t v, float* dlogits);

// Vocab-parallel pieces (Megatron's _VocabParallelCrossEntropy: max all-reduce, sum-exp
// all-reduce; the layer does the reductions across shards). Same per-row arithmetic as
// CrossEntropyForward, so lse = max + log(sum) from them equals its lse on one shard.
// CrossEntropyRowMax: row_max[i] = max_{c < v} logits[i, c]; -inf when v == 0 (a shard
// of padding only). logits [N, VP], row_max [N].
void CrossEntropyRowMax(const ExecContext& ctx, const float* logits, int64_t n, int64_t vp,
                        int64_t v, float* row_max);
// CrossEntropySumExp: sum_exp[i] = sum_{c < v} exp(logits[i, c] - shift[i]) (fp32, the
// 8-lane order of CrossEntropyForward); 0 when v == 0. shift, sum_exp [N].
void CrossEntropySumExp(const ExecContext& ctx, const float* logits, const float* shift,
                        int64_t n, int64_t vp, int64_t v, float* sum_exp);

}  // namespace mxmaca::kernels::cpu

#endif  // MXMACA_KERNELS_CPU_CROSS_ENTROPY_H_
