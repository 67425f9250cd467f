// kernels/cuda/norm.cu: see norm.h.
#include "kernels/cuda/norm.h"

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/device_util.cuh"

namespace mxmaca::kernels::cuda {
namespace {

using internal::BlockSum;

constexpr int kThreads = 256;

// One block per row. kRms: RMSNorm (no mean), else LayerNorm.
template <bool kRms>
__global__ void NormForwardKernel(const float* x, const float* gamma, const float* beta,
                                  float eps, int64_t h, float* y, float* mean,
                                  float* rstd) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * h;
  float mu = 0.0f;
  if (!kRms) {
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < h; c += blockDim.x) s += xr[c];
    mu = BlockSum(s, scratch) / static_cast<float>(h);
  }
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    const float d = xr[c] - mu;
    ss += d * d;
  }
  const float rs = rsqrtf(BlockSum(ss, scratch) / static_cast<float>(h) + eps);
  float* yr = y + r * h;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    float v = (xr[c] - mu) * rs * gamma[c];
    if (!kRms && beta != nullptr) v += beta[c];
    yr[c] = v;
  }
  if (threadIdx.x == 0) {
    if (!kRms) mean[r] = mu;
    rstd[r] = rs;
  }
}

template <bool kRms>
__global__ void NormBackwardInputKernel(const float* dy, const float* x, const float* gamma,
                                        const float* mean, const float* rstd, int64_t h,
                                        float* dx) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * h;
  const float* dyr = dy + r * h;
  const float mu = kRms ? 0.0f : mean[r], rs = rstd[r];
  float sg = 0.0f, sgx = 0.0f;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    const float g = dyr[c] * gamma[c];
    const float xhat = (xr[c] - mu) * rs;
    sg += g;
    sgx += g * xhat;
  }
  const float inv_h = 1.0f / static_cast<float>(h);
  const float mean_g = kRms ? 0.0f : BlockSum(sg, scratch) * inv_h;
  const float mean_gx = BlockSum(sgx, scratch) * inv_h;
  float* dxr = dx + r * h;
  for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    const float g = dyr[c] * gamma[c];
    const float xhat = (xr[c] - mu) * rs;
    dxr[c] = rs * (g - mean_g - xhat * mean_gx);
  }
}

CudaStatus CheckShape(int64_t n, int64_t h, const char* op) {
  MXMACA_CUDA_REQUIRE(n >= 0 && h >= 0, std::string(op) + ": n and h must be >= 0, got n=" +
                                            std::to_string(n) + " h=" + std::to_string(h));
  MXMACA_CUDA_REQUIRE(n < (int64_t{1} << 31), std::string(op) + ": n must be < 2^31");
  return CudaStatus();
}

}  // namespace

CudaStatus LayerNormForward(const ExecContext& ctx, const float* x, const float* gamma,
                            const float* beta, float eps, int64_t n, int64_t h, float* y,
                            float* mean, float* rstd) {
  MXMACA_RETURN_IF_CUDA_ERROR(CheckShape(n, h, "LayerNormForward"));
  if (n == 0 || h == 0) return CudaStatus();
  NormForwardKernel<false><<<static_cast<unsigned>(n), kThreads, 0, StreamOf(ctx)>>>(
      x, gamma, beta, eps, h, y, mean, rstd);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

CudaStatus LayerNormBackwardInput(const ExecContext& ctx, const float* dy, const float* x,
                                  const float* gamma, const float* mean, const float* rstd,
                                  int64_t n, int64_t h, float* dx) {
  MXMACA_RETURN_IF_CUDA_ERROR(CheckShape(n, h, "LayerNormBackwardInput"));
  if (n == 0 || h == 0) return CudaStatus();
  NormBackwardInputKernel<false><<<static_cast<unsigned>(n), kThreads, 0, StreamOf(ctx)>>>(
      dy, x, gamma, mean, rstd, h, dx);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

CudaStatus LayerNormBackwardWeight(const ExecContext& ctx, const float* dy, const float* x,
                                   const float* mean, const float* rstd, int64_t n,
                                   int64_t h, float* dgamma, float* dbeta) {
  MXMACA_RETURN_IF_CUDA_ERROR(CheckShape(n, h, "LayerNormBackwardWeight"));
  if (n == 0 || h == 0) return CudaStatus();
  auto fg = [=] __device__(int64_t r, int64_t c) {
    return dy[r * h + c] * ((x[r * h + c] - mean[r]) * rstd[r]);
  };
  internal::ColumnSumKernel<<<internal::ColumnSumGrid(h), internal::ColumnSumBlock(), 0,
                              StreamOf(ctx)>>>(n, h, fg, dgamma);
  MXMACA_CUDA_CHECK_LAUNCH();
  if (dbeta != nullptr) {
    auto fb = [=] __device__(int64_t r, int64_t c) { return dy[r * h + c]; };
    internal::ColumnSumKernel<<<internal::ColumnSumGrid(h), internal::ColumnSumBlock(), 0,
                                StreamOf(ctx)>>>(n, h, fb, dbeta);
    MXMACA_CUDA_CHECK_LAUNCH();
  }
  return CudaStatus();
}

CudaStatus RmsNormForward(const ExecContext& ctx, const float* x, const float* gamma,
                          float eps, int64_t n, int64_t h, float* y, float* rstd) {
  MXMACA_RETURN_IF_CUDA_ERROR(CheckShape(n, h, "RmsNormForward"));
  if (n == 0 || h == 0) return CudaStatus();
  NormForwardKernel<true><<<static_cast<unsigned>(n), kThreads, 0, StreamOf(ctx)>>>(
      x, gamma, nullptr, eps, h, y, nullptr, rstd);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

CudaStatus RmsNormBackwardInput(const ExecContext& ctx, const float* dy, const float* x,
                                const float* gamma, const float* rstd, int64_t n,
                                int64_t h, float* dx) {
  MXMACA_RETURN_IF_CUDA_ERROR(CheckShape(n, h, "RmsNormBackwardInput"));
  if (n == 0 || h == 0) return CudaStatus();
  NormBackwardInputKernel<true><<<static_cast<unsigned>(n), kThreads, 0, StreamOf(ctx)>>>(
      dy, x, gamma, nullptr, rstd, h, dx);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

CudaStatus RmsNormBackwardWeight(const ExecContext& ctx, const float* dy, const float* x,
                                 const float* rstd, int64_t n, int64_t h, float* dgamma) {
  MXMACA_RETURN_IF_CUDA_ERROR(CheckShape(n, h, "RmsNormBackwardWeight"));
  if (n == 0 || h == 0) return CudaStatus();
  auto f = [=] __device__(int64_t r, int64_t c) {
    return dy[r * h + c] * (x[r * h + c] * rstd[r]);
  };
  internal::ColumnSumKernel<<<internal::ColumnSumGrid(h), internal::ColumnSumBlock(), 0,
                              StreamOf(ctx)>>>(n, h, f, dgamma);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

}  // namespace mxmaca::kernels::cuda
