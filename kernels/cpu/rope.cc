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
  const float pos_scale = RopePositionScale(f);
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
