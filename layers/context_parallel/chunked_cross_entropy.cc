// layers/context_parallel/chunked_cross_entropy.cc: see chunked_cross_entropy.h.
#include "layers/context_parallel/chunked_cross_entropy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/gemm.h"
#include "layers/moe/expert_gemm.h"

namespace mxmaca::layers::cp {

absl::StatusOr<std::unique_ptr<ChunkedCrossEntropy>> ChunkedCrossEntropy::Create(
    const ChunkedCrossEntropyConfig& config) {
  if (config.hidden < 1 || config.padded_vocab < 1 || config.chunk_rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunked cross-entropy: hidden (", config.hidden, "), padded_vocab (",
        config.padded_vocab, ") and chunk_rows (", config.chunk_rows, ") must be >= 1"));
  }
  if (config.softmax_vocab < 1 || config.softmax_vocab > config.padded_vocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunked cross-entropy: softmax_vocab ", config.softmax_vocab, " is outside [1, ",
        config.padded_vocab, "] (padded_vocab)"));
  }
  std::unique_ptr<ChunkedCrossEntropy> ce(new ChunkedCrossEntropy(config));
  ce->logits_.resize(config.chunk_rows * config.padded_vocab);
  return ce;
}

void ChunkedCrossEntropy::Logits(const kernels::ExecContext& ctx, int64_t rows,
                                 const float* hidden, const float* weight,
                                 float* logits) const {
  const int64_t h = config_.hidden, vp = config_.padded_vocab;
  if (config_.row_invariant_gemm) {
    moe::BatchInvariantGemm(ctx, /*trans_b=*/true, rows, vp, h, hidden, weight, logits);
  } else {
    kernels::cpu::Gemm(ctx, false, true, rows, vp, h, 1.0f, hidden, h, weight, h, 0.0f, logits,
                       vp);
  }
}

absl::Status ChunkedCrossEntropy::Forward(const kernels::ExecContext& ctx, int64_t n,
                                          const float* hidden, const float* weight,
                                          const int32_t* targets, float* loss, float* lse) {
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunked cross-entropy: token count must be >= 0, got ", n));
  }
  if (n > 0 && (hidden == nullptr || weight == nullptr || targets == nullptr ||
                loss == nullptr || lse == nullptr)) {
    return absl::InvalidArgumentError("chunked cross-entropy: Forward got a null pointer");
  }
  const int64_t h = config_.hidden, vp = config_.padded_vocab, v = config_.softmax_vocab;
  for (int64_t r0 = 0; r0 < n; r0 += config_.chunk_rows) {
    const int64_t rows = std::min(config_.chunk_rows, n - r0);
    Logits(ctx, rows, hidden + r0 * h, weight, logits_.data());
    kernels::cpu::CrossEntropyForward(ctx, logits_.data(), targets + r0, rows, vp, v,
                                      loss + r0, lse + r0);
  }
  return absl::OkStatus();
}

absl::Status ChunkedCrossEntropy::Backward(const kernels::ExecContext& ctx, int64_t n,
                                           const float* hidden, const float* weight,
                                           const int32_t* targets, const float* lse,
                                           const float* dloss, float* d_hidden,
                                           float* d_weight) {
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunked cross-entropy: token count must be >= 0, got ", n));
  }
  if (d_hidden == nullptr && d_weight == nullptr) {
    return absl::InvalidArgumentError(
        "chunked cross-entropy: Backward needs d_hidden or d_weight (both are null)");
  }
  if (n > 0 && (hidden == nullptr || weight == nullptr || targets == nullptr ||
                lse == nullptr || dloss == nullptr)) {
    return absl::InvalidArgumentError("chunked cross-entropy: Backward got a null input");
  }
  const int64_t h = config_.hidden, vp = config_.padded_vocab, v = config_.softmax_vocab;
  float* dlogits = logits_.data();
  for (int64_t r0 = 0; r0 < n; r0 += config_.chunk_rows) {
    const int64_t rows = std::min(config_.chunk_rows, n - r0);
    Logits(ctx, rows, hidden + r0 * h, weight, dlogits);
    kernels::cpu::CrossEntropyBackward(ctx, dlogits, targets + r0, lse + r0, dloss + r0, rows,
                                       vp, v, dlogits);
    if (d_hidden != nullptr) {
      if (config_.row_invariant_gemm) {
        moe::BatchInvariantGemm(ctx, /*trans_b=*/false, rows, h, vp, dlogits, weight,
                                d_hidden + r0 * h);
      } else {
        kernels::cpu::Gemm(ctx, false, false, rows, h, vp, 1.0f, dlogits, vp, weight, h, 0.0f,
                           d_hidden + r0 * h, h);
      }
    }
    if (d_weight != nullptr) {
      kernels::cpu::Gemm(ctx, true, false, vp, h, rows, 1.0f, dlogits, vp, hidden + r0 * h, h,
                         1.0f, d_weight, h);
    }
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::layers::cp
