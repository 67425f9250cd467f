// api/train/gemm_peak.cc: see gemm_peak.h.
#include "api/train/gemm_peak.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "kernels/cpu/gemm.h"

namespace mxmaca::api {

double MeasureGemmPeakGflops(const kernels::ExecContext& ctx) {
  const int64_t n = 2048;
  std::vector<float> a(n * n), b(n * n), c(n * n);
  for (int64_t i = 0; i < n * n; ++i) {
    a[i] = static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f;
    b[i] = static_cast<float>((i * 104729) % 1000) * 1e-3f - 0.5f;
  }
  double best = 1e30;
  for (int rep = 0; rep < 4; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    kernels::cpu::Gemm(ctx, false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) best = std::min(best, s);
  }
  return 2.0 * n * n * n / best / 1e9;
}

}  // namespace mxmaca::api
