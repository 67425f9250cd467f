// layers/context_parallel/chunked_cross_entropy.h: the output layer and vocabulary
// cross-entropy computed in sequence chunks, so the [N, VP] logits (and their gradient)
// are never whole — at 16K tokens and a 50K vocabulary they would take 3.3 GB, 6.6 GB
// with their gradient (issue 9, "Memory").
//
// N = tokens of this rank (b * s_local under CP, rows in any order), h = hidden,
// VP = padded vocabulary (rows of the output weight), V <= VP = softmax columns (as in
// kernels/cpu/cross_entropy.h: the real vocabulary by default, VP for
// --softmax-over-padded-vocab), R = chunk_rows.
//   hidden [N, h]  weight [VP, h]  targets int32 [N]  loss, lse, dloss [N]
//   d_hidden [N, h]  d_weight [VP, h]                  (all fp32 except targets)
// Per chunk of R rows (the last one shorter):
//   logits = hidden_c weight^T                          [R, VP]
//   lse_c, loss_c = CrossEntropyForward(logits)         (kernels/cpu/cross_entropy.h)
//   dlogits = CrossEntropyBackward(logits, lse_c, dloss_c)   (in place)
//   d_hidden_c = dlogits weight;  d_weight += dlogits^T hidden_c
// The per-row arithmetic is that of kernels/cpu/cross_entropy.h on the unchunked logits,
// so a row's loss, lse and d_hidden are bit-identical to the unchunked computation
// whenever the logits GEMM gives the row the same bits: with row_invariant_gemm
// (layers/moe/expert_gemm.h BatchInvariantGemm, fixed 64-row calls) they are equal to an
// unchunked BatchInvariantGemm pipeline for any R; with the plain kernels/cpu Gemm a row's
// bits may depend on the call's row count (see layers/moe/expert_gemm.h), so they agree
// to fp32 rounding. d_weight sums over the chunks in order: equal to fp32 rounding.
// Scratch: one [R, VP] buffer owned by the object (allocated by Create).
// Single vocabulary shard (no tensor parallelism); the vocab-parallel form would reduce
// each chunk's row max / sum of exps / target logit over TP as GptStage does.
#ifndef MXMACA_LAYERS_CONTEXT_PARALLEL_CHUNKED_CROSS_ENTROPY_H_
#define MXMACA_LAYERS_CONTEXT_PARALLEL_CHUNKED_CROSS_ENTROPY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/exec_context.h"

namespace mxmaca::layers::cp {

// ChunkedCrossEntropyConfig: the static shape of the output layer and loss.
struct ChunkedCrossEntropyConfig {
  int64_t hidden = 0;        // h
  int64_t padded_vocab = 0;  // VP
  int64_t softmax_vocab = 0; // V (1 <= V <= VP)
  int64_t chunk_rows = 1024; // R
  bool row_invariant_gemm = false;  // BatchInvariantGemm for the per-row products
};

// ChunkedCrossEntropy: the chunked output layer + cross-entropy (forward and backward).
class ChunkedCrossEntropy {
 public:
  // Create: validates the config and allocates the [R, VP] scratch.
  // Errors: InvalidArgument naming the value when hidden, padded_vocab or chunk_rows < 1,
  // or softmax_vocab is outside [1, padded_vocab].
  static absl::StatusOr<std::unique_ptr<ChunkedCrossEntropy>> Create(
      const ChunkedCrossEntropyConfig& config);

  // Forward: per-token loss [N] and lse [N] (the stash for Backward) of n tokens.
  // loss[i] = lse[i] - logits[i, targets[i]] (lse[i] alone for a target outside [0, V),
  // kernels/cpu/cross_entropy.h). The caller applies the loss mask and the averaging.
  // Errors: InvalidArgument for n < 0 or a null pointer.
  absl::Status Forward(const kernels::ExecContext& ctx, int64_t n, const float* hidden,
                       const float* weight, const int32_t* targets, float* loss, float* lse);

  // Backward: from dloss [N] (e.g. loss_mask / num_tokens; 0 for masked tokens) and the
  // forward's lse, recomputes the logits chunk by chunk and writes d_hidden [N, h]
  // (overwritten) and adds into d_weight [VP, h] (accumulated, so the caller zeroes it
  // once per micro-batch or step). Either output may be nullptr to skip it (B and W
  // separately, at the price of recomputing the logits GEMM).
  // Errors: InvalidArgument for n < 0, a null input, or both outputs null.
  absl::Status Backward(const kernels::ExecContext& ctx, int64_t n, const float* hidden,
                        const float* weight, const int32_t* targets, const float* lse,
                        const float* dloss, float* d_hidden, float* d_weight);

  const ChunkedCrossEntropyConfig& config() const { return config_; }

 private:
  explicit ChunkedCrossEntropy(const ChunkedCrossEntropyConfig& config) : config_(config) {}
  // Logits: logits [rows, VP] of hidden rows [rows, h].
  void Logits(const kernels::ExecContext& ctx, int64_t rows, const float* hidden,
              const float* weight, float* logits) const;

  ChunkedCrossEntropyConfig config_;
  std::vector<float> logits_;  // [R, VP]
};

}  // namespace mxmaca::layers::cp

#endif  // MXMACA_LAYERS_CONTEXT_PARALLEL_CHUNKED_CROSS_ENTROPY_H_
