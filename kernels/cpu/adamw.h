// kernels/cpu/adamw.h: the AdamW optimizer step on fp32 master weights.
//
// Loshchilov & Hutter, "Decoupled Weight Decay Regularization" (ICLR 2019), in the exact
// operation order of torch.optim.AdamW in torch 1.13 (torch/optim/adamw.py,
// _single_tensor_adamw, foreach=False, amsgrad=False, maximize=False), fp32 throughout:
//   param *= 1 - lr * weight_decay
//   exp_avg    = exp_avg * beta1 + (1 - beta1) * grad       (mul_(beta1).add_(grad, alpha))
//   exp_avg_sq = exp_avg_sq * beta2 + (1 - beta2) * grad * grad   (mul_.addcmul_)
//   bias_correction1 = 1 - beta1^step, bias_correction2 = 1 - beta2^step
//   step_size = lr / bias_correction1        (scalars in double, as Python floats, then
//                                             rounded to fp32 where they meet a tensor)
//   denom = sqrt(exp_avg_sq) / sqrt(bias_correction2) + eps
//   param -= step_size * exp_avg / denom
// Megatron uses the same update (apex/TE FusedAdam with adam_w_mode); the step count is
// per optimizer step, starting at 1.
#ifndef MXMACA_KERNELS_CPU_ADAMW_H_
#define MXMACA_KERNELS_CPU_ADAMW_H_

#include <cstdint>

#include "kernels/exec_context.h"

namespace mxmaca::kernels::cpu {

// AdamWStep: one AdamW update of n parameters in place. param, grad, exp_avg, exp_avg_sq:
// fp32 [n] (exp_avg and exp_avg_sq start at zero). step >= 1 is the 1-based step number
// after incrementing (torch's state['step']). Element-wise: bits independent of threads.
void AdamWStep(const ExecContext& ctx, float* param, const float* grad, float* exp_avg,
               float* exp_avg_sq, int64_t n, float lr, float beta1, float beta2, float eps,
               float weight_decay, int64_t step);

}  // namespace mxmaca::kernels::cpu

#endif  // MXMACA_KERNELS_CPU_ADAMW_H_
