// kernels/cuda/norm.h: LayerNorm and RMSNorm, forward and backward, on the GPU.
//
// The CUDA twin of kernels/cpu/norm.h (same math, shapes and stash): N = rows (tokens),
// H = hidden. x, y, dy, dx: [N, H]; mean, rstd: [N]; gamma, beta, dgamma, dbeta: [H].
// fp32 device pointers. One thread block per row; row statistics two-pass in fp32 (mean,
// then centred sum of squares) with a fixed-order block reduction. Weight gradients sum
// over rows with kernels/cuda/device_util.cuh's ColumnSumKernel (fixed order, no
// atomics). Errors: negative sizes, launch failures (file:line).
#ifndef MXMACA_KERNELS_CUDA_NORM_H_
#define MXMACA_KERNELS_CUDA_NORM_H_

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/exec_context.h"

namespace mxmaca::kernels::cuda {

// LayerNormForward: y = (x - mean) * rstd * gamma + beta (beta may be nullptr); writes
// mean[N], rstd[N] = 1 / sqrt(biased var + eps).
CudaStatus LayerNormForward(const ExecContext& ctx, const float* x, const float* gamma,
                            const float* beta, float eps, int64_t n, int64_t h, float* y,
                            float* mean, float* rstd);

// LayerNormBackwardInput: dx = rstd * (g - mean_h(g) - xhat * mean_h(g * xhat)),
// g = dy * gamma, xhat = (x - mean) * rstd. Overwrites dx (may alias dy).
CudaStatus LayerNormBackwardInput(const ExecContext& ctx, const float* dy, const float* x,
                                  const float* gamma, const float* mean, const float* rstd,
                                  int64_t n, int64_t h, float* dx);

// LayerNormBackwardWeight: dgamma[c] += sum_r dy * xhat; dbeta[c] += sum_r dy (skipped
// when dbeta is nullptr). Accumulates.
CudaStatus LayerNormBackwardWeight(const ExecContext& ctx, const float* dy, const float* x,
                                   const float* mean, const float* rstd, int64_t n,
                                   int64_t h, float* dgamma, float* dbeta);

// RmsNormForward: y = x * rstd * gamma, rstd[r] = 1 / sqrt(mean_h(x^2) + eps).
CudaStatus RmsNormForward(const ExecContext& ctx, const float* x, const float* gamma,
                          float eps, int64_t n, int64_t h, float* y, float* rstd);

// RmsNormBackwardInput: dx = rstd * (g - xhat * mean_h(g * xhat)), g = dy * gamma,
// xhat = x * rstd. Overwrites dx (may alias dy).
CudaStatus RmsNormBackwardInput(const ExecContext& ctx, const float* dy, const float* x,
                                const float* gamma, const float* rstd, int64_t n,
                                int64_t h, float* dx);

// RmsNormBackwardWeight: dgamma[c] += sum_r dy[r,c] * x[r,c] * rstd[r]. Accumulates.
CudaStatus RmsNormBackwardWeight(const ExecContext& ctx, const float* dy, const float* x,
                                 const float* rstd, int64_t n, int64_t h, float* dgamma);

}  // namespace mxmaca::kernels::cuda

#endif  // MXMACA_KERNELS_CUDA_NORM_H_
