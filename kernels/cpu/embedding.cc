// kernels/cpu/embedding.cc: placeholder bodies (implementation in progress).
#include "kernels/cpu/embedding.h"

namespace mxmaca::kernels::cpu {

void EmbeddingForward(const ExecContext& ctx, const int32_t* ids, int64_t n,
                      const float* table, int64_t h, float* out, bool accumulate) {}

void EmbeddingBackward(const ExecContext& ctx, const int32_t* ids, int64_t n,
                       const float* dout, int64_t h, float* dtable) {}


}  // namespace mxmaca::kernels::cpu
