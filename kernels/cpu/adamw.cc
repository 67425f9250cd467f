// kernels/cpu/adamw.cc: see adamw.h. Each element is updated by element_math's
// AdamWElement, the function the CUDA kernel runs (kernels/cuda/adamw.cu).
#include "kernels/cpu/adamw.h"

#include "kernels/cpu/parallel.h"
#include "kernels/element_math.h"

namespace mxmaca::kernels::cpu {

void AdamWStep(const ExecContext& ctx, float* param, const float* grad, float* exp_avg,
               float* exp_avg_sq, int64_t n, float lr, float beta1, float beta2, float eps,
               float weight_decay, int64_t step) {
  // Host scalars in double, as torch computes them from Python floats; each is rounded
  // to fp32 where it meets an fp32 tensor (torch's CPU kernels take scalar_t scalars).
  const element_math::AdamWCoefficients c =
      element_math::MakeAdamWCoefficients(lr, beta1, beta2, eps, weight_decay, step);
  ParallelForRange(ctx, n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      element_math::AdamWElement(c, grad[i], param + i, exp_avg + i, exp_avg_sq + i);
    }
  });
}

}  // namespace mxmaca::kernels::cpu
