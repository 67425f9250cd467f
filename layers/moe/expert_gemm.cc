// layers/moe/expert_gemm.cc: fixed-shape row blocks over kernels/cpu/gemm.h.
#include "layers/moe/expert_gemm.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemm.h"

namespace mxmaca::layers::moe {
namespace {

// 64-byte aligned growable scratch (std::vector<float> is only 16-byte aligned).
float* AlignedScratch(std::vector<float>& buf, int64_t size) {
  const int64_t need = size + 16;
  if (static_cast<int64_t>(buf.size()) < need) buf.resize(need);
  const uintptr_t p = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<float*>((p + 63) & ~uintptr_t{63});
}

}  // namespace

void BatchInvariantGemm(const kernels::ExecContext& ctx, bool trans_b, int64_t m, int64_t n,
                        int64_t k, const float* a, const float* b, float* c) {
  if (m <= 0 || n <= 0) return;
  constexpr int64_t kRows = kInvariantBlockRows;
  thread_local std::vector<float> a_buf, c_buf;
  float* a_blk = AlignedScratch(a_buf, kRows * k);
  float* c_blk = AlignedScratch(c_buf, kRows * n);
  for (int64_t r0 = 0; r0 < m; r0 += kRows) {
    const int64_t rows = std::min(kRows, m - r0);
    std::memcpy(a_blk, a + r0 * k, sizeof(float) * rows * k);
    if (rows < kRows) std::memset(a_blk + rows * k, 0, sizeof(float) * (kRows - rows) * k);
    kernels::cpu::Gemm(ctx, /*trans_a=*/false, trans_b, kRows, n, k, 1.0f, a_blk, k, b,
                       trans_b ? k : n, 0.0f, c_blk, n);
    std::memcpy(c + r0 * n, c_blk, sizeof(float) * rows * n);
  }
}

}  // namespace mxmaca::layers::moe
