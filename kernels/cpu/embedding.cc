// kernels/cpu/embedding.cc: see embedding.h.
#include "kernels/cpu/embedding.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/parallel.h"

namespace mxmaca::kernels::cpu {

void EmbeddingForward(const ExecContext& ctx, const int32_t* ids, int64_t n,
                      const float* table, int64_t h, float* out, bool accumulate) {
  ParallelForRows(ctx, n, h, [&](int64_t i) {
    const float* src = table + static_cast<int64_t>(ids[i]) * h;
    float* dst = out + i * h;
    if (accumulate) {
      for (int64_t c = 0; c < h; ++c) dst[c] += src[c];
    } else {
      std::memcpy(dst, src, h * sizeof(float));
    }
  });
}

void EmbeddingBackward(const ExecContext& ctx, const int32_t* ids, int64_t n,
                       const float* dout, int64_t h, float* dtable) {
  // Threads own disjoint column ranges of the table; each walks all tokens in order, so
  // every dtable element receives its contributions in increasing i.
  constexpr int64_t kCols = 64;
  const int64_t col_blocks = (h + kCols - 1) / kCols;
  ParallelForRows(ctx, col_blocks, n * kCols, [&](int64_t cb) {
    const int64_t c0 = cb * kCols;
    const int64_t c1 = std::min(h, c0 + kCols);
    for (int64_t i = 0; i < n; ++i) {
      float* dst = dtable + static_cast<int64_t>(ids[i]) * h;
      const float* src = dout + i * h;
      for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
    }
  });
}

void VocabShardEmbeddingForward(const ExecContext& ctx, const int32_t* ids, int64_t n,
                                const float* table, int64_t vocab_start, int64_t vocab_rows,
                                int64_t h, float* out, bool accumulate) {
  ParallelForRows(ctx, n, h, [&](int64_t i) {
    const int64_t row = static_cast<int64_t>(ids[i]) - vocab_start;
    float* dst = out + i * h;
    if (row < 0 || row >= vocab_rows) {
      if (!accumulate) std::fill(dst, dst + h, 0.0f);
      return;
    }
    const float* src = table + row * h;
    if (accumulate) {
      for (int64_t c = 0; c < h; ++c) dst[c] += src[c];
    } else {
      std::memcpy(dst, src, h * sizeof(float));
    }
  });
}

void VocabShardEmbeddingBackward(const ExecContext& ctx, const int32_t* ids, int64_t n,
                                 const float* dout, int64_t vocab_start, int64_t vocab_rows,
                                 int64_t h, float* dtable) {
  constexpr int64_t kCols = 64;
  const int64_t col_blocks = (h + kCols - 1) / kCols;
  ParallelForRows(ctx, col_blocks, n * kCols, [&](int64_t cb) {
    const int64_t c0 = cb * kCols;
    const int64_t c1 = std::min(h, c0 + kCols);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = static_cast<int64_t>(ids[i]) - vocab_start;
      if (row < 0 || row >= vocab_rows) continue;
      float* dst = dtable + row * h;
      const float* src = dout + i * h;
      for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
    }
  });
}

}  // namespace mxmaca::kernels::cpu
