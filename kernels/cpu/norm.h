// kernels/cpu/norm.h: LayerNorm and RMSNorm, forward and backward, on CPU.
//
// N = rows (tokens), H = hidden. x, y, dy, dx: [N, H]; mean, rstd: [N]; gamma, beta,
// dgamma, dbeta: [H]. fp32 with per-row statistics accumulated in fp32 (two-pass:
// mean, then centred sum of squares, as torch's CPU kernel does).
// LayerNorm (Ba, Kiros, Hinton 2016) as torch.nn.functional.layer_norm: biased variance,
// rstd = 1 / sqrt(var + eps). RMSNorm (Zhang & Sennrich 2019) as Megatron's
// megatron/legacy/model/rms_norm.py (x * rsqrt(mean(x^2) + eps) * weight): rstd = 1 / sqrt(mean(x^2) + eps),
// y = x * rstd * gamma.
// Per-row work is independent (rows split across threads); weight gradients reduce over
// rows in fixed blocks of 64 rows, added in block order: the same bits for any
// ctx.num_threads.
#ifndef MXMACA_KERNELS_CPU_NORM_H_
#define MXMACA_KERNELS_CPU_NORM_H_

#include <cstdint>

#include "kernels/exec_context.h"

namespace mxmaca::kernels::cpu {

// LayerNormForward: y = (x - mean) * rstd * gamma + beta. beta may be nullptr (no bias).
// Writes mean[N], rstd[N] (the stash for backward).
void LayerNormForward(const ExecContext& ctx, const float* x, const float* gamma,
                      const float* beta, float eps, int64_t n, int64_t h, float* y,
                      float* mean, float* rstd);

// LayerNormBackwardInput: dx = rstd * (g - mean_h(g) - xhat * mean_h(g * xhat)) with
// g = dy * gamma, xhat = (x - mean) * rstd. Overwrites dx (may alias dy).
void LayerNormBackwardInput(const ExecContext& ctx, const float* dy, const float* x,
                            const float* gamma, const float* mean, const float* rstd,
                            int64_t n, int64_t h, float* dx);

// LayerNormBackwardWeight: dgamma[c] += sum_r dy[r,c] * xhat[r,c];
// dbeta[c] += sum_r dy[r,c] (skipped when dbeta is nullptr). Accumulates.
void LayerNormBackwardWeight(const ExecContext& ctx, const float* dy, const float* x,
                             const float* mean, const float* rstd, int64_t n, int64_t h,
                             float* dgamma, float* dbeta);

// RmsNormForward: y = x * rstd * gamma, rstd[r] = 1 / sqrt(mean_h(x[r]^2) + eps).
void RmsNormForward(const ExecContext& ctx, const float* x, const float* gamma, float eps,
                    int64_t n, int64_t h, float* y, float* rstd);

// RmsNormBackwardInput: dx = rstd * (g - xhat * mean_h(g * xhat)), g = dy * gamma,
// xhat = x * rstd. Overwrites dx (may alias dy).
void RmsNormBackwardInput(const ExecContext& ctx, const float* dy, const float* x,
                          const float* gamma, const float* rstd, int64_t n, int64_t h,
                          float* dx);

// RmsNormBackwardWeight: dgamma[c] += sum_r dy[r,c] * x[r,c] * rstd[r]. Accumulates.
void RmsNormBackwardWeight(const ExecContext& ctx, const float* dy, const float* x,
                           const float* rstd, int64_t n, int64_t h, float* dgamma);

}  // namespace mxmaca::kernels::cpu

#endif  // MXMACA_KERNELS_CPU_NORM_H_
