// layers/moe/expert_gemm.h: a row-wise batch-invariant matrix product for the expert MLPs.
//
// Problem (issue 7, "Batch invariance"): a token's expert output must not depend on how
// many other tokens its expert received. kernels/cpu/gemm.h is deterministic for a given
// shape but NOT invariant in the row count m: measured with oneDNN 2.6.3
// (gemm_batch_invariance_test), a row's bits change between m = 1, m in [2, 8] (or up to
// 65 for k = 1024) and larger m, because oneDNN picks a different kernel / k-blocking by
// m. Within one m the row's position and the other rows' values do not matter.
//
// Fix: BatchInvariantGemm cuts the rows into blocks of exactly kInvariantBlockRows rows and
// runs every block as the SAME Gemm call shape (kInvariantBlockRows, n, k) on a 64-byte
// aligned, zero-padded copy of the block, so each output row is a function of that row of
// A and of B only. The extra cost is the copy (m (k + n) floats) and the padding rows of the
// last block (< kInvariantBlockRows rows of work per call).
#ifndef MXMACA_LAYERS_MOE_EXPERT_GEMM_H_
#define MXMACA_LAYERS_MOE_EXPERT_GEMM_H_

#include <cstdint>

#include "kernels/exec_context.h"

namespace mxmaca::layers::moe {

// kInvariantBlockRows: the fixed row count of every Gemm call BatchInvariantGemm makes.
// 64 keeps oneDNN's packing of B (k * n per call) small next to the block's 64 k n
// multiply-adds. Measured (1 thread, [1024, 512] x [512, 2048]^T, shared 2-core machine):
// 24-28 ms against 21-26 ms for one plain Gemm call, i.e. 10-25% slower.
inline constexpr int64_t kInvariantBlockRows = 64;

// BatchInvariantGemm: C[m, n] = A[m, k] · op(B), op(B) = B^T when trans_b (B [n, k],
// row-major, leading dimension k) else B ([k, n], leading dimension n). A is row-major
// with leading dimension k, C with leading dimension n; fp32; C is overwritten (NaNs in C
// do not propagate). Row i of C depends only on row i of A and on B (bit-identical for any
// m, any position of the row, any thread count); ctx.precision is honoured per block.
// m == 0 is a no-op. Uses thread_local scratch of kInvariantBlockRows * (k + n) floats.
void BatchInvariantGemm(const kernels::ExecContext& ctx, bool trans_b, int64_t m, int64_t n,
                        int64_t k, const float* a, const float* b, float* c);

}  // namespace mxmaca::layers::moe

#endif  // MXMACA_LAYERS_MOE_EXPERT_GEMM_H_
