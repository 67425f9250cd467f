// kernels/cpu/vec_math.h: a vectorised fp32 exp for the softmax-like kernels
// (package-private).
//
// glibc's expf is scalar (gcc vectorises it only under -ffast-math); softmax over a
// 50k vocabulary and attention probabilities need ~10^8 exps per step, so we use the
// Cephes expf algorithm (S. L. Moshier, Cephes Math Library, expf.c): x = n ln2 + r with
// n = round(x log2 e) and a two-constant Cody-Waite reduction, exp(r) by a degree-7
// minimax polynomial, times 2^n. Max error ~2 ulp for x in [-86.5, 88]; exp(x) = 0 below
// -86.5 (true value < 2.7e-38, within 2.3x of the smallest normal) so that no result and
// no intermediate is ever denormal (denormal arithmetic costs ~100 cycles per operation
// on x86); +inf above 88 (a little early: true overflow is at 88.72; our callers only
// pass x <= 0).
// ExpScalar and the 8-lane AVX2 Exp8 perform the same operations in the same order
// without FMA, so a value's bits do not depend on whether it fell in a vector or a
// tail lane.
#ifndef MXMACA_KERNELS_CPU_VEC_MATH_H_
#define MXMACA_KERNELS_CPU_VEC_MATH_H_

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/element_math.h"

namespace mxmaca::kernels::cpu {

// The scalar functions are the ones the CUDA kernels run (kernels/element_math.h); the
// AVX2 versions below perform the same operations in the same order on 8 lanes.
using element_math::ErfcScalar;
using element_math::ExpScalar;
using element_math::kErfcZeroAbove;
using element_math::NormalCdfScalar;

namespace vec_math_internal {
using element_math::kExpC1;
using element_math::kExpC2;
using element_math::kExpHi;
using element_math::kExpLo;
using element_math::kExpP0;
using element_math::kExpP1;
using element_math::kExpP2;
using element_math::kExpP3;
using element_math::kExpP4;
using element_math::kExpP5;
using element_math::kInvSqrt2;
using element_math::kLog2e;
// Numerical Recipes' erfcc coefficients in an array for the vector loop.
inline constexpr float kErfcC[10] = {
    element_math::kErfcC0, element_math::kErfcC1, element_math::kErfcC2, element_math::kErfcC3,
    element_math::kErfcC4, element_math::kErfcC5, element_math::kErfcC6, element_math::kErfcC7,
    element_math::kErfcC8, element_math::kErfcC9};
}  // namespace vec_math_internal

// Exp8: ExpScalar on 8 lanes (AVX2).
inline __m256 Exp8(__m256 x) {
  using namespace vec_math_internal;
  const __m256 hi = _mm256_set1_ps(kExpHi);
  const __m256 lo = _mm256_set1_ps(kExpLo);
  const __m256 over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
  const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_sub_ps(xc, _mm256_mul_ps(n, _mm256_set1_ps(kExpC1)));
  r = _mm256_sub_ps(r, _mm256_mul_ps(n, _mm256_set1_ps(kExpC2)));
  const __m256 r2 = _mm256_mul_ps(r, r);
  __m256 p = _mm256_set1_ps(kExpP0);
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kExpP1));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kExpP2));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kExpP3));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kExpP4));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kExpP5));
  p = _mm256_add_ps(_mm256_mul_ps(p, r2), r);
  p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), over);
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), under);
  y = _mm256_blendv_ps(y, x, nan);
  return y;
}

// ExpShiftSum: y[i] = ExpScalar(x[i] - shift) for i < n (y may alias x); returns
// sum_i y[i] accumulated in 8 fp32 lanes combined pairwise (LaneSum's order).
inline float ExpShiftSum(const float* x, float shift, int64_t n, float* y) {
  const __m256 s = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
    if (y != nullptr) _mm256_storeu_ps(y + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  alignas(32) float lane[8];
  _mm256_store_ps(lane, acc);
  for (int l = 0; i < n; ++i, ++l) {
    const float e = ExpScalar(x[i] - shift);
    if (y != nullptr) y[i] = e;
    lane[l] += e;
  }
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
         ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// MaxOf: max_i x[i] (n >= 1). NaNs are not propagated reliably; inputs are finite.
inline float MaxOf(const float* x, int64_t n) {
  __m256 m = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
  alignas(32) float lane[8];
  _mm256_store_ps(lane, m);
  float r = lane[0];
  for (int l = 1; l < 8; ++l) r = r > lane[l] ? r : lane[l];
  for (; i < n; ++i) r = r > x[i] ? r : x[i];
  return r;
}

// ---- erfc / normal CDF ---------------------------------------------------------------
// erfc(z), z >= 0, by the Chebyshev-fitted formula of Press et al., Numerical Recipes
// (2nd ed., 6.2, erfcc): t = 1 / (1 + z/2),
//   erfc(z) = t exp(-z^2 - 1.26551223 + t (1.00002368 + t (0.37409196 + ... ))),
// relative error < 1.2e-7 for all z >= 0 (checked against math.erfc: 1.05e-7), plus fp32
// evaluation: a few ulp, growing as ~5 u z^2 in the far tail (z = 4: ~80 u) where erfc
// is tiny (< 2e-8) and its absolute error negligible for GELU.
// Used for the exact-erf GELU: glibc's erff is scalar and costs ~50 ns here.
// Erfc8: ErfcScalar on 8 lanes, same operations.
inline __m256 Erfc8(__m256 z_in) {
  using namespace vec_math_internal;
  const __m256 zero_out = _mm256_cmp_ps(z_in, _mm256_set1_ps(kErfcZeroAbove), _CMP_GT_OQ);
  const __m256 z = _mm256_min_ps(z_in, _mm256_set1_ps(kErfcZeroAbove));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 t = _mm256_div_ps(one, _mm256_add_ps(one, _mm256_mul_ps(_mm256_set1_ps(0.5f), z)));
  __m256 p = _mm256_set1_ps(kErfcC[9]);
  for (int c = 8; c >= 1; --c) p = _mm256_add_ps(_mm256_set1_ps(kErfcC[c]), _mm256_mul_ps(t, p));
  const __m256 mz2 = _mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(z, z));
  const __m256 arg = _mm256_add_ps(_mm256_add_ps(mz2, _mm256_set1_ps(kErfcC[0])),
                                   _mm256_mul_ps(t, p));
  return _mm256_andnot_ps(zero_out, _mm256_mul_ps(t, Exp8(arg)));
}

// NormalCdf8: NormalCdfScalar on 8 lanes.
inline __m256 NormalCdf8(__m256 x) {
  const __m256 absx = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
  const __m256 e = Erfc8(_mm256_mul_ps(absx, _mm256_set1_ps(vec_math_internal::kInvSqrt2)));
  const __m256 half_e = _mm256_mul_ps(_mm256_set1_ps(0.5f), e);
  const __m256 pos = _mm256_sub_ps(_mm256_set1_ps(1.0f), half_e);
  const __m256 nonneg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ);
  return _mm256_blendv_ps(half_e, pos, nonneg);
}

}  // namespace mxmaca::kernels::cpu

#endif  // MXMACA_KERNELS_CPU_VEC_MATH_H_
