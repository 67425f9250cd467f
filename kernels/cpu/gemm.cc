// kernels/cpu/gemm.cc: placeholder bodies (implementation in progress).
#include "kernels/cpu/gemm.h"

namespace mxmaca::kernels::cpu {

void Gemm(const ExecContext& ctx, bool trans_a, bool trans_b, int64_t m, int64_t n,
          int64_t k, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {}

void GemmStridedBatched(const ExecContext& ctx, bool trans_a, bool trans_b, int64_t m,
                        int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                        int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                        float beta, float* c, int64_t ldc, int64_t stride_c,
                        int64_t batch) {}


}  // namespace mxmaca::kernels::cpu
