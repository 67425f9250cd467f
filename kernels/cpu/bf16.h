// kernels/cpu/bf16.h: fp32 <-> bfloat16 conversion (bits in uint16_t).
//
// bfloat16 = the upper 16 bits of an IEEE-754 binary32 (1 sign, 8 exponent, 7 mantissa
// bits; Kalamkar et al., "A Study of BFLOAT16 for Deep Learning Training", 2019).
// Rounding is round-to-nearest-even as torch's `tensor.to(torch.bfloat16)` and oneDNN's
// reorders do; NaNs stay (quiet) NaNs. Relative rounding error <= 2^-8.
#ifndef MXMACA_KERNELS_CPU_BF16_H_
#define MXMACA_KERNELS_CPU_BF16_H_

#include <cstdint>
#include <cstring>

namespace mxmaca::kernels::cpu {

// FloatToBf16: x rounded to the nearest bf16 (ties to even); NaN -> quiet NaN.
inline uint16_t FloatToBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0) {
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  }
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// Bf16ToFloat: the exact fp32 value of a bf16.
inline float Bf16ToFloat(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

// RoundToBf16: x rounded to bf16 and back to fp32 (the value a bf16 GEMM sees).
inline float RoundToBf16(float x) { return Bf16ToFloat(FloatToBf16(x)); }

}  // namespace mxmaca::kernels::cpu

#endif  // MXMACA_KERNELS_CPU_BF16_H_
