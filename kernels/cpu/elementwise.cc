// kernels/cpu/elementwise.cc: see elementwise.h.
#include "kernels/cpu/elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <immintrin.h>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/philox_avx2.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/element_math.h"
#include "kernels/philox.h"

namespace mxmaca::kernels::cpu {
namespace {

constexpr int64_t kBiasGradBlockRows = 64;
constexpr int64_t kSumSquaresBlock = 4096;

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

void AddScalar(const ExecContext& ctx, const float* x, float c, float* y, int64_t n) {
  ParallelForRange(ctx, n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = x[i] + c;
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

// GELU and SwiGLU evaluate 8 lanes with AVX2 (vec_math.h) and the tail with the
// scalar twin of the same operations, so every element's bits are independent of where
// it falls.

namespace {

using element_math::GeluGradScalar;
using element_math::GeluScalar;
using element_math::kGeluCubic;
using element_math::kInvSqrt2Pi;
using element_math::kSqrt2OverPi;
using element_math::SwigluGradScalar;
using element_math::SwigluScalar;
using element_math::TanhGeluGradScalar;
using element_math::TanhGeluScalar;

inline __m256 Gelu8(__m256 x) { return _mm256_mul_ps(x, NormalCdf8(x)); }

// gelu'(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi); GeluGradScalar's
// operations (element_math.h).
inline __m256 GeluGrad8(__m256 x) {
  const __m256 e = Exp8(_mm256_mul_ps(_mm256_set1_ps(-0.5f), _mm256_mul_ps(x, x)));
  return _mm256_add_ps(NormalCdf8(x), _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(kInvSqrt2Pi)), e));
}

// Tanh GELU on 8 lanes: TanhGeluScalar's operations (element_math.h).
inline void TanhGelu8(__m256 x, __m256* s, __m256* one_minus_s) {
  const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  const __m256 u = _mm256_mul_ps(_mm256_set1_ps(kSqrt2OverPi),
                                 _mm256_add_ps(x, _mm256_mul_ps(_mm256_set1_ps(kGeluCubic), x3)));
  const __m256 absu = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), u);
  const __m256 e = Exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f), absu));
  const __m256 r = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  const __m256 er = _mm256_mul_ps(e, r);
  const __m256 nonneg = _mm256_cmp_ps(u, _mm256_setzero_ps(), _CMP_GE_OQ);
  *s = _mm256_blendv_ps(er, r, nonneg);
  *one_minus_s = _mm256_blendv_ps(r, er, nonneg);
}

// TanhGeluGradScalar's operations on 8 lanes.
inline __m256 TanhGeluGrad8(__m256 x) {
  __m256 s, oms;
  TanhGelu8(x, &s, &oms);
  const __m256 du = _mm256_mul_ps(
      _mm256_set1_ps(kSqrt2OverPi),
      _mm256_add_ps(_mm256_set1_ps(1.0f),
                    _mm256_mul_ps(_mm256_set1_ps(3.0f * kGeluCubic), _mm256_mul_ps(x, x))));
  const __m256 big = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(2.0f), x), du);
  return _mm256_add_ps(s, _mm256_mul_ps(big, _mm256_mul_ps(s, oms)));
}

inline __m256 Sigmoid8(__m256 g) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, Exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
}

}  // namespace

void GeluForward(const ExecContext& ctx, const float* x, float* y, int64_t n) {
  ParallelForRange(ctx, n, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) _mm256_storeu_ps(y + i, Gelu8(_mm256_loadu_ps(x + i)));
    for (; i < end; ++i) y[i] = GeluScalar(x[i]);
  });
}

void GeluBackward(const ExecContext& ctx, const float* x, const float* dy, float* dx,
                  int64_t n) {
  ParallelForRange(ctx, n, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
      _mm256_storeu_ps(dx + i, _mm256_mul_ps(_mm256_loadu_ps(dy + i),
                                             GeluGrad8(_mm256_loadu_ps(x + i))));
    }
    for (; i < end; ++i) dx[i] = dy[i] * GeluGradScalar(x[i]);
  });
}

void GeluTanhForward(const ExecContext& ctx, const float* x, float* y, int64_t n) {
  ParallelForRange(ctx, n, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
      const __m256 v = _mm256_loadu_ps(x + i);
      __m256 s, oms;
      TanhGelu8(v, &s, &oms);
      _mm256_storeu_ps(y + i, _mm256_mul_ps(v, s));
    }
    for (; i < end; ++i) y[i] = x[i] * TanhGeluScalar(x[i]).s;
  });
}

void GeluTanhBackward(const ExecContext& ctx, const float* x, const float* dy, float* dx,
                      int64_t n) {
  ParallelForRange(ctx, n, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
      _mm256_storeu_ps(dx + i, _mm256_mul_ps(_mm256_loadu_ps(dy + i),
                                             TanhGeluGrad8(_mm256_loadu_ps(x + i))));
    }
    for (; i < end; ++i) dx[i] = dy[i] * TanhGeluGradScalar(x[i]);
  });
}

void SwigluForward(const ExecContext& ctx, const float* x, float* y, int64_t rows,
                   int64_t f) {
  ParallelForRows(ctx, rows, 2 * f, [&](int64_t r) {
    const float* gate = x + r * 2 * f;
    const float* up = gate + f;
    float* yr = y + r * f;
    int64_t c = 0;
    for (; c + 8 <= f; c += 8) {
      const __m256 g = _mm256_loadu_ps(gate + c);
      _mm256_storeu_ps(yr + c, _mm256_mul_ps(_mm256_mul_ps(g, Sigmoid8(g)),
                                             _mm256_loadu_ps(up + c)));
    }
    for (; c < f; ++c) yr[c] = SwigluScalar(gate[c], up[c]);
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
    int64_t c = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; c + 8 <= f; c += 8) {
      const __m256 g = _mm256_loadu_ps(gate + c);
      const __m256 s = Sigmoid8(g);
      const __m256 d = _mm256_loadu_ps(dyr + c);
      // dgate = dy * up * (s * (1 + g * (1 - s))); dup = dy * (g * s)
      const __m256 ds = _mm256_mul_ps(s, _mm256_add_ps(one, _mm256_mul_ps(g, _mm256_sub_ps(one, s))));
      _mm256_storeu_ps(dgate + c, _mm256_mul_ps(_mm256_mul_ps(d, _mm256_loadu_ps(up + c)), ds));
      _mm256_storeu_ps(dup + c, _mm256_mul_ps(d, _mm256_mul_ps(g, s)));
    }
    for (; c < f; ++c) {
      const element_math::SwigluGrad g = SwigluGradScalar(gate[c], up[c], dyr[c]);
      dgate[c] = g.dgate;
      dup[c] = g.dup;
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
    DropoutRow(x, y, begin, end, p, scale, key, static_cast<uint64_t>(index_offset));
  });
}

void DropoutBackward(const ExecContext& ctx, const float* dy, float* dx, int64_t n,
                     float p, RngKey key, int64_t index_offset) {
  DropoutForward(ctx, dy, dx, n, p, key, index_offset);
}

}  // namespace mxmaca::kernels::cpu
