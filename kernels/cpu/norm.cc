// kernels/cpu/norm.cc: see norm.h.
#include "kernels/cpu/norm.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/parallel.h"

namespace mxmaca::kernels::cpu {
namespace {

// Weight gradients: rows are reduced in fixed blocks of this many rows (row order inside
// a block), then blocks in order — independent of the thread count.
constexpr int64_t kWeightGradBlockRows = 64;

// Shared skeleton of the weight-gradient reductions: for each block of rows,
// partial[c] = sum_r term(r, c) (and partial2 for dbeta when two outputs), then
// out[c] += sum_blocks partial[blk][c] in block order.
template <typename Term>
void BlockedColumnReduce(const ExecContext& ctx, int64_t n, int64_t h, int outputs,
                         Term term, float* out0, float* out1) {
  if (n <= 0 || h <= 0) return;
  const int64_t blocks = (n + kWeightGradBlockRows - 1) / kWeightGradBlockRows;
  float* partial = ThreadScratch(blocks * h * outputs);
  ParallelForRows(ctx, blocks, kWeightGradBlockRows * h, [&](int64_t blk) {
    float* p0 = partial + blk * h * outputs;
    float* p1 = p0 + h;
    std::fill(p0, p0 + h * outputs, 0.0f);
    const int64_t r1 = std::min(n, (blk + 1) * kWeightGradBlockRows);
    for (int64_t r = blk * kWeightGradBlockRows; r < r1; ++r) term(r, p0, p1);
  });
  for (int o = 0; o < outputs; ++o) {
    float* out = o == 0 ? out0 : out1;
    for (int64_t c = 0; c < h; ++c) {
      float s = partial[o * h + c];
      for (int64_t blk = 1; blk < blocks; ++blk) s += partial[(blk * outputs + o) * h + c];
      out[c] += s;
    }
  }
}

}  // namespace

void LayerNormForward(const ExecContext& ctx, const float* x, const float* gamma,
                      const float* beta, float eps, int64_t n, int64_t h, float* y,
                      float* mean, float* rstd) {
  const float inv_h = 1.0f / static_cast<float>(h);
  ParallelForRows(ctx, n, h, [&](int64_t r) {
    const float* xr = x + r * h;
    float* yr = y + r * h;
    const float mu = LaneSum(h, [&](int64_t c) { return xr[c]; }) * inv_h;
    const float var = LaneSum(h, [&](int64_t c) {
                        const float d = xr[c] - mu;
                        return d * d;
                      }) * inv_h;
    const float rs = 1.0f / std::sqrt(var + eps);
    mean[r] = mu;
    rstd[r] = rs;
    if (beta != nullptr) {
      for (int64_t c = 0; c < h; ++c) yr[c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
    } else {
      for (int64_t c = 0; c < h; ++c) yr[c] = (xr[c] - mu) * rs * gamma[c];
    }
  });
}

void LayerNormBackwardInput(const ExecContext& ctx, const float* dy, const float* x,
                            const float* gamma, const float* mean, const float* rstd,
                            int64_t n, int64_t h, float* dx) {
  const float inv_h = 1.0f / static_cast<float>(h);
  ParallelForRows(ctx, n, h, [&](int64_t r) {
    const float* xr = x + r * h;
    const float* dyr = dy + r * h;
    float* dxr = dx + r * h;
    const float mu = mean[r], rs = rstd[r];
    const float mean_g = LaneSum(h, [&](int64_t c) { return dyr[c] * gamma[c]; }) * inv_h;
    const float mean_gx =
        LaneSum(h, [&](int64_t c) { return dyr[c] * gamma[c] * ((xr[c] - mu) * rs); }) * inv_h;
    for (int64_t c = 0; c < h; ++c) {
      const float xhat = (xr[c] - mu) * rs;
      dxr[c] = rs * (dyr[c] * gamma[c] - mean_g - xhat * mean_gx);
    }
  });
}

void LayerNormBackwardWeight(const ExecContext& ctx, const float* dy, const float* x,
                             const float* mean, const float* rstd, int64_t n, int64_t h,
                             float* dgamma, float* dbeta) {
  BlockedColumnReduce(
      ctx, n, h, dbeta != nullptr ? 2 : 1,
      [&](int64_t r, float* pg, float* pb) {
        const float* xr = x + r * h;
        const float* dyr = dy + r * h;
        const float mu = mean[r], rs = rstd[r];
        for (int64_t c = 0; c < h; ++c) pg[c] += dyr[c] * ((xr[c] - mu) * rs);
        if (dbeta != nullptr) {
          for (int64_t c = 0; c < h; ++c) pb[c] += dyr[c];
        }
      },
      dgamma, dbeta);
}

void RmsNormForward(const ExecContext& ctx, const float* x, const float* gamma, float eps,
                    int64_t n, int64_t h, float* y, float* rstd) {
  const float inv_h = 1.0f / static_cast<float>(h);
  ParallelForRows(ctx, n, h, [&](int64_t r) {
    const float* xr = x + r * h;
    float* yr = y + r * h;
    const float ms = LaneSum(h, [&](int64_t c) { return xr[c] * xr[c]; }) * inv_h;
    const float rs = 1.0f / std::sqrt(ms + eps);
    rstd[r] = rs;
    for (int64_t c = 0; c < h; ++c) yr[c] = xr[c] * rs * gamma[c];
  });
}

void RmsNormBackwardInput(const ExecContext& ctx, const float* dy, const float* x,
                          const float* gamma, const float* rstd, int64_t n, int64_t h,
                          float* dx) {
  const float inv_h = 1.0f / static_cast<float>(h);
  ParallelForRows(ctx, n, h, [&](int64_t r) {
    const float* xr = x + r * h;
    const float* dyr = dy + r * h;
    float* dxr = dx + r * h;
    const float rs = rstd[r];
    const float mean_gx =
        LaneSum(h, [&](int64_t c) { return dyr[c] * gamma[c] * (xr[c] * rs); }) * inv_h;
    for (int64_t c = 0; c < h; ++c) {
      dxr[c] = rs * (dyr[c] * gamma[c] - (xr[c] * rs) * mean_gx);
    }
  });
}

void RmsNormBackwardWeight(const ExecContext& ctx, const float* dy, const float* x,
                           const float* rstd, int64_t n, int64_t h, float* dgamma) {
  BlockedColumnReduce(
      ctx, n, h, 1,
      [&](int64_t r, float* pg, float*) {
        const float* xr = x + r * h;
        const float* dyr = dy + r * h;
        const float rs = rstd[r];
        for (int64_t c = 0; c < h; ++c) pg[c] += dyr[c] * (xr[c] * rs);
      },
      dgamma, nullptr);
}

}  // namespace mxmaca::kernels::cpu
