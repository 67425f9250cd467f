// kernels/cuda/adamw.cu: see adamw.h. Compiled with -fmad=false (BUILD) so that each
// product and sum is rounded separately, as on the CPU backend (-ffp-contract=off).
#include "kernels/cuda/adamw.h"

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/device_util.cuh"
#include "kernels/element_math.h"

namespace mxmaca::kernels::cuda {
namespace {

// One element per thread (grid-stride), each by element_math::AdamWElement: the CPU
// kernel's function, so the update is the CPU backend's bit for bit.
__global__ void AdamWKernel(float* param, const float* grad, float* exp_avg,
                            float* exp_avg_sq, int64_t n, element_math::AdamWCoefficients c) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    element_math::AdamWElement(c, grad[i], param + i, exp_avg + i, exp_avg_sq + i);
  }
}

}  // namespace

CudaStatus AdamWStep(const ExecContext& ctx, float* param, const float* grad,
                     float* exp_avg, float* exp_avg_sq, int64_t n, float lr, float beta1,
                     float beta2, float eps, float weight_decay, int64_t step) {
  MXMACA_CUDA_REQUIRE(n >= 0, "AdamWStep: n must be >= 0, got " + std::to_string(n));
  MXMACA_CUDA_REQUIRE(step >= 1, "AdamWStep: step must be >= 1, got " + std::to_string(step));
  if (n == 0) return CudaStatus();
  const element_math::AdamWCoefficients c =
      element_math::MakeAdamWCoefficients(lr, beta1, beta2, eps, weight_decay, step);
  AdamWKernel<<<internal::GridFor(n, 256), 256, 0, StreamOf(ctx)>>>(param, grad, exp_avg,
                                                                    exp_avg_sq, n, c);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

}  // namespace mxmaca::kernels::cuda
