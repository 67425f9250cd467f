// kernels/cpu/adamw.cc: placeholder bodies (implementation in progress).
#include "kernels/cpu/adamw.h"

namespace mxmaca::kernels::cpu {

void AdamWStep(const ExecContext& ctx, float* param, const float* grad, float* exp_avg,
               float* exp_avg_sq, int64_t n, float lr, float beta1, float beta2, float eps,
               float weight_decay, int64_t step) {}


}  // namespace mxmaca::kernels::cpu
