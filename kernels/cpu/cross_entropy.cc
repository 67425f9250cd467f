// kernels/cpu/cross_entropy.cc: placeholder bodies (implementation in progress).
#include "kernels/cpu/cross_entropy.h"

namespace mxmaca::kernels::cpu {

void CrossEntropyForward(const ExecContext& ctx, const float* logits,
                         const int32_t* targets, int64_t n, int64_t vp, int64_t v,
                         float* loss, float* lse) {}

void CrossEntropyBackward(const ExecContext& ctx, const float* logits,
                          const int32_t* targets, const float* lse, const float* dloss,
                          int64_t n, int64_t vp, int64_t v, float* dlogits) {}


}  // namespace mxmaca::kernels::cpu
