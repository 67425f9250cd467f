// kernels/cpu/parallel.h: OpenMP loop helpers for the CPU kernels (package-private).
//
// Loops split independent work (rows, element ranges, blocks) statically over at most
// ctx.num_threads threads. None of them changes what is computed per row/element/block,
// so results do not depend on the thread count; reductions across rows are the caller's
// job and must use a fixed blocking (see BiasGrad).
#ifndef MXMACA_KERNELS_CPU_PARALLEL_H_
#define MXMACA_KERNELS_CPU_PARALLEL_H_

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/exec_context.h"

namespace mxmaca::kernels::cpu {

// Below this many elements of work a loop runs on the calling thread (an OpenMP fork
// costs a few microseconds).
inline constexpr int64_t kParallelMinWork = 32768;

// ParallelForRows: calls f(r) for r in [0, rows), rows split statically over the
// threads. work_per_row (elements touched per row) only decides whether to fork.
template <typename F>
void ParallelForRows(const ExecContext& ctx, int64_t rows, int64_t work_per_row, F&& f) {
  if (rows <= 0) return;
  const int nt = static_cast<int>(std::min<int64_t>(std::max(ctx.num_threads, 1), rows));
  if (nt <= 1 || rows * work_per_row < kParallelMinWork) {
    for (int64_t r = 0; r < rows; ++r) f(r);
    return;
  }
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; ++r) f(r);
}

// ParallelForRange: calls f(begin, end) on disjoint chunks covering [0, n).
template <typename F>
void ParallelForRange(const ExecContext& ctx, int64_t n, F&& f) {
  if (n <= 0) return;
  constexpr int64_t kGrain = 16384;
  const int64_t chunks = (n + kGrain - 1) / kGrain;
  const int nt = static_cast<int>(std::min<int64_t>(std::max(ctx.num_threads, 1), chunks));
  if (nt <= 1) {
    f(int64_t{0}, n);
    return;
  }
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) f(c * kGrain, std::min(n, (c + 1) * kGrain));
}

// ThreadScratch: a float buffer of at least n elements owned by the calling thread,
// reused across calls (grows, never shrinks). `slot` selects one of a few independent
// buffers for kernels that need more than one at a time.
inline float* ThreadScratch(int64_t n, int slot = 0) {
  thread_local std::vector<float> buffers[4];
  std::vector<float>& b = buffers[slot];
  if (static_cast<int64_t>(b.size()) < n) b.resize(n);
  return b.data();
}

// LaneSum: sum_i f(i) for i in [0, n) in fp32 with 8 interleaved partial sums
// (lane i % 8, combined pairwise at the end): a fixed order the compiler can vectorise
// without -ffast-math, and relative error ~ (n/8 + 3) u instead of n u.
template <typename F>
inline float LaneSum(int64_t n, F&& f) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) lane[l] += f(i + l);
  }
  for (int l = 0; i < n; ++i, ++l) lane[l] += f(i);
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
         ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

}  // namespace mxmaca::kernels::cpu

#endif  // MXMACA_KERNELS_CPU_PARALLEL_H_
