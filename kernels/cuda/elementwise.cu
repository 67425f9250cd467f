// kernels/cuda/elementwise.cu: see elementwise.h.
#include "kernels/cuda/elementwise.h"

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/device_util.cuh"
#include "kernels/element_math.h"

namespace mxmaca::kernels::cuda {
namespace {

using internal::GridFor;

constexpr int kThreads = 256;

// Grid-stride map over i < n.
template <typename F>
__global__ void MapKernel(int64_t n, F f) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    f(i);
  }
}

template <typename F>
CudaStatus LaunchMap(const ExecContext& ctx, int64_t n, F f) {
  MXMACA_CUDA_REQUIRE(n >= 0, "element count must be >= 0, got " + std::to_string(n));
  if (n == 0) return CudaStatus();
  MapKernel<<<GridFor(n, kThreads), kThreads, 0, StreamOf(ctx)>>>(n, f);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

__global__ void SumSquaresPartialKernel(const float* x, int64_t n, double* partials) {
  __shared__ double scratch[32];
  double acc = 0.0;
  const int64_t stride = static_cast<int64_t>(kSumSquaresPartials) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const double v = x[i];
    acc += v * v;
  }
  acc = internal::BlockSum(acc, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

__global__ void SumSquaresFinalKernel(const double* partials, double* out) {
  __shared__ double scratch[32];
  double acc = 0.0;
  for (int i = threadIdx.x; i < kSumSquaresPartials; i += blockDim.x) acc += partials[i];
  acc = internal::BlockSum(acc, scratch);
  if (threadIdx.x == 0) *out = acc;
}

}  // namespace

CudaStatus AddBias(const ExecContext& ctx, float* y, const float* bias, int64_t rows,
                   int64_t cols) {
  MXMACA_CUDA_REQUIRE(rows >= 0 && cols >= 0, "AddBias: rows and cols must be >= 0");
  return LaunchMap(ctx, rows * cols,
                   [=] __device__(int64_t i) { y[i] += bias[i % cols]; });
}

CudaStatus BiasGrad(const ExecContext& ctx, const float* dy, int64_t rows, int64_t cols,
                    float* dbias) {
  MXMACA_CUDA_REQUIRE(rows >= 0 && cols >= 0, "BiasGrad: rows and cols must be >= 0");
  if (rows == 0 || cols == 0) return CudaStatus();
  auto f = [=] __device__(int64_t r, int64_t c) { return dy[r * cols + c]; };
  internal::ColumnSumKernel<<<internal::ColumnSumGrid(cols), internal::ColumnSumBlock(), 0,
                              StreamOf(ctx)>>>(rows, cols, f, dbias);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

CudaStatus Add(const ExecContext& ctx, const float* a, const float* b, float* out,
               int64_t n) {
  return LaunchMap(ctx, n, [=] __device__(int64_t i) { out[i] = a[i] + b[i]; });
}

CudaStatus Scale(const ExecContext& ctx, float* x, int64_t n, float s) {
  return LaunchMap(ctx, n, [=] __device__(int64_t i) { x[i] *= s; });
}

CudaStatus AddScalar(const ExecContext& ctx, const float* x, float c, float* y, int64_t n) {
  return LaunchMap(ctx, n, [=] __device__(int64_t i) { y[i] = x[i] + c; });
}

CudaStatus SumSquares(const ExecContext& ctx, const float* x, int64_t n, double* partials,
                      double* out) {
  MXMACA_CUDA_REQUIRE(n >= 0, "SumSquares: n must be >= 0");
  SumSquaresPartialKernel<<<kSumSquaresPartials, kThreads, 0, StreamOf(ctx)>>>(x, n,
                                                                               partials);
  MXMACA_CUDA_CHECK_LAUNCH();
  SumSquaresFinalKernel<<<1, kThreads, 0, StreamOf(ctx)>>>(partials, out);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

// The element-wise kernels compute each element with kernels/element_math.h, the functions
// the CPU kernels use (compiled with -fmad=false, BUILD): the same bits as the CPU backend.

CudaStatus GeluForward(const ExecContext& ctx, const float* x, float* y, int64_t n) {
  return LaunchMap(ctx, n,
                   [=] __device__(int64_t i) { y[i] = element_math::GeluScalar(x[i]); });
}

CudaStatus GeluBackward(const ExecContext& ctx, const float* x, const float* dy, float* dx,
                        int64_t n) {
  return LaunchMap(ctx, n, [=] __device__(int64_t i) {
    dx[i] = dy[i] * element_math::GeluGradScalar(x[i]);
  });
}

CudaStatus GeluTanhForward(const ExecContext& ctx, const float* x, float* y, int64_t n) {
  return LaunchMap(ctx, n, [=] __device__(int64_t i) {
    const float v = x[i];
    y[i] = v * element_math::TanhGeluScalar(v).s;
  });
}

CudaStatus GeluTanhBackward(const ExecContext& ctx, const float* x, const float* dy,
                            float* dx, int64_t n) {
  return LaunchMap(ctx, n, [=] __device__(int64_t i) {
    dx[i] = dy[i] * element_math::TanhGeluGradScalar(x[i]);
  });
}

CudaStatus SwigluForward(const ExecContext& ctx, const float* x, float* y, int64_t rows,
                         int64_t f) {
  MXMACA_CUDA_REQUIRE(rows >= 0 && f >= 0, "SwigluForward: rows and f must be >= 0");
  return LaunchMap(ctx, rows * f, [=] __device__(int64_t i) {
    const int64_t r = i / f, c = i % f;
    y[i] = element_math::SwigluScalar(x[r * 2 * f + c], x[r * 2 * f + f + c]);
  });
}

CudaStatus SwigluBackward(const ExecContext& ctx, const float* x, const float* dy,
                          float* dx, int64_t rows, int64_t f) {
  MXMACA_CUDA_REQUIRE(rows >= 0 && f >= 0, "SwigluBackward: rows and f must be >= 0");
  return LaunchMap(ctx, rows * f, [=] __device__(int64_t i) {
    const int64_t r = i / f, c = i % f;
    const element_math::SwigluGrad g =
        element_math::SwigluGradScalar(x[r * 2 * f + c], x[r * 2 * f + f + c], dy[i]);
    dx[r * 2 * f + c] = g.dgate;
    dx[r * 2 * f + f + c] = g.dup;
  });
}

namespace {

CudaStatus Dropout(const ExecContext& ctx, const float* x, float* y, int64_t n, float p,
                   internal::RngKeyArg key, int64_t index_offset) {
  MXMACA_CUDA_REQUIRE(p >= 0.0f && p < 1.0f,
                      "DropoutForward: p must be in [0, 1), got " + std::to_string(p));
  const float s = 1.0f / (1.0f - p);
  if (p == 0.0f) return LaunchMap(ctx, n, [=] __device__(int64_t i) { y[i] = x[i]; });
  return LaunchMap(ctx, n, [=] __device__(int64_t i) {
    const float u = internal::UniformAt(key.Seed(), key.Stream(),
                                        static_cast<uint64_t>(index_offset + i));
    y[i] = element_math::DropoutElement(x[i], u, p, s);
  });
}

}  // namespace

CudaStatus DropoutForward(const ExecContext& ctx, const float* x, float* y, int64_t n,
                          float p, RngKey key, int64_t index_offset) {
  return Dropout(ctx, x, y, n, p, internal::ByValue(key), index_offset);
}

CudaStatus DropoutBackward(const ExecContext& ctx, const float* dy, float* dx, int64_t n,
                           float p, RngKey key, int64_t index_offset) {
  return Dropout(ctx, dy, dx, n, p, internal::ByValue(key), index_offset);
}

CudaStatus DropoutForward(const ExecContext& ctx, const float* x, float* y, int64_t n,
                          float p, const RngKey* device_key, int64_t index_offset) {
  MXMACA_CUDA_REQUIRE(p == 0.0f || device_key != nullptr, "DropoutForward: no device key");
  return Dropout(ctx, x, y, n, p, internal::ByPointer(device_key), index_offset);
}

CudaStatus DropoutBackward(const ExecContext& ctx, const float* dy, float* dx, int64_t n,
                           float p, const RngKey* device_key, int64_t index_offset) {
  MXMACA_CUDA_REQUIRE(p == 0.0f || device_key != nullptr, "DropoutBackward: no device key");
  return Dropout(ctx, dy, dx, n, p, internal::ByPointer(device_key), index_offset);
}

}  // namespace mxmaca::kernels::cuda
