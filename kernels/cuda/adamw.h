// kernels/cuda/adamw.h: the AdamW optimizer step on fp32 master weights, GPU.
//
// The CUDA twin of kernels/cpu/adamw.h: torch 1.13 _single_tensor_adamw's operation
// order, fp32 per element, with the step scalars computed on the host in double and
// rounded to fp32 exactly as the CPU backend does (so each element sees the same fp32
// operations; the GPU's sqrtf and division are IEEE round-to-nearest, so results match the
// CPU backend bit for bit when nvcc does not contract a*b+c — we build with
// -fmad=false for this file).
//   param *= 1 - lr * wd; m = m b1 + (1 - b1) g; v = v b2 + (1 - b2) g g;
//   param -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps).
#ifndef MXMACA_KERNELS_CUDA_ADAMW_H_
#define MXMACA_KERNELS_CUDA_ADAMW_H_

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/exec_context.h"

namespace mxmaca::kernels::cuda {

// AdamWStep: one update of n parameters in place. param, grad, exp_avg, exp_avg_sq: fp32
// device [n]. step >= 1 (1-based, after incrementing). Errors: step < 1, n < 0.
CudaStatus AdamWStep(const ExecContext& ctx, float* param, const float* grad,
                     float* exp_avg, float* exp_avg_sq, int64_t n, float lr, float beta1,
                     float beta2, float eps, float weight_decay, int64_t step);

}  // namespace mxmaca::kernels::cuda

#endif  // MXMACA_KERNELS_CUDA_ADAMW_H_
