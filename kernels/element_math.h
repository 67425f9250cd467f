// kernels/element_math.h: the per-element arithmetic that the CPU and the CUDA kernels
// share, as __host__ __device__ functions (header-only, no dependencies).
//
// Why: a CUDA kernel and its CPU twin that compute an element with the same function give
// the same bits (both are compiled without contraction: the CPU with -ffp-contract=off,
// the .cu files that include this with nvcc -fmad=false), so CI, which has no GPU, runs the
// arithmetic the GPU will run whenever it runs the CPU kernels. The CPU kernels evaluate 8
// lanes with AVX2 (kernels/cpu/vec_math.h, elementwise.cc) using the same operations in the
// same order as these scalar functions, and fall back to these for tail elements; their
// tests check vector lanes against these functions bit for bit.
//
// Contents (all fp32 in, fp32 out, x any finite or non-finite float unless noted):
//   ExpScalar        exp(x), Cephes expf (S. L. Moshier, Cephes Math Library, expf.c):
//                    x = n ln2 + r, two-constant Cody-Waite reduction, degree-7 minimax
//                    polynomial, times 2^n; ~2 ulp on [-86.5, 88]; 0 below -86.5 (never a
//                    denormal), +inf above 88, NaN in -> NaN out.
//   ErfcScalar       erfc(z) for z >= 0 (Numerical Recipes 2nd ed. 6.2, erfcc; relative
//                    error < 1.2e-7), 0 above 9.
//   NormalCdfScalar  Phi(x) = 0.5 erfc(-x / sqrt 2).
//   GeluScalar / GeluGradScalar            exact GELU x Phi(x) and its derivative.
//   TanhGeluScalar / TanhGeluGradScalar    GELU with the tanh approximation (Megatron's
//                    fused bias-GELU, megatron/core/fusions/fused_bias_gelu.py): x s(2u),
//                    u = sqrt(2/pi) (x + 0.044715 x^3).
//   SigmoidScalar    1 / (1 + exp(-g)).
//   SwigluScalar / SwigluGradScalar        silu(gate) * up and its two partial derivatives.
//   AdamWCoefficients / AdamWElement        torch 1.13 _single_tensor_adamw, one element.
//   DropoutElement   keep-or-zero with the inverted-dropout scale, given the element's
//                    uniform draw (kernels/philox.h UniformAt).
#ifndef MXMACA_KERNELS_ELEMENT_MATH_H_
#define MXMACA_KERNELS_ELEMENT_MATH_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/host_device.h"

