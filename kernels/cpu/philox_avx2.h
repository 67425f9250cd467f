// kernels/cpu/philox_avx2.h: 8-lane AVX2 evaluation of UniformAt (package-private).
//
// UniformAt8(key, index) returns UniformAt(key, index + l) for lanes l = 0..7, bit for
// bit (kernels/philox.h): the same Philox4x32-10 rounds on eight counters at once. The
// 32x32 -> 64-bit products use _mm256_mul_epu32 on the even lanes and on the odd lanes
// shifted down. Used by dropout (elementwise and attention), where the scalar Philox call
// per element dominated the kernel time.
#ifndef MXMACA_KERNELS_CPU_PHILOX_AVX2_H_
#define MXMACA_KERNELS_CPU_PHILOX_AVX2_H_

#include <immintrin.h>

#include <cstdint>

#include "kernels/exec_context.h"
#include "kernels/philox.h"

namespace mxmaca::kernels::cpu {

namespace philox_avx2_internal {

// (hi, lo) of the 64-bit products m * a for 8 lanes.
inline void MulHiLo8(__m256i a, __m256i m, __m256i* hi, __m256i* lo) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

}  // namespace philox_avx2_internal

// UniformAt8: lanes l = 0..7 hold UniformAt(key, index + l).
inline __m256 UniformAt8(RngKey key, uint64_t index) {
  using namespace philox_avx2_internal;
  const uint32_t lo_index = static_cast<uint32_t>(index);
  const uint32_t hi_index = static_cast<uint32_t>(index >> 32);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(lo_index)), lane);
  // Carry into the high word for lanes whose low word wrapped around.
  const __m256i wrapped = _mm256_cmpgt_epi32(
      _mm256_xor_si256(_mm256_set1_epi32(static_cast<int32_t>(lo_index)),
                       _mm256_set1_epi32(INT32_MIN)),
      _mm256_xor_si256(c0, _mm256_set1_epi32(INT32_MIN)));
  __m256i c1 = _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int32_t>(hi_index)), wrapped);
  __m256i c2 = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(key.stream)));
  __m256i c3 = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(key.stream >> 32)));
  uint32_t k0 = static_cast<uint32_t>(key.seed), k1 = static_cast<uint32_t>(key.seed >> 32);
  const __m256i m0 = _mm256_set1_epi32(static_cast<int32_t>(philox_internal::kMul0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int32_t>(philox_internal::kMul1));
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += philox_internal::kWeyl0;
      k1 += philox_internal::kWeyl1;
    }
    __m256i hi0, lo0, hi1, lo1;
    MulHiLo8(c0, m0, &hi0, &lo0);
    MulHiLo8(c2, m1, &hi1, &lo1);
    const __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1),
                                        _mm256_set1_epi32(static_cast<int32_t>(k0)));
    const __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3),
                                        _mm256_set1_epi32(static_cast<int32_t>(k1)));
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  // (w0 >> 8) * 2^-24: exact in fp32.
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(c0, 8)),
                       _mm256_set1_ps(1.0f / 16777216.0f));
}

// DropoutRow: dst[j] = UniformAt(key, row_base + j) >= p ? src[j] * scale : 0 for
// j in [j0, j1). dst may alias src.
inline void DropoutRow(const float* src, float* dst, int64_t j0, int64_t j1, float p,
                       float scale, RngKey key, uint64_t row_base) {
  int64_t j = j0;
  const __m256 pv = _mm256_set1_ps(p), sv = _mm256_set1_ps(scale);
  for (; j + 8 <= j1; j += 8) {
    const __m256 keep = _mm256_cmp_ps(UniformAt8(key, row_base + j), pv, _CMP_GE_OQ);
    const __m256 y = _mm256_mul_ps(_mm256_loadu_ps(src + j), sv);
    _mm256_storeu_ps(dst + j, _mm256_and_ps(y, keep));
  }
  for (; j < j1; ++j) dst[j] = UniformAt(key, row_base + j) >= p ? src[j] * scale : 0.0f;
}

// DropoutRow2: DropoutRow applied with one mask to two rows: (src_a -> dst_a) and
// (src_b -> dst_b); each dst may alias its src.
inline void DropoutRow2(const float* src_a, float* dst_a, const float* src_b, float* dst_b,
                        int64_t j0, int64_t j1, float p, float scale, RngKey key,
                        uint64_t row_base) {
  int64_t j = j0;
  const __m256 pv = _mm256_set1_ps(p), sv = _mm256_set1_ps(scale);
  for (; j + 8 <= j1; j += 8) {
    const __m256 keep = _mm256_cmp_ps(UniformAt8(key, row_base + j), pv, _CMP_GE_OQ);
    _mm256_storeu_ps(dst_a + j, _mm256_and_ps(_mm256_mul_ps(_mm256_loadu_ps(src_a + j), sv), keep));
    _mm256_storeu_ps(dst_b + j, _mm256_and_ps(_mm256_mul_ps(_mm256_loadu_ps(src_b + j), sv), keep));
  }
  for (; j < j1; ++j) {
    const bool keep = UniformAt(key, row_base + j) >= p;
    dst_a[j] = keep ? src_a[j] * scale : 0.0f;
    dst_b[j] = keep ? src_b[j] * scale : 0.0f;
  }
}

}  // namespace mxmaca::kernels::cpu

#endif  // MXMACA_KERNELS_CPU_PHILOX_AVX2_H_
