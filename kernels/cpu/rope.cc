// kernels/cpu/rope.cc: see rope.h.
#include "kernels/cpu/rope.h"

#include <cmath>

#include "kernels/cpu/parallel.h"

namespace mxmaca::kernels::cpu {
namespace {

// Fills cs[(b*S + s) * half * 2 + {0..half-1}] = cos, [+half..] = sin of the angles
// fp32(position) * inv_freq[j] (fp32 product, as Megatron's torch.outer in fp32).
void FillTable(const ExecContext& ctx, const int32_t* positions, int64_t bs,
               int64_t rotary_dim, const RopeFrequencies& f, float* cs) {
  const int64_t half = rotary_dim / 2;
  float* inv_freq = ThreadScratch(half, 1);
  RopeInvFreq(f, rotary_dim, inv_freq);
  const bool interpolate = f.seq_len_interpolation_factor > 0.0f;
  // Megatron: seq *= 1 / seq_len_interpolation_factor (fp32 tensor times the scalar).
  const float pos_scale =
      interpolate ? static_cast<float>(1.0 / static_cast<double>(f.seq_len_interpolation_factor))
                  : 1.0f;
  ParallelForRows(ctx, bs, half * 8, [&](int64_t t) {
    float pos = static_cast<float>(positions[t]);
    if (interpolate) pos *= pos_scale;
    float* row = cs + t * 2 * half;
    for (int64_t j = 0; j < half; ++j) {
      const double angle = static_cast<double>(pos * inv_freq[j]);
      row[j] = static_cast<float>(std::cos(angle));
      row[half + j] = static_cast<float>(std::sin(angle));
    }
  });
}

// Rotates every [D] row of x [B, NH, S, D] by +angle (sign = 1) or -angle (sign = -1).
void Rotate(const ExecContext& ctx, float* x, const int32_t* positions, int64_t b,
            int64_t s, int64_t heads, int64_t d, int64_t rotary_dim, const RopeFrequencies& f,
            float sign) {
  if (rotary_dim <= 0 || b * s * heads == 0) return;
  const int64_t half = rotary_dim / 2;
  float* cs = ThreadScratch(b * s * 2 * half, 0);
  FillTable(ctx, positions, b * s, rotary_dim, f, cs);
  ParallelForRows(ctx, b * heads, s * rotary_dim, [&](int64_t bh) {
    const int64_t bi = bh / heads;
    for (int64_t si = 0; si < s; ++si) {
      float* row = x + (bh * s + si) * d;
      const float* cosv = cs + (bi * s + si) * 2 * half;
      const float* sinv = cosv + half;
      // Pair j: (row[j], row[j + half]), or (row[2j], row[2j + 1]) interleaved.
      const int64_t first = f.interleaved ? 2 : 1, second = f.interleaved ? 1 : half;
      for (int64_t j = 0; j < half; ++j) {
        float* a = row + j * first;
        float* c = a + second;
        const float x1 = *a, x2 = *c;
        const float sn = sign * sinv[j];
        // [x1 | x2] * cos + [-x2 | x1] * sin
        *a = x1 * cosv[j] - x2 * sn;
        *c = x2 * cosv[j] + x1 * sn;
      }
    }
  });
}

}  // namespace

void RopeInvFreq(const RopeFrequencies& f, int64_t rotary_dim, float* inv_freq) {
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

void RopeForward(const ExecContext& ctx, float* x, const int32_t* positions, int64_t b,
                 int64_t s, int64_t heads, int64_t d, int64_t rotary_dim,
                 const RopeFrequencies& f) {
  Rotate(ctx, x, positions, b, s, heads, d, rotary_dim, f, 1.0f);
}

void RopeBackward(const ExecContext& ctx, float* dx, const int32_t* positions, int64_t b,
                  int64_t s, int64_t heads, int64_t d, int64_t rotary_dim,
                  const RopeFrequencies& f) {
  Rotate(ctx, dx, positions, b, s, heads, d, rotary_dim, f, -1.0f);
}

void RopeForward(const ExecContext& ctx, float* x, const int32_t* positions, int64_t b,
                 int64_t s, int64_t heads, int64_t d, int64_t rotary_dim, float base) {
  RopeFrequencies f;
  f.base = base;
  Rotate(ctx, x, positions, b, s, heads, d, rotary_dim, f, 1.0f);
}

void RopeBackward(const ExecContext& ctx, float* dx, const int32_t* positions, int64_t b,
                  int64_t s, int64_t heads, int64_t d, int64_t rotary_dim, float base) {
  RopeFrequencies f;
  f.base = base;
  Rotate(ctx, dx, positions, b, s, heads, d, rotary_dim, f, -1.0f);
}

}  // namespace mxmaca::kernels::cpu
