// kernels/cuda/cross_entropy.cu: see cross_entropy.h.
#include "kernels/cuda/cross_entropy.h"

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/device_util.cuh"

namespace mxmaca::kernels::cuda {
namespace {

constexpr int kThreads = 512;

__global__ void CrossEntropyForwardKernel(const float* logits, const int32_t* targets,
                                          int64_t vp, int64_t v, float* loss, float* lse) {
  __shared__ float scratch[32];
  const int64_t i = blockIdx.x;
  const float* x = logits + i * vp;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < v; c += blockDim.x) m = fmaxf(m, x[c]);
  m = internal::BlockMax(m, scratch);
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < v; c += blockDim.x) s += expf(x[c] - m);
  s = internal::BlockSum(s, scratch);
  if (threadIdx.x == 0) {
    const float l = m + logf(s);
    lse[i] = l;
    const int64_t t = targets[i];
    loss[i] = (t >= 0 && t < v) ? l - x[t] : l;
  }
}

__global__ void CrossEntropyBackwardKernel(const float* logits, const int32_t* targets,
                                           const float* lse, const float* dloss, int64_t vp,
                                           int64_t v, float* dlogits) {
  const int64_t i = blockIdx.y;
  const float l = lse[i], d = dloss[i];
  const int64_t t = targets[i];
  const float* x = logits + i * vp;
  float* dx = dlogits + i * vp;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < vp;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (c < v) {
      const float p = expf(x[c] - l);
      dx[c] = d * (c == t ? p - 1.0f : p);
    } else {
      dx[c] = 0.0f;
    }
  }
}

CudaStatus CheckShape(int64_t n, int64_t vp, int64_t v, const char* op) {
  MXMACA_CUDA_REQUIRE(n >= 0 && v >= 1 && v <= vp && n < (int64_t{1} << 31),
                      std::string(op) + ": need 0 <= n < 2^31 and 1 <= v <= vp, got n=" +
                          std::to_string(n) + " v=" + std::to_string(v) +
                          " vp=" + std::to_string(vp));
  return CudaStatus();
}

}  // namespace

CudaStatus CrossEntropyForward(const ExecContext& ctx, const float* logits,
                               const int32_t* targets, int64_t n, int64_t vp, int64_t v,
                               float* loss, float* lse) {
  MXMACA_RETURN_IF_CUDA_ERROR(CheckShape(n, vp, v, "CrossEntropyForward"));
  if (n == 0) return CudaStatus();
  CrossEntropyForwardKernel<<<static_cast<unsigned>(n), kThreads, 0, StreamOf(ctx)>>>(
      logits, targets, vp, v, loss, lse);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

CudaStatus CrossEntropyBackward(const ExecContext& ctx, const float* logits,
                                const int32_t* targets, const float* lse,
                                const float* dloss, int64_t n, int64_t vp, int64_t v,
                                float* dlogits) {
  MXMACA_RETURN_IF_CUDA_ERROR(CheckShape(n, vp, v, "CrossEntropyBackward"));
  MXMACA_CUDA_REQUIRE(n < 65536 * 1024, "CrossEntropyBackward: n too large for the grid");
  if (n == 0) return CudaStatus();
  const int64_t col_blocks = (vp + 4 * 256 - 1) / (4 * 256);  // ~4 columns per thread
  dim3 grid(static_cast<unsigned>(col_blocks < 1 ? 1 : col_blocks),
            static_cast<unsigned>(n));
  // gridDim.y is limited to 65535: split long token ranges into launches.
  for (int64_t r0 = 0; r0 < n; r0 += 65535) {
    const int64_t rows = n - r0 < 65535 ? n - r0 : 65535;
    grid.y = static_cast<unsigned>(rows);
    CrossEntropyBackwardKernel<<<grid, 256, 0, StreamOf(ctx)>>>(
        logits + r0 * vp, targets + r0, lse + r0, dloss + r0, vp, v, dlogits + r0 * vp);
    MXMACA_CUDA_CHECK_LAUNCH();
  }
  return CudaStatus();
}

}  // namespace mxmaca::kernels::cuda
