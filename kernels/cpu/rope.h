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

namespace mxmaca::kernels::cpu {

// RopeFrequencies: how the angles theta[p, j] = p' * inv_freq'[j] are formed (Megatron's
// RotaryEmbedding, megatron/core/models/common/embeddings/rotary_pos_embedding.py):
//   inv_freq[j] = 1 / base^(2j / rotary_dim) (fp32) as above;
//   llama3_scaling (--use-rope-scaling; RotaryEmbedding._apply_scaling, Llama 3.x): with
//     wavelen = 2 pi / inv_freq, lo = original_max_position / low_freq_factor, hi =
//     original_max_position / high_freq_factor: inv_freq / scaling_factor where wavelen >
//     lo (low frequencies), inv_freq where wavelen < hi (high frequencies), and between
//     them (1 - a) inv_freq / scaling_factor + a inv_freq with a = (original_max_position /
//     wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor); fp32 arithmetic in
//     torch's order (a scalar over a tensor is reciprocal(tensor) * scalar);
//   seq_len_interpolation_factor (--rotary-seq-len-interpolation-factor; 0 = none):
//     p' = fp32(p) * fp32(1 / factor) (linear position interpolation), else p' = p.
// Megatron's _apply_scaling keeps low_freq_factor 1, high_freq_factor 4 and
// original_max_position 8192 fixed (no flags), as the defaults here.
struct RopeFrequencies {
  float base = 10000.0f;  // --rotary-base
  bool llama3_scaling = false;
  float scaling_factor = 8.0f;  // --rope-scaling-factor
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  float original_max_position = 8192.0f;
  float seq_len_interpolation_factor = 0.0f;
  // --rotary-interleaved (rope_utils.py _rotate_half with rotary_interleaved, emb =
  // stack(freqs, freqs) interleaved): pair j is (x[2j], x[2j + 1]) instead of
  // (x[j], x[j + rotary_dim/2]); both rotate by theta[p, j]:
  //   x'[2j] = x[2j] cos - x[2j+1] sin,  x'[2j+1] = x[2j+1] cos + x[2j] sin.
  bool interleaved = false;
};

// RopeInvFreq: inv_freq'[j] for j < rotary_dim / 2 (as above; rotary_dim even).
void RopeInvFreq(const RopeFrequencies& f, int64_t rotary_dim, float* inv_freq);

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
