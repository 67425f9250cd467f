// layers/grad_clip.h: the global gradient norm and clipping by it.
//
// Megatron: megatron/core/optimizer/clip_grads.py (get_grad_norm_fp32,
// clip_grad_by_total_norm_fp32): total_norm = sqrt(sum over all gradient elements of g^2),
// each logical parameter counted once (tied or TP-replicated copies excluded by the
// caller); if max_norm > 0: clip_coeff = max_norm / (total_norm + 1e-6), and when
// clip_coeff < 1 every gradient is multiplied by it. We accumulate squares in fp64 in a
// fixed order (tensor order, then kernels::cpu::SumSquares' fixed blocking), so the norm
// does not depend on thread count.
#ifndef MXMACA_LAYERS_GRAD_CLIP_H_
#define MXMACA_LAYERS_GRAD_CLIP_H_

#include <cstdint>

#include "absl/types/span.h"
#include "kernels/exec_context.h"

namespace mxmaca::layers {

// GradSpan: `numel` fp32 gradient values.
struct GradSpan {
  float* grad = nullptr;
  int64_t numel = 0;
};

// GradNormSquared: sum of g^2 over all spans, fp64, in span order.
double GradNormSquared(const kernels::ExecContext& ctx, absl::Span<const GradSpan> grads);

// ClipGradsByTotalNorm: scales every span by max_norm / (total_norm + 1e-6) when that
// coefficient is below 1 (and max_norm > 0). Returns the coefficient applied (1 if none).
// A non-finite total_norm clips nothing (the caller skips such steps).
double ClipGradsByTotalNorm(const kernels::ExecContext& ctx, absl::Span<const GradSpan> grads,
                            double total_norm, double max_norm);

}  // namespace mxmaca::layers

#endif  // MXMACA_LAYERS_GRAD_CLIP_H_
