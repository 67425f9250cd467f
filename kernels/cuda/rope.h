// kernels/cuda/rope.h: rotary position embedding (RoPE) on the GPU.
//
// The CUDA twin of kernels/cpu/rope.h (Su et al. 2021, Megatron's rotate_half form, or
// the interleaved one): x [B, NH, S, D] fp32 device, positions int32 [B, S] device,
// rotary_dim even and <= min(D, 256); dims >= rotary_dim pass through. The same
// angle arithmetic as the CPU backend: inv_freq[j] (with Llama-3 scaling when asked)
// computed on the host in fp32 by kernels/rope_frequencies.h RopeInvFreq, the function
// the CPU backend calls; angle = fp32(position) (times fp32(1 / factor) with
// seq_len_interpolation_factor) * inv_freq[j] in fp32, cos and sin of that angle in fp64 rounded to fp32 (CUDA's fp64
// cos/sin are within 2 ulp of fp64, so the fp32 table agrees with the CPU's to an ulp
// at most), products without fused multiply-add (-fmad=false).
#ifndef MXMACA_KERNELS_CUDA_ROPE_H_
#define MXMACA_KERNELS_CUDA_ROPE_H_

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/exec_context.h"
#include "kernels/rope_frequencies.h"

namespace mxmaca::kernels::cuda {

// RopeForward: rotates x in place by +theta with the angles of `f`
// (kernels/rope_frequencies.h). Errors: rotary_dim odd, > d or > 256; negative sizes;
// launch failures.
CudaStatus RopeForward(const ExecContext& ctx, float* x, const int32_t* positions,
                       int64_t b, int64_t s, int64_t heads, int64_t d, int64_t rotary_dim,
                       const RopeFrequencies& f);

// RopeBackward: in place, the transpose (rotation by -theta).
CudaStatus RopeBackward(const ExecContext& ctx, float* dx, const int32_t* positions,
                        int64_t b, int64_t s, int64_t heads, int64_t d, int64_t rotary_dim,
                        const RopeFrequencies& f);

// RopeForward / RopeBackward (base only): RopeFrequencies{base}.
CudaStatus RopeForward(const ExecContext& ctx, float* x, const int32_t* positions,
                       int64_t b, int64_t s, int64_t heads, int64_t d, int64_t rotary_dim,
                       float base);
CudaStatus RopeBackward(const ExecContext& ctx, float* dx, const int32_t* positions,
                        int64_t b, int64_t s, int64_t heads, int64_t d, int64_t rotary_dim,
                        float base);

}  // namespace mxmaca::kernels::cuda

#endif  // MXMACA_KERNELS_CUDA_ROPE_H_
