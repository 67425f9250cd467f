// kernels/cuda/rope.cu: see rope.h. Built with -fmad=false (BUILD), as the CPU backend's
// -ffp-contract=off.
#include "kernels/cuda/rope.h"

#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "kernels/cuda/device_util.cuh"

namespace mxmaca::kernels::cuda {
namespace {

constexpr int kMaxHalf = 128;

struct InvFreq {
  float v[kMaxHalf];
};

__global__ void RopeKernel(float* x, const int32_t* positions, int64_t s, int64_t heads,
                           int64_t d, int64_t half, int64_t total, InvFreq inv, float sign) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       idx < total; idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = idx % half, row = idx / half;  // row = (b * NH + h) * S + si
    const int64_t si = row % s, bi = row / (s * heads);
    const float pos = static_cast<float>(positions[bi * s + si]);
    const double angle = static_cast<double>(pos * inv.v[j]);
    const float c = static_cast<float>(cos(angle));
    const float sn = sign * static_cast<float>(sin(angle));
    float* r = x + row * d;
    const float x1 = r[j], x2 = r[j + half];
    r[j] = x1 * c - x2 * sn;
    r[j + half] = x2 * c + x1 * sn;
  }
}

CudaStatus Rotate(const ExecContext& ctx, float* x, const int32_t* positions, int64_t b,
                  int64_t s, int64_t heads, int64_t d, int64_t rotary_dim, float base,
                  float sign) {
  MXMACA_CUDA_REQUIRE(b >= 0 && s >= 0 && heads >= 0 && d >= 0,
                      "Rope: sizes must be >= 0");
  MXMACA_CUDA_REQUIRE(rotary_dim >= 0 && rotary_dim % 2 == 0 && rotary_dim <= d &&
                          rotary_dim <= 2 * kMaxHalf,
                      "Rope: rotary_dim must be even, <= head dim and <= 256, got " +
                          std::to_string(rotary_dim));
  const int64_t half = rotary_dim / 2, total = b * heads * s * half;
  if (total == 0) return CudaStatus();
  InvFreq inv = {};
  for (int64_t j = 0; j < half; ++j) {
    const float e = static_cast<float>(2 * j) / static_cast<float>(rotary_dim);
    inv.v[j] = 1.0f / std::pow(base, e);
  }
  RopeKernel<<<internal::GridFor(total, 256), 256, 0, StreamOf(ctx)>>>(
      x, positions, s, heads, d, half, total, inv, sign);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

}  // namespace

CudaStatus RopeForward(const ExecContext& ctx, float* x, const int32_t* positions,
                       int64_t b, int64_t s, int64_t heads, int64_t d, int64_t rotary_dim,
                       float base) {
  return Rotate(ctx, x, positions, b, s, heads, d, rotary_dim, base, 1.0f);
}

CudaStatus RopeBackward(const ExecContext& ctx, float* dx, const int32_t* positions,
                        int64_t b, int64_t s, int64_t heads, int64_t d, int64_t rotary_dim,
                        float base) {
  return Rotate(ctx, dx, positions, b, s, heads, d, rotary_dim, base, -1.0f);
}

}  // namespace mxmaca::kernels::cuda
