// kernels/cpu/rope.h: rotary position embedding (RoPE) on CPU.
//
// Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding" (2021), in
// Megatron's non-interleaved form (the interleaved one: RopeFrequencies::interleaved) (megatron/core/models/common/embeddings/
// rotary_pos_embedding.py and rope_utils.py, apply_rotary_pos_emb_bshd with
// rotary_interleaved = False):
//   inv_freq[j] = base^(-2j / rotary_dim), j < rotary_dim / 2;
//   theta[p, c] = p * inv_freq[c mod rotary_dim/2] for c < rotary_dim (emb = cat(freqs,
//   freqs));
//   x_rot = x[..., :rotary_dim] * cos(theta) + rotate_half(x[..., :rotary_dim]) * sin(theta)
//   with rotate_half([x1 | x2]) = [-x2 | x1]; dims >= rotary_dim pass through.
// B = batch, S = sequence, NH = heads, D = head dim; x [B, NH, S, D]; positions int32
// [B, S] (position of token s of sequence b; 0..S-1 normally, restarting per document
// under --reset-position-ids). rotary_dim even, <= D.
// Angles follow Megatron's fp32 arithmetic: inv_freq = 1 / base^(fp32(2j) / rotary_dim)
// in fp32, angle = fp32(position) * inv_freq rounded to fp32 (torch.outer in fp32); cos
// and sin of that fp32 angle are then evaluated in fp64 and rounded (<= 0.5 ulp), so the
// table matches Megatron's fp32 cos/sin cache to about an ulp.
#ifndef MXMACA_KERNELS_CPU_ROPE_H_
#define MXMACA_KERNELS_CPU_ROPE_H_

#include <cstdint>

#include "kernels/exec_context.h"
#include "kernels/rope_frequencies.h"

namespace mxmaca::kernels::cpu {

// RopeFrequencies, RopeInvFreq: kernels/rope_frequencies.h (the angles every backend uses).
using ::mxmaca::kernels::RopeFrequencies;
using ::mxmaca::kernels::RopeInvFreq;
using ::mxmaca::kernels::RopePositionScale;

// RopeForward: rotates x in place by +theta as above.
void RopeForward(const ExecContext& ctx, float* x, const int32_t* positions, int64_t b,
                 int64_t s, int64_t heads, int64_t d, int64_t rotary_dim,
                 const RopeFrequencies& f);
// RopeBackward (RopeFrequencies): the transpose of that RopeForward.
void RopeBackward(const ExecContext& ctx, float* dx, const int32_t* positions, int64_t b,
                  int64_t s, int64_t heads, int64_t d, int64_t rotary_dim,
                  const RopeFrequencies& f);

// RopeForward (base only): RopeFrequencies{base}, bit for bit.
void RopeForward(const ExecContext& ctx, float* x, const int32_t* positions, int64_t b,
                 int64_t s, int64_t heads, int64_t d, int64_t rotary_dim, float base);

// RopeBackward: in place, the transpose of RopeForward (rotation by -theta):
// dx_rot = dx * cos(theta) - rotate_half(dx) * sin(theta).
void RopeBackward(const ExecContext& ctx, float* dx, const int32_t* positions, int64_t b,
                  int64_t s, int64_t heads, int64_t d, int64_t rotary_dim, float base);

}  // namespace mxmaca::kernels::cpu

#endif  // MXMACA_KERNELS_CPU_ROPE_H_
