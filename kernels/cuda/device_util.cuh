// kernels/cuda/device_util.cuh: helpers shared by the .cu files of kernels/cuda (not a
// public interface): grid sizing, fixed-order block reductions, and the device twin of
// kernels/philox.h.
//
// Determinism: every reduction here combines values in an order fixed by the launch
// shape alone (a warp butterfly, then warps in index order), never by atomics, so the
// same inputs give the same bits run after run.
#ifndef MXMACA_KERNELS_CUDA_DEVICE_UTIL_CUH_
#define MXMACA_KERNELS_CUDA_DEVICE_UTIL_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/exec_context.h"
#include "kernels/philox.h"

namespace mxmaca::kernels::cuda::internal {

// GridFor: blocks for a grid-stride loop over n items with `threads` per block (at most
// 16 waves of 132 SMs' worth; the loop covers the rest).
inline int GridFor(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  const int64_t cap = 132 * 32;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > cap ? cap : blocks));
}

template <typename T>
__device__ __forceinline__ T WarpSum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// BlockSum: the sum of v over the (1-D) block, returned to every thread. `scratch` holds
// 32 values of shared memory; blockDim.x a multiple of 32 and <= 1024.
template <typename T>
__device__ T BlockSum(T v, T* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T total = lane < warps ? scratch[lane] : T(0);
  total = WarpSum(total);
  return total;
}

__device__ inline float BlockMax(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = lane < warps ? scratch[lane] : -INFINITY;
  return WarpMax(m);
}

// UniformAt: kernels/philox.h's UniformAtWords, the function the CPU kernels use.
__device__ __forceinline__ float UniformAt(uint64_t seed, uint64_t stream, uint64_t index) {
  return ::mxmaca::kernels::UniformAtWords(seed, stream, index);
}

// ColumnSumKernel: out[c] += sum_r f(r, c) over rows r < rows, c < cols. Launch with
// block (32, 32) and grid (ceil(cols / 32)): thread (x, y) of block bx sums rows
// y, y + 32, ... of column 32 bx + x in row order (fp32), then the 32 partial sums of a
// column are added in y order. Fixed order: same bits on every run.
template <typename F>
__global__ void ColumnSumKernel(int64_t rows, int64_t cols, F f, float* out) {
  __shared__ float partial[32][33];
  const int64_t c = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.0f;
  if (c < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += 32) acc += f(r, c);
  }
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.0f;
    for (int y = 0; y < 32; ++y) total += partial[y][threadIdx.x];
    out[c] += total;
  }
}

inline dim3 ColumnSumGrid(int64_t cols) { return dim3(static_cast<unsigned>((cols + 31) / 32)); }
inline dim3 ColumnSumBlock() { return dim3(32, 32); }

// RngKeyArg: a dropout key handed to a kernel by value, or through a DEVICE pointer that
// the kernel reads when it runs — so a captured CUDA graph replays with the key the
// pointer holds at replay time (layers/device uploads each micro-batch's keys before its
// segment). Seed() / Stream() resolve it in device code.
struct RngKeyArg {
  uint64_t seed = 0, stream = 0;
  const RngKey* device = nullptr;
  __device__ __forceinline__ uint64_t Seed() const { return device ? device->seed : seed; }
  __device__ __forceinline__ uint64_t Stream() const {
    return device ? device->stream : stream;
  }
};
inline RngKeyArg ByValue(RngKey key) { return RngKeyArg{key.seed, key.stream, nullptr}; }
inline RngKeyArg ByPointer(const RngKey* key) { return RngKeyArg{0, 0, key}; }

}  // namespace mxmaca::kernels::cuda::internal

#endif  // MXMACA_KERNELS_CUDA_DEVICE_UTIL_CUH_
