// kernels/cpu/gemm.h: matrix products on CPU through oneDNN.
//
// Row-major throughout. op(X) = X or X^T. Accumulation is fp32; under
// ctx.precision == kBf16 the inputs A and B are rounded to bf16 first (the mixed-precision
// structure of Megatron's --bf16; oneDNN's bf16 matmul), C stays fp32.
// oneDNN is told ctx.num_threads per call.
//
// Determinism (kern): C is cut into at most 4 row (or column) tiles chosen from (m, n, k)
// alone; each tile is one single-threaded oneDNN call and OpenMP spreads the tiles over
// ctx.num_threads threads, so the bits never depend on the thread count (oneDNN's own
// threading may split k and would). Under kBf16 the bf16 copies of A and B live in
// thread_local scratch that grows to the largest operands seen (e.g. 200 MB for the
// [50304, 2048] logits weight-gradient operand).
#ifndef MXMACA_KERNELS_CPU_GEMM_H_
#define MXMACA_KERNELS_CPU_GEMM_H_

#include <cstdint>

#include "kernels/exec_context.h"

namespace mxmaca::kernels::cpu {

// Gemm: C[m, n] = alpha * op(A)[m, k] · op(B)[k, n] + beta * C[m, n].
// A is [m, k] (or [k, m] when trans_a), leading dimension lda; likewise B [k, n] (or
// [n, k]) with ldb; C [m, n] with ldc. fp32 pointers. beta = 0 ignores C's contents
// (NaNs in C do not propagate).
void Gemm(const ExecContext& ctx, bool trans_a, bool trans_b, int64_t m, int64_t n,
          int64_t k, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc);

// GemmStridedBatched: `batch` independent Gemm calls; operand i starts at
// a + i * stride_a (likewise b, c). Used by attention ([b·heads] batches).
void GemmStridedBatched(const ExecContext& ctx, bool trans_a, bool trans_b, int64_t m,
                        int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                        int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                        float beta, float* c, int64_t ldc, int64_t stride_c,
                        int64_t batch);

}  // namespace mxmaca::kernels::cpu

#endif  // MXMACA_KERNELS_CPU_GEMM_H_
