// kernels/cpu/norm.cc: placeholder bodies (implementation in progress).
#include "kernels/cpu/norm.h"

namespace mxmaca::kernels::cpu {

void LayerNormForward(const ExecContext& ctx, const float* x, const float* gamma,
                      const float* beta, float eps, int64_t n, int64_t h, float* y,
                      float* mean, float* rstd) {}

void LayerNormBackwardInput(const ExecContext& ctx, const float* dy, const float* x,
                            const float* gamma, const float* mean, const float* rstd,
                            int64_t n, int64_t h, float* dx) {}

void LayerNormBackwardWeight(const ExecContext& ctx, const float* dy, const float* x,
                             const float* mean, const float* rstd, int64_t n, int64_t h,
                             float* dgamma, float* dbeta) {}

void RmsNormForward(const ExecContext& ctx, const float* x, const float* gamma, float eps,
                    int64_t n, int64_t h, float* y, float* rstd) {}

void RmsNormBackwardInput(const ExecContext& ctx, const float* dy, const float* x,
                          const float* gamma, const float* rstd, int64_t n, int64_t h,
                          float* dx) {}

void RmsNormBackwardWeight(const ExecContext& ctx, const float* dy, const float* x,
                           const float* rstd, int64_t n, int64_t h, float* dgamma) {}


}  // namespace mxmaca::kernels::cpu
