// kernels/cuda/rope.h: rotary position embedding (RoPE) on the GPU.
//
// The CUDA twin of kernels/cpu/rope.h (Su et al. 2021, Megatron's non-interleaved
// rotate_half form): x [B, NH, S, D] fp32 device, positions int32 [B, S] device,
// rotary_dim even and <= min(D, 256); dims >= rotary_dim pass through. The same
// angle arithmetic as the CPU backend: inv_freq[j] = 1 / base^(fp32(2j) / rotary_dim)
// computed on the host in fp32 (std::pow, as the CPU backend), angle = fp32(position) *
// inv_freq[j] in fp32, cos and sin of that angle in fp64 rounded to fp32 (CUDA's fp64
// cos/sin are within 2 ulp of fp64, so the fp32 table agrees with the CPU's to an ulp
// at most), products without fused multiply-add (-fmad=false).
#ifndef MXMACA_KERNELS_CUDA_ROPE_H_
#define MXMACA_KERNELS_CUDA_ROPE_H_

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/exec_context.h"

namespace mxmaca::kernels::cuda {

// RopeForward: rotates x in place by +theta. Errors: rotary_dim odd, > d or > 256;
// negative sizes; launch failures.
CudaStatus RopeForward(const ExecContext& ctx, float* x, const int32_t* positions,
                       int64_t b, int64_t s, int64_t heads, int64_t d, int64_t rotary_dim,
                       float base);

// RopeBackward: in place, the transpose (rotation by -theta).
CudaStatus RopeBackward(const ExecContext& ctx, float* dx, const int32_t* positions,
                        int64_t b, int64_t s, int64_t heads, int64_t d, int64_t rotary_dim,
                        float base);

}  // namespace mxmaca::kernels::cuda

#endif  // MXMACA_KERNELS_CUDA_ROPE_H_
