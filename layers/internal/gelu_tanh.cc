// layers/internal/gelu_tanh.cc
#include "layers/internal/gelu_tanh.h"

#include <cmath>

namespace mxmaca::layers::internal {
namespace {

constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kCubic = 0.044715f;

}  // namespace

void GeluTanhForward(const kernels::ExecContext& ctx, const float* x, float* y, int64_t n) {
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = std::tanh(kSqrt2OverPi * (v + kCubic * v * v * v));
    y[i] = 0.5f * v * (1.0f + t);
  }
}

void GeluTanhBackward(const kernels::ExecContext& ctx, const float* x, const float* dy, float* dx,
                      int64_t n) {
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = std::tanh(kSqrt2OverPi * (v + kCubic * v * v * v));
    const float d = 0.5f * v * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v) +
                    0.5f * (1.0f + t);
    dx[i] = dy[i] * d;
  }
}

}  // namespace mxmaca::layers::internal
