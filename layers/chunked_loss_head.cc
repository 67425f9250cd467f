// layers/chunked_loss_head.cc: see chunked_loss_head.h.
#include "layers/chunked_loss_head.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/gemm.h"

namespace mxmaca::layers {

namespace cpu = ::mxmaca::kernels::cpu;

absl::Status VocabParallelCrossEntropyForward(const kernels::ExecContext& ctx,
                                              const TensorParallelContext& tp,
                                              const VocabShard& vocab, const float* logits,
                                              int64_t n, const int32_t* labels, float* loss,
                                              float* lse) {
  const int64_t vl = vocab.rows, p = tp.size;
  if (p == 1) {
    // vocab.softmax: V (masked padding, the default) or VP (softmax_over_padded_vocab).
    cpu::CrossEntropyForward(ctx, logits, labels, n, vl, vocab.softmax, loss, lse);
    return absl::OkStatus();
  }
  // The shard's first vocab.softmax columns enter: its real rows by default (a padding-only
  // shard adds -inf / 0), all its rows with softmax_over_padded_vocab (Megatron's
  // numerics). The communicator has no max reduction: all-gather of the shard maxima.
  std::vector<float> local_max(n), maxima(p * n), sum_exp(n), target(n, 0.0f);
  cpu::CrossEntropyRowMax(ctx, logits, n, vl, vocab.softmax, local_max.data());
  MXMACA_RETURN_IF_ERROR(AllGather(tp, local_max.data(), maxima.data(), n));
  for (int64_t i = 0; i < n; ++i) {
    float m = maxima[i];
    for (int64_t r = 1; r < p; ++r) m = std::max(m, maxima[r * n + i]);
    local_max[i] = m;
  }
  cpu::CrossEntropySumExp(ctx, logits, local_max.data(), n, vl, vocab.softmax, sum_exp.data());
  MXMACA_RETURN_IF_ERROR(AllReduceSum(tp, sum_exp.data(), n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = labels[i] - vocab.start;
    if (c >= 0 && c < vocab.real) target[i] = logits[i * vl + c];
  }
  MXMACA_RETURN_IF_ERROR(AllReduceSum(tp, target.data(), n));
  for (int64_t i = 0; i < n; ++i) {
    lse[i] = local_max[i] + std::log(sum_exp[i]);
    loss[i] = lse[i] - target[i];
  }
  return absl::OkStatus();
}

namespace {

absl::Status CheckChunking(int64_t chunk_rows, int64_t t) {
  if (chunk_rows < 1 || t < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunked loss head: chunk_rows ", chunk_rows, " and tokens ", t,
        ", expected chunk_rows >= 1 and tokens >= 0 (GptConfig::loss_chunk_tokens)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ChunkedLossHeadForward(const kernels::ExecContext& ctx,
                                    const TensorParallelContext& tp, const VocabShard& vocab,
                                    int64_t chunk_rows, int64_t t, int64_t h, const float* x,
                                    const float* w, const int32_t* labels, float* loss,
                                    float* lse, MemoryTracker* tracker) {
  MXMACA_RETURN_IF_ERROR(CheckChunking(chunk_rows, t));
  const int64_t vl = vocab.rows;
  StashBuffer<float> logits;
  logits.Allocate(tracker, std::min(chunk_rows, t) * vl);
  for (int64_t r0 = 0; r0 < t; r0 += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, t - r0);
    cpu::Gemm(ctx, false, true, rows, vl, h, 1.0f, x + r0 * h, h, w, h, 0.0f, logits.data(), vl);
    MXMACA_RETURN_IF_ERROR(VocabParallelCrossEntropyForward(ctx, tp, vocab, logits.data(), rows,
                                                            labels + r0, loss + r0, lse + r0));
  }
  return absl::OkStatus();
}

absl::Status ChunkedLossHeadBackward(const kernels::ExecContext& ctx,
                                     const TensorParallelContext& tp, const VocabShard& vocab,
                                     int64_t chunk_rows, int64_t t, int64_t h, const float* x,
                                     const float* w, const int32_t* labels, const float* lse,
                                     const float* dloss, float* d_x, float* d_w,
                                     MemoryTracker* tracker) {
  MXMACA_RETURN_IF_ERROR(CheckChunking(chunk_rows, t));
  if (d_x == nullptr && d_w == nullptr) {
    return absl::InvalidArgumentError(
        "chunked loss head: Backward needs d_x or d_w (both are null)");
  }
  const int64_t vl = vocab.rows;
  if (t == 0) {
    if (d_w != nullptr) std::fill(d_w, d_w + vl * h, 0.0f);
    return absl::OkStatus();
  }
  StashBuffer<float> dlogits;
  dlogits.Allocate(tracker, std::min(chunk_rows, t) * vl);
  std::vector<int32_t> local_targets;
  for (int64_t r0 = 0; r0 < t; r0 += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, t - r0);
    cpu::Gemm(ctx, false, true, rows, vl, h, 1.0f, x + r0 * h, h, w, h, 0.0f, dlogits.data(),
              vl);
    const int32_t* targets = labels + r0;
    if (tp.size > 1) {
      // Shard-local targets (-1: not in this shard) with the global logsumexp: exactly the
      // vocab-parallel gradient (cross_entropy.h).
      local_targets.resize(rows);
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t c = targets[i] - vocab.start;
        local_targets[i] = c >= 0 && c < vocab.real ? static_cast<int32_t>(c) : -1;
      }
      targets = local_targets.data();
    }
    cpu::CrossEntropyBackward(ctx, dlogits.data(), targets, lse + r0, dloss + r0, rows, vl,
                              vocab.softmax, dlogits.data());
    if (d_x != nullptr) {
      cpu::Gemm(ctx, false, false, rows, h, vl, 1.0f, dlogits.data(), vl, w, h, 0.0f,
                d_x + r0 * h, h);
    }
    if (d_w != nullptr) {
      cpu::Gemm(ctx, true, false, vl, h, rows, 1.0f, dlogits.data(), vl, x + r0 * h, h,
                r0 == 0 ? 0.0f : 1.0f, d_w, h);
    }
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::layers
