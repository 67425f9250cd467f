// layers/grad_clip.cc: see grad_clip.h.
#include "layers/grad_clip.h"

#include <cmath>

#include "kernels/cpu/elementwise.h"

namespace mxmaca::layers {

double GradNormSquared(const kernels::ExecContext& ctx, absl::Span<const GradSpan> grads) {
  double total = 0.0;
  for (const GradSpan& g : grads) total += kernels::cpu::SumSquares(ctx, g.grad, g.numel);
  return total;
}

double ClipGradsByTotalNorm(const kernels::ExecContext& ctx, absl::Span<const GradSpan> grads,
                            double total_norm, double max_norm) {
  if (!(max_norm > 0.0) || !std::isfinite(total_norm)) return 1.0;
  const double clip_coeff = max_norm / (total_norm + 1.0e-6);
  if (clip_coeff >= 1.0) return 1.0;
  for (const GradSpan& g : grads) {
    kernels::cpu::Scale(ctx, g.grad, g.numel, static_cast<float>(clip_coeff));
  }
  return clip_coeff;
}

}  // namespace mxmaca::layers
