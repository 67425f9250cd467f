// layers/chunked_loss_head.h: GptStage's output layer + vocab-parallel cross-entropy in
// sequence chunks, so a rank never holds its whole [T, VL] logits (issue 9, "Memory": at
// 16K tokens and GPT-2's 50,304-row vocabulary they take 3.3 GB, 6.6 GB with their
// gradient).
//
// T = tokens of this rank's micro-batch (b s; b s_local under CP; rows in any order),
// h = hidden, VL = rows of this rank's output weight (VP / TP), R = chunk_rows.
//   x [T, h] (final_layernorm output, gathered under SP)   w [VL, h]
//   labels int32 [T] (global vocabulary ids)   loss, lse, dloss [T]   all fp32 but labels
// Forward, per chunk of R rows (the last one shorter):
//   logits = x_c w^T [R, VL]; lse_c, loss_c by the vocab-parallel cross-entropy
//   (VocabParallelCrossEntropyForward: its TP collectives run once per chunk, so every TP
//   rank must pass the same T and R). Only lse [T] is kept for the backward.
// Backward, per chunk: the chunk's logits are recomputed (the same GEMM call, so the same
// bits as in the forward), turned into dlogits in place (kernels/cpu/cross_entropy.h with
// the global lse: exactly Megatron's vocab-parallel gradient), then
//   d_x_c = dlogits w      (this rank's partial over the vocab shards; the caller sums
//                           it over TP as for the unchunked head)
//   d_w  (+)= dlogits^T x_c (first chunk overwrites, later chunks add)
// Numerics against the unchunked head (one GEMM over all T rows): each row's arithmetic
// is the same; only the GEMM's row count differs, and oneDNN may block a call of R rows
// differently from one of T rows, so logits, loss, lse and d_x agree to fp32 rounding of an
// h-term dot product; d_w sums the chunks in order (also fp32 rounding). With R >= T
// every call is the unchunked head's, bit for bit.
// Scratch: one [min(R, T), VL] fp32 buffer per call, from `tracker` (so it counts toward
// the stage's peak activation bytes and its memory cap) and returned at the end.
// Source: Megatron's megatron/core/tensor_parallel/cross_entropy.py
// (_VocabParallelCrossEntropy) computed per chunk, as Liger-Kernel's fused linear
// cross-entropy and Megatron's --cross-entropy-loss-fusion chunk the sequence.
#ifndef MXMACA_LAYERS_CHUNKED_LOSS_HEAD_H_
#define MXMACA_LAYERS_CHUNKED_LOSS_HEAD_H_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/exec_context.h"
#include "layers/micro_batch_stash.h"
#include "layers/tensor_parallel.h"

namespace mxmaca::layers {

// kDefaultLossChunkTokens: GptConfig::loss_chunk_tokens' default. A micro-batch whose
// rank holds more tokens than this computes its loss head in chunks of this many tokens
// ([1024, 50304] fp32 logits: 206 MB, against 3.3 GB for 16K tokens); at most this many it
// keeps the whole logits for B and W as before (no recomputation).
inline constexpr int64_t kDefaultLossChunkTokens = 1024;

// VocabParallelCrossEntropyForward: loss [n] and lse [n] of this rank's logits [n, VL]
// (row stride vocab.rows). TP size 1: kernels/cpu CrossEntropyForward over the first
// vocab.softmax columns. TP size p > 1: Megatron's _VocabParallelCrossEntropy: the global
// row max (all-gather of the shard maxima), the shard sums of exp(x - max) summed over
// TP, the target logit from the shard that holds it (summed over TP: exact, one non-zero
// term); lse = max + log(sum), loss = lse - target. Blocking TP collectives (every TP rank
// calls it with the same n). Errors: the collectives'.
absl::Status VocabParallelCrossEntropyForward(const kernels::ExecContext& ctx,
                                              const TensorParallelContext& tp,
                                              const VocabShard& vocab, const float* logits,
                                              int64_t n, const int32_t* labels, float* loss,
                                              float* lse);

// ChunkedLossHeadForward: loss [t] and lse [t] (see the file comment). chunk_rows >= 1.
// Errors: InvalidArgument for chunk_rows < 1 or t < 0; the TP collectives'.
absl::Status ChunkedLossHeadForward(const kernels::ExecContext& ctx,
                                    const TensorParallelContext& tp, const VocabShard& vocab,
                                    int64_t chunk_rows, int64_t t, int64_t h, const float* x,
                                    const float* w, const int32_t* labels, float* loss,
                                    float* lse, MemoryTracker* tracker);

// ChunkedLossHeadBackward: from dloss [t] (dL/d loss per token: the loss mask times the
// loss scale) and the forward's lse, writes d_x [t, h] (overwritten; this rank's partial
// sum over the vocab shards) and/or d_w [VL, h] (overwritten: the micro-batch's output
// weight gradient); either may be nullptr (B and W separately, each recomputing the
// logits). No collectives. Errors: InvalidArgument for chunk_rows < 1, t < 0 or both
// outputs null.
absl::Status ChunkedLossHeadBackward(const kernels::ExecContext& ctx,
                                     const TensorParallelContext& tp, const VocabShard& vocab,
                                     int64_t chunk_rows, int64_t t, int64_t h, const float* x,
                                     const float* w, const int32_t* labels, const float* lse,
                                     const float* dloss, float* d_x, float* d_w,
                                     MemoryTracker* tracker);

}  // namespace mxmaca::layers

#endif  // MXMACA_LAYERS_CHUNKED_LOSS_HEAD_H_
