// kernels/cuda/embedding.cu: see embedding.h.
#include "kernels/cuda/embedding.h"

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/device_util.cuh"

namespace mxmaca::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Shard lookup; the unsharded lookup is the shard [0, 2^62) (ids trusted).
__global__ void EmbeddingForwardKernel(const int32_t* ids, int64_t n, const float* table,
                                       int64_t vocab_start, int64_t vocab_rows, int64_t h,
                                       float* out, bool accumulate) {
  const int64_t total = n * h;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       idx < total; idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx / h, c = idx % h;
    const int64_t row = static_cast<int64_t>(ids[i]) - vocab_start;
    const bool inside = row >= 0 && row < vocab_rows;
    if (inside) {
      const float v = table[row * h + c];
      out[idx] = accumulate ? out[idx] + v : v;
    } else if (!accumulate) {
      out[idx] = 0.0f;
    }
  }
}

// One thread per column c; tokens in increasing order.
__global__ void EmbeddingBackwardKernel(const int32_t* ids, int64_t n, const float* dout,
                                        int64_t vocab_start, int64_t vocab_rows, int64_t h,
                                        float* dtable) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= h) return;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = static_cast<int64_t>(ids[i]) - vocab_start;
    if (row >= 0 && row < vocab_rows) dtable[row * h + c] += dout[i * h + c];
  }
}

constexpr int64_t kAllRows = int64_t{1} << 62;

CudaStatus Forward(const ExecContext& ctx, const int32_t* ids, int64_t n, const float* table,
                   int64_t vocab_start, int64_t vocab_rows, int64_t h, float* out,
                   bool accumulate) {
  MXMACA_CUDA_REQUIRE(n >= 0 && h >= 0 && vocab_rows >= 0,
                      "EmbeddingForward: n, h and vocab_rows must be >= 0");
  if (n == 0 || h == 0) return CudaStatus();
  EmbeddingForwardKernel<<<internal::GridFor(n * h, kThreads), kThreads, 0,
                           StreamOf(ctx)>>>(ids, n, table, vocab_start, vocab_rows, h, out,
                                            accumulate);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

CudaStatus Backward(const ExecContext& ctx, const int32_t* ids, int64_t n, const float* dout,
                    int64_t vocab_start, int64_t vocab_rows, int64_t h, float* dtable) {
  MXMACA_CUDA_REQUIRE(n >= 0 && h >= 0 && vocab_rows >= 0,
                      "EmbeddingBackward: n, h and vocab_rows must be >= 0");
  if (n == 0 || h == 0) return CudaStatus();
  const int threads = 128;
  EmbeddingBackwardKernel<<<static_cast<unsigned>((h + threads - 1) / threads), threads, 0,
                            StreamOf(ctx)>>>(ids, n, dout, vocab_start, vocab_rows, h,
                                             dtable);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

}  // namespace

CudaStatus EmbeddingForward(const ExecContext& ctx, const int32_t* ids, int64_t n,
                            const float* table, int64_t h, float* out, bool accumulate) {
  return Forward(ctx, ids, n, table, 0, kAllRows, h, out, accumulate);
}

CudaStatus EmbeddingBackward(const ExecContext& ctx, const int32_t* ids, int64_t n,
                             const float* dout, int64_t h, float* dtable) {
  return Backward(ctx, ids, n, dout, 0, kAllRows, h, dtable);
}

CudaStatus VocabShardEmbeddingForward(const ExecContext& ctx, const int32_t* ids,
                                      int64_t n, const float* table, int64_t vocab_start,
                                      int64_t vocab_rows, int64_t h, float* out,
                                      bool accumulate) {
  return Forward(ctx, ids, n, table, vocab_start, vocab_rows, h, out, accumulate);
}

CudaStatus VocabShardEmbeddingBackward(const ExecContext& ctx, const int32_t* ids,
                                       int64_t n, const float* dout, int64_t vocab_start,
                                       int64_t vocab_rows, int64_t h, float* dtable) {
  return Backward(ctx, ids, n, dout, vocab_start, vocab_rows, h, dtable);
}

}  // namespace mxmaca::kernels::cuda
