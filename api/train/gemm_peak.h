// api/train/gemm_peak.h: the machine's measured GEMM peak, the denominator of MFU on CPU.
#ifndef MXMACA_API_TRAIN_GEMM_PEAK_H_
#define MXMACA_API_TRAIN_GEMM_PEAK_H_

#include "kernels/exec_context.h"

namespace mxmaca::api {

// MeasureGemmPeakGflops: GFLOP/s of a square 2048^3 kernels::cpu::Gemm at ctx's precision
// and thread count: one warm-up call, then the best of 3 timed calls (~0.2 s in all on
// this machine's 2 cores). Counts 2·n³ FLOPs per call.
double MeasureGemmPeakGflops(const kernels::ExecContext& ctx);

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_GEMM_PEAK_H_
