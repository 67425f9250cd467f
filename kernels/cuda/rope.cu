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
                           int64_t d, int64_t half, int64_t total, InvFreq inv, float sign,
                           bool interpolate, float pos_scale, bool interleaved) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       idx < total; idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = idx % half, row = idx / half;  // row = (b * NH + h) * S + si
    const int64_t si = row % s, bi = row / (s * heads);
    float pos = static_cast<float>(positions[bi * s + si]);
    if (interpolate) pos *= pos_scale;
    const double angle = static_cast<double>(pos * inv.v[j]);
    const float c = static_cast<float>(cos(angle));
    const float sn = sign * static_cast<float>(sin(angle));
    // Pair j: (r[j], r[j + half]), or (r[2j], r[2j + 1]) interleaved (rope_frequencies.h).
    float* a = x + row * d + (interleaved ? 2 * j : j);
    float* b = a + (interleaved ? 1 : half);
    const float x1 = *a, x2 = *b;
    *a = x1 * c - x2 * sn;
    *b = x2 * c + x1 * sn;
  }
}

CudaStatus Rotate(const ExecContext& ctx, float* x, const int32_t* positions, int64_t b,
                  int64_t s, int64_t heads, int64_t d, int64_t rotary_dim,
                  const RopeFrequencies& f, float sign) {
  MXMACA_CUDA_REQUIRE(b >= 0 && s >= 0 && heads >= 0 && d >= 0,
                      "Rope: sizes must be >= 0");
  MXMACA_CUDA_REQUIRE(rotary_dim >= 0 && rotary_dim % 2 == 0 && rotary_dim <= d &&
                          rotary_dim <= 2 * kMaxHalf,
                      "Rope: rotary_dim must be even, <= head dim and <= 256, got " +
                          std::to_string(rotary_dim));
  const int64_t half = rotary_dim / 2, total = b * heads * s * half;
  if (total == 0) return CudaStatus();
  InvFreq inv = {};
  RopeInvFreq(f, rotary_dim, inv.v);
  RopeKernel<<<internal::GridFor(total, 256), 256, 0, StreamOf(ctx)>>>(
      x, positions, s, heads, d, half, total, inv, sign, f.seq_len_interpolation_factor > 0.0f,
      RopePositionScale(f), f.interleaved);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

}  // namespace

CudaStatus RopeForward(const ExecContext& ctx, float* x, const int32_t* positions,
                       int64_t b, int64_t s, int64_t heads, int64_t d, int64_t rotary_dim,
                       const RopeFrequencies& f) {
  return Rotate(ctx, x, positions, b, s, heads, d, rotary_dim, f, 1.0f);
}

CudaStatus RopeBackward(const ExecContext& ctx, float* dx, const int32_t* positions,
                        int64_t b, int64_t s, int64_t heads, int64_t d, int64_t rotary_dim,
                        const RopeFrequencies& f) {
  return Rotate(ctx, dx, positions, b, s, heads, d, rotary_dim, f, -1.0f);
}

CudaStatus RopeForward(const ExecContext& ctx, float* x, const int32_t* positions,
                       int64_t b, int64_t s, int64_t heads, int64_t d, int64_t rotary_dim,
                       float base) {
  RopeFrequencies f;
  f.base = base;
  return Rotate(ctx, x, positions, b, s, heads, d, rotary_dim, f, 1.0f);
}

CudaStatus RopeBackward(const ExecContext& ctx, float* dx, const int32_t* positions,
                        int64_t b, int64_t s, int64_t heads, int64_t d, int64_t rotary_dim,
                        float base) {
  RopeFrequencies f;
  f.base = base;
  return Rotate(ctx, dx, positions, b, s, heads, d, rotary_dim, f, -1.0f);
}

}  // namespace mxmaca::kernels::cuda
