// kernels/cuda/adamw.cu: see adamw.h. Compiled with -fmad=false (BUILD) so that each
// product and sum is rounded separately, as on the CPU backend (-ffp-contract=off).
#include "kernels/cuda/adamw.h"

#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "kernels/cuda/device_util.cuh"

namespace mxmaca::kernels::cuda {
namespace {

__global__ void AdamWKernel(float* param, const float* grad, float* exp_avg,
                            float* exp_avg_sq, int64_t n, float decay, float beta1,
                            float one_minus_b1, float beta2, float one_minus_b2,
                            float bc2_sqrt, float eps, float neg_step_size) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = grad[i];
    float p = param[i] * decay;
    const float m = exp_avg[i] * beta1 + one_minus_b1 * g;
    const float v = exp_avg_sq[i] * beta2 + one_minus_b2 * g * g;
    const float denom = __fsqrt_rn(v) / bc2_sqrt + eps;
    p = p + neg_step_size * m / denom;
    param[i] = p;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

}  // namespace

CudaStatus AdamWStep(const ExecContext& ctx, float* param, const float* grad,
                     float* exp_avg, float* exp_avg_sq, int64_t n, float lr, float beta1,
                     float beta2, float eps, float weight_decay, int64_t step) {
  MXMACA_CUDA_REQUIRE(n >= 0, "AdamWStep: n must be >= 0, got " + std::to_string(n));
  MXMACA_CUDA_REQUIRE(step >= 1, "AdamWStep: step must be >= 1, got " + std::to_string(step));
  if (n == 0) return CudaStatus();
  const double lr_d = lr, b1 = beta1, b2 = beta2;
  const float decay = static_cast<float>(1.0 - lr_d * static_cast<double>(weight_decay));
  const float one_minus_b1 = static_cast<float>(1.0 - b1);
  const float one_minus_b2 = static_cast<float>(1.0 - b2);
  const double bias_correction1 = 1.0 - std::pow(b1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(b2, static_cast<double>(step));
  const float neg_step_size = static_cast<float>(-(lr_d / bias_correction1));
  const float bc2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  AdamWKernel<<<internal::GridFor(n, 256), 256, 0, StreamOf(ctx)>>>(
      param, grad, exp_avg, exp_avg_sq, n, decay, beta1, one_minus_b1, beta2, one_minus_b2,
      bc2_sqrt, eps, neg_step_size);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

}  // namespace mxmaca::kernels::cuda