namespace mxmaca::kernels::element_math {

// Constants of ExpScalar (Cephes expf).
inline constexpr float kExpHi = 88.0f;   // keeps n <= 127 (2^n finite)
inline constexpr float kExpLo = -86.5f;  // result >= 1.4 * 2^-126: never denormal
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kExpC1 = 0.693359375f;
inline constexpr float kExpC2 = -2.12194440e-4f;
inline constexpr float kExpP0 = 1.9875691500e-4f;
inline constexpr float kExpP1 = 1.3981999507e-3f;
inline constexpr float kExpP2 = 8.3334519073e-3f;
inline constexpr float kExpP3 = 4.1665795894e-2f;
inline constexpr float kExpP4 = 1.6666665459e-1f;
inline constexpr float kExpP5 = 5.0000001201e-1f;

// Coefficients of ErfcScalar (Numerical Recipes' erfcc), highest index innermost.
inline constexpr float kErfcC0 = -1.26551223f;
inline constexpr float kErfcC1 = 1.00002368f;
inline constexpr float kErfcC2 = 0.37409196f;
inline constexpr float kErfcC3 = 0.09678418f;
inline constexpr float kErfcC4 = -0.18628806f;
inline constexpr float kErfcC5 = 0.27886807f;
inline constexpr float kErfcC6 = -1.13520398f;
inline constexpr float kErfcC7 = 1.48851587f;
inline constexpr float kErfcC8 = -0.82215223f;
inline constexpr float kErfcC9 = 0.17087277f;
// erfc(z) is returned as 0 for z > kErfcZeroAbove (erfc(9) = 4.1e-37): keeps the product
// t * exp(...) away from denormals.
inline constexpr float kErfcZeroAbove = 9.0f;

inline constexpr float kInvSqrt2 = 0.70710678118654752440f;
inline constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
inline constexpr float kSqrt2OverPi = 0.79788456080286535588f;
inline constexpr float kGeluCubic = 0.044715f;

// BitsToFloat: the float whose IEEE-754 bits are `bits`.
MXMACA_HOST_DEVICE float BitsToFloat(int32_t bits) {
#if defined(__CUDA_ARCH__)
  return __int_as_float(bits);
#else
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
#endif
}

// ExpScalar: exp(x), see the banner. nearbyintf rounds half to even (the default mode on
// the host; CUDA's nearbyintf always does).
MXMACA_HOST_DEVICE float ExpScalar(float x) {
  if (x != x) return x;  // NaN
  if (x > kExpHi) return INFINITY;
  if (x < kExpLo) return 0.0f;
  const float n = nearbyintf(x * kLog2e);
  float r = x - n * kExpC1;
  r = r - n * kExpC2;
  const float r2 = r * r;
  float p = kExpP0;
  p = p * r + kExpP1;
  p = p * r + kExpP2;
  p = p * r + kExpP3;
  p = p * r + kExpP4;
  p = p * r + kExpP5;
  p = p * r2 + r;
  p = p + 1.0f;
  return p * BitsToFloat((static_cast<int32_t>(n) + 127) << 23);
}

// ErfcScalar: erfc(z) for z >= 0, see the banner.
MXMACA_HOST_DEVICE float ErfcScalar(float z) {
  if (z > kErfcZeroAbove) return 0.0f;
  const float t = 1.0f / (1.0f + 0.5f * z);
  float p = kErfcC9;
  p = kErfcC8 + t * p;
  p = kErfcC7 + t * p;
  p = kErfcC6 + t * p;
  p = kErfcC5 + t * p;
  p = kErfcC4 + t * p;
  p = kErfcC3 + t * p;
  p = kErfcC2 + t * p;
  p = kErfcC1 + t * p;
  const float arg = (-(z * z) + kErfcC0) + t * p;
  return t * ExpScalar(arg);
}

// NormalCdfScalar: Phi(x) = 0.5 erfc(-x / sqrt 2) = 0.5 (1 + erf(x / sqrt 2)).
MXMACA_HOST_DEVICE float NormalCdfScalar(float x) {
  const float e = ErfcScalar(fabsf(x) * kInvSqrt2);
  return x >= 0.0f ? 1.0f - 0.5f * e : 0.5f * e;
}

// GeluScalar: exact GELU, x Phi(x).
MXMACA_HOST_DEVICE float GeluScalar(float x) { return x * NormalCdfScalar(x); }

// GeluGradScalar: gelu'(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi). The
// small exp factor is multiplied last so that no intermediate becomes denormal.
MXMACA_HOST_DEVICE float GeluGradScalar(float x) {
  return NormalCdfScalar(x) + (x * kInvSqrt2Pi) * ExpScalar(-0.5f * (x * x));
}

// TanhGeluParts: s = sigmoid(2u) and 1 - s, each computed without cancellation.
struct TanhGeluParts {
  float s, one_minus_s;
};

// TanhGeluScalar: u = k (x + c x^3) in torch's operation order; e = exp(-2|u|) in (0, 1];
// with r = 1 / (1 + e): s = u >= 0 ? r : e r and 1 - s = u >= 0 ? e r : r. GELU = x s.
MXMACA_HOST_DEVICE TanhGeluParts TanhGeluScalar(float x) {
  const float u = kSqrt2OverPi * (x + kGeluCubic * (x * x * x));
  const float e = ExpScalar(-2.0f * fabsf(u));
  const float r = 1.0f / (1.0f + e);
  const float er = e * r;
  return u >= 0.0f ? TanhGeluParts{r, er} : TanhGeluParts{er, r};
}

// TanhGeluGradScalar: d/dx [x s(2u)] = s + (2 x u') s (1 - s); the large factor 2 x u' is
// formed first so the product never passes through a denormal.
MXMACA_HOST_DEVICE float TanhGeluGradScalar(float x) {
  const TanhGeluParts p = TanhGeluScalar(x);
  const float du = kSqrt2OverPi * (1.0f + (3.0f * kGeluCubic) * (x * x));
  return p.s + ((2.0f * x) * du) * (p.s * p.one_minus_s);
}

// SigmoidScalar: 1 / (1 + exp(-g)); exp overflow gives 1 / inf = 0.
MXMACA_HOST_DEVICE float SigmoidScalar(float g) { return 1.0f / (1.0f + ExpScalar(-g)); }

// SwigluScalar: SwiGLU's output for one (gate, up) pair: silu(gate) * up.
MXMACA_HOST_DEVICE float SwigluScalar(float gate, float up) {
  return gate * SigmoidScalar(gate) * up;
}

// SwigluGrad: the gradients of one (gate, up) pair given dy:
// dgate = dy * up * (s (1 + g (1 - s))), dup = dy * (g s), s = sigmoid(g).
struct SwigluGrad {
  float dgate, dup;
};
MXMACA_HOST_DEVICE SwigluGrad SwigluGradScalar(float gate, float up, float dy) {
  const float s = SigmoidScalar(gate);
  return SwigluGrad{dy * up * (s * (1.0f + gate * (1.0f - s))), dy * (gate * s)};
}

// AdamWCoefficients: the per-step scalars of torch 1.13's _single_tensor_adamw, computed
// in double on the host (torch computes them from Python floats) and rounded to fp32
// where they meet fp32 tensors. step >= 1 (the step count after this update).
struct AdamWCoefficients {
  float decay;          // 1 - lr * weight_decay
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float bias_correction2_sqrt;  // sqrt(1 - beta2^step)
  float eps;
  float neg_step_size;  // -lr / (1 - beta1^step)
};

// MakeAdamWCoefficients: host only (std::pow in double).
inline AdamWCoefficients MakeAdamWCoefficients(float lr, float beta1, float beta2, float eps,
                                               float weight_decay, int64_t step) {
  const double lr_d = lr, b1 = beta1, b2 = beta2;
  AdamWCoefficients c;
  c.decay = static_cast<float>(1.0 - lr_d * static_cast<double>(weight_decay));
  c.beta1 = beta1;
  c.one_minus_beta1 = static_cast<float>(1.0 - b1);
  c.beta2 = beta2;
  c.one_minus_beta2 = static_cast<float>(1.0 - b2);
  const double bias_correction1 = 1.0 - pow(b1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - pow(b2, static_cast<double>(step));
  c.bias_correction2_sqrt = static_cast<float>(sqrt(bias_correction2));
  c.eps = eps;
  c.neg_step_size = static_cast<float>(-(lr_d / bias_correction1));
  return c;
}

// AdamWElement: one element's AdamW update in torch's operation order:
// param.mul_(1 - lr wd); exp_avg.mul_(b1).add_(g, 1 - b1); exp_avg_sq.mul_(b2).addcmul_(g,
// g, 1 - b2); denom = sqrt(exp_avg_sq) / bc2_sqrt + eps; param.addcdiv_(exp_avg, denom,
// -step_size). sqrtf is correctly rounded on both sides (IEEE; nvcc -prec-sqrt=true).
MXMACA_HOST_DEVICE void AdamWElement(const AdamWCoefficients& c, float grad, float* param,
                                     float* exp_avg, float* exp_avg_sq) {
  float p = *param * c.decay;
  const float m = *exp_avg * c.beta1 + c.one_minus_beta1 * grad;
  const float v = *exp_avg_sq * c.beta2 + c.one_minus_beta2 * grad * grad;
  const float denom = sqrtf(v) / c.bias_correction2_sqrt + c.eps;
  p = p + c.neg_step_size * m / denom;
  *param = p;
  *exp_avg = m;
  *exp_avg_sq = v;
}

// DropoutElement: inverted dropout of one element: x * scale if its uniform draw
// (UniformAt(key, global index), in [0, 1)) is >= p, else 0. scale = 1 / (1 - p).
MXMACA_HOST_DEVICE float DropoutElement(float x, float uniform, float p, float scale) {
  return uniform >= p ? x * scale : 0.0f;
}

}  // namespace mxmaca::kernels::element_math

#endif  // MXMACA_KERNELS_ELEMENT_MATH_H_
