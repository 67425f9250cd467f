// kernels/cpu/rope.cc: placeholder bodies (implementation in progress).
#include "kernels/cpu/rope.h"

namespace mxmaca::kernels::cpu {

void RopeForward(const ExecContext& ctx, float* x, const int32_t* positions, int64_t b,
                 int64_t s, int64_t heads, int64_t d, int64_t rotary_dim, float base) {}

void RopeBackward(const ExecContext& ctx, float* dx, const int32_t* positions, int64_t b,
                  int64_t s, int64_t heads, int64_t d, int64_t rotary_dim, float base) {}


}  // namespace mxmaca::kernels::cpu
