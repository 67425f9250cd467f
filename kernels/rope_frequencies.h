// kernels/rope_frequencies.h: how rotary position embedding forms its angles, shared by
// the CPU kernel (kernels/cpu/rope.h), the CUDA kernel (kernels/cuda/rope.h) and the
// backend interface (layers/device/device_kernels.h), so every backend rotates by the
// same fp32 inverse frequencies (computed here, on the host, by one function).
//
// Source: Megatron-Core RotaryEmbedding (megatron/core/models/common/embeddings/
// rotary_pos_embedding.py) and rope_utils.py:
//   inv_freq[j] = 1 / base^(fp32(2j) / rotary_dim) in fp32, j < rotary_dim / 2;
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
#ifndef MXMACA_KERNELS_ROPE_FREQUENCIES_H_
#define MXMACA_KERNELS_ROPE_FREQUENCIES_H_

#include <cmath>
#include <cstdint>

namespace mxmaca::kernels {

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

// RopeInvFreq: inv_freq'[j] for j < rotary_dim / 2 (as above; rotary_dim even), into
// inv_freq [rotary_dim / 2] (host memory).
inline void RopeInvFreq(const RopeFrequencies& f, int64_t rotary_dim, float* inv_freq) {
  const int64_t half = rotary_dim / 2;
  for (int64_t j = 0; j < half; ++j) {
    // Megatron: 1.0 / (base ** (torch.arange(0, dim, 2, dtype=float32) / dim)), fp32.
    const float e = static_cast<float>(2 * j) / static_cast<float>(rotary_dim);
    inv_freq[j] = 1.0f / std::pow(f.base, e);
  }
  if (!f.llama3_scaling) return;
  // RotaryEmbedding._apply_scaling, op by op in fp32. Python scalars enter torch's fp32
  // ops as fp32; `scalar / tensor` is torch's reciprocal(tensor) * scalar.
  const float two_pi = static_cast<float>(2.0 * 3.14159265358979323846);
  const float old_len = f.original_max_position;
  const float low_wavelen = static_cast<float>(static_cast<double>(old_len) / f.low_freq_factor);
  const float high_wavelen =
      static_cast<float>(static_cast<double>(old_len) / f.high_freq_factor);
  const float factor_span = f.high_freq_factor - f.low_freq_factor;
  for (int64_t j = 0; j < half; ++j) {
    const float freq = inv_freq[j];
    const float wavelen = (1.0f / freq) * two_pi;
    float llama = wavelen > low_wavelen ? freq / f.scaling_factor : freq;
    const float smooth = ((1.0f / wavelen) * old_len - f.low_freq_factor) / factor_span;
    const float smoothed = (1.0f - smooth) * llama / f.scaling_factor + smooth * llama;
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    if (medium) llama = smoothed;
    inv_freq[j] = llama;
  }
}

// RopePositionScale: the fp32 multiplier of positions (Megatron: seq *= 1 /
// seq_len_interpolation_factor, an fp32 tensor times the scalar); 1 without
// interpolation (then positions are used as they are, not multiplied).
inline float RopePositionScale(const RopeFrequencies& f) {
  return f.seq_len_interpolation_factor > 0.0f
             ? static_cast<float>(1.0 / static_cast<double>(f.seq_len_interpolation_factor))
             : 1.0f;
}

}  // namespace mxmaca::kernels

#endif  // MXMACA_KERNELS_ROPE_FREQUENCIES_H_
