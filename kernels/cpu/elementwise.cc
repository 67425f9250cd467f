// kernels/cpu/elementwise.cc: see elementwise.h.
#include "kernels/cpu/elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/philox.h"

namespace mxmaca::kernels::cpu {
namespace {

constexpr int64_t kBiasGradBlockRows = 64;
constexpr int64_t kSumSquaresBlock = 4096;

inline float Sigmoid(float g) { return 1.0f / (1.0f + std::exp(-g)); }

}  // namespace

void AddBias(const ExecContext& ctx, float* y, const float* bias, int64_t rows,
             int64_t cols) {
  ParallelForRows(ctx, rows, cols, [&](int64_t r) {
    float* yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) yr[c] += bias[c];
  });
}

void BiasGrad(const ExecContext& ctx, const float* dy, int64_t rows, int64_t cols,
              float* dbias) {
  if (rows <= 0 || cols <= 0) return;
  const int64_t blocks = (rows + kBiasGradBlockRows - 1) / kBiasGradBlockRows;
  float* partial = ThreadScratch(blocks * cols);
  ParallelForRows(ctx, blocks, kBiasGradBlockRows * cols, [&](int64_t blk) {
    float* p = partial + blk * cols;
    const int64_t r0 = blk * kBiasGradBlockRows;
    const int64_t r1 = std::min(rows, r0 + kBiasGradBlockRows);
    std::memcpy(p, dy + r0 * cols, cols * sizeof(float));
    for (int64_t r = r0 + 1; r < r1; ++r) {
      const float* dr = dy + r * cols;
      for (int64_t c = 0; c < cols; ++c) p[c] += dr[c];
    }
  });
  for (int64_t c = 0; c < cols; ++c) {
    float s = partial[c];
    for (int64_t blk = 1; blk < blocks; ++blk) s += partial[blk * cols + c];
    dbias[c] += s;
  }
}

void Add(const ExecContext& ctx, const float* a, const float* b, float* out, int64_t n) {
  ParallelForRange(ctx, n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
  });
}

void Scale(const ExecContext& ctx, float* x, int64_t n, float s) {
  ParallelForRange(ctx, n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) x[i] *= s;
  });
}

double SumSquares(const ExecContext& ctx, const float* x, int64_t n) {
  if (n <= 0) return 0.0;
  const int64_t blocks = (n + kSumSquaresBlock - 1) / kSumSquaresBlock;
  thread_local std::vector<double> partial;
  partial.assign(blocks, 0.0);
  double* p = partial.data();
  ParallelForRows(ctx, blocks, kSumSquaresBlock, [&](int64_t blk) {
    const int64_t i0 = blk * kSumSquaresBlock;
    const int64_t i1 = std::min(n, i0 + kSumSquaresBlock);
    double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8) {
      for (int l = 0; l < 8; ++l) {
        const double v = x[i + l];
        lane[l] += v * v;
      }
    }
    for (; i < i1; ++i) {
      const double v = x[i];
      lane[(i - i0) & 7] += v * v;
    }
    p[blk] = ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
             ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  });
  double s = 0.0;
  for (int64_t blk = 0; blk < blocks; ++blk) s += p[blk];
  return s;
}

void GeluForward(const ExecContext& ctx, const float* x, float* y, int64_t n) {
  constexpr float kInvSqrt2 = 0.70710678118654752440f;
  ParallelForRange(ctx, n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float v = x[i];
      y[i] = 0.5f * v * (1.0f + std::erf(v * kInvSqrt2));
    }
  });
}

void GeluBackward(const ExecContext& ctx, const float* x, const float* dy, float* dx,
                  int64_t n) {
  constexpr float kInvSqrt2 = 0.70710678118654752440f;
  constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
  ParallelForRange(ctx, n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float v = x[i];
      const float cdf = 0.5f * (1.0f + std::erf(v * kInvSqrt2));
      const float pdf = kInvSqrt2Pi * std::exp(-0.5f * v * v);
      dx[i] = dy[i] * (cdf + v * pdf);
    }
  });
}

void SwigluForward(const ExecContext& ctx, const float* x, float* y, int64_t rows,
                   int64_t f) {
  ParallelForRows(ctx, rows, 2 * f, [&](int64_t r) {
    const float* gate = x + r * 2 * f;
    const float* up = gate + f;
    float* yr = y + r * f;
    for (int64_t c = 0; c < f; ++c) {
      const float g = gate[c];
      yr[c] = g * Sigmoid(g) * up[c];
    }
  });
}

void SwigluBackward(const ExecContext& ctx, const float* x, const float* dy, float* dx,
                    int64_t rows, int64_t f) {
  ParallelForRows(ctx, rows, 2 * f, [&](int64_t r) {
    const float* gate = x + r * 2 * f;
    const float* up = gate + f;
    const float* dyr = dy + r * f;
    float* dgate = dx + r * 2 * f;
    float* dup = dgate + f;
    for (int64_t c = 0; c < f; ++c) {
      const float g = gate[c];
      const float s = Sigmoid(g);
      const float silu = g * s;
      dgate[c] = dyr[c] * up[c] * (s * (1.0f + g * (1.0f - s)));
      dup[c] = dyr[c] * silu;
    }
  });
}

void DropoutForward(const ExecContext& ctx, const float* x, float* y, int64_t n, float p,
                    RngKey key, int64_t index_offset) {
  if (p == 0.0f) {
    if (y != x) {
      ParallelForRange(ctx, n, [&](int64_t begin, int64_t end) {
        std::memcpy(y + begin, x + begin, (end - begin) * sizeof(float));
      });
    }
    return;
  }
  const float scale = 1.0f / (1.0f - p);
  ParallelForRange(ctx, n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const bool keep = UniformAt(key, static_cast<uint64_t>(index_offset + i)) >= p;
      y[i] = keep ? x[i] * scale : 0.0f;
    }
  });
}

void DropoutBackward(const ExecContext& ctx, const float* dy, float* dx, int64_t n,
                     float p, RngKey key, int64_t index_offset) {
  DropoutForward(ctx, dy, dx, n, p, key, index_offset);
}

}  // namespace mxmaca::kernels::cpu
