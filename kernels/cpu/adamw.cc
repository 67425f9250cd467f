// kernels/cpu/adamw.cc: see adamw.h.
#include "kernels/cpu/adamw.h"

#include <cmath>

#include "kernels/cpu/parallel.h"

namespace mxmaca::kernels::cpu {

void AdamWStep(const ExecContext& ctx, float* param, const float* grad, float* exp_avg,
               float* exp_avg_sq, int64_t n, float lr, float beta1, float beta2, float eps,
               float weight_decay, int64_t step) {
  // Host scalars in double, as torch computes them from Python floats; each is rounded
  // to fp32 where it meets an fp32 tensor (torch's CPU kernels take scalar_t scalars).
  const double lr_d = lr, b1 = beta1, b2 = beta2;
  const float decay = static_cast<float>(1.0 - lr_d * static_cast<double>(weight_decay));
  const float one_minus_b1 = static_cast<float>(1.0 - b1);
  const float one_minus_b2 = static_cast<float>(1.0 - b2);
  const double bias_correction1 = 1.0 - std::pow(b1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(b2, static_cast<double>(step));
  const float neg_step_size = static_cast<float>(-(lr_d / bias_correction1));
  const float bc2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  ParallelForRange(ctx, n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float g = grad[i];
      float p = param[i] * decay;                                // param.mul_(1 - lr*wd)
      const float m = exp_avg[i] * beta1 + one_minus_b1 * g;     // mul_(b1).add_(g, 1-b1)
      const float v = exp_avg_sq[i] * beta2 + one_minus_b2 * g * g;  // mul_.addcmul_
      const float denom = std::sqrt(v) / bc2_sqrt + eps;         // (sqrt / bc2_sqrt) + eps
      p = p + neg_step_size * m / denom;                         // addcdiv_(m, denom, -ss)
      param[i] = p;
      exp_avg[i] = m;
      exp_avg_sq[i] = v;
    }
  });
}

}  // namespace mxmaca::kernels::cpu
