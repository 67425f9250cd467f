// kernels/cuda/adamw_test.cc: AdamW against kernels/cpu, bit for bit (needs a GPU; skips
// with the reason otherwise): the same fp32 operations in the same order, no fused
// multiply-add on either side, IEEE sqrt and division.
#include "kernels/cuda/adamw.h"

#include <catch2/catch.hpp>

#include "kernels/cpu/adamw.h"
#include "kernels/cuda/test_util.h"

namespace mxmaca::kernels::cuda {
namespace {

using testing::DeviceVector;
using testing::Normal;

TEST_CASE("AdamW steps match the CPU backend bits") {
  if (!testing::GpuOrSkip()) return;
  ExecContext ctx;
  const int64_t n = 5000;
  std::vector<float> p = Normal(1, n, 0.02f), m(n, 0.0f), v(n, 0.0f);
  DeviceVector<float> dp(p), dm(m), dv(v);
  for (int64_t step = 1; step <= 4; ++step) {
    const auto g = Normal(10 + step, n, 0.01f);
    DeviceVector<float> dg(g);
    cpu::AdamWStep(ctx, p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step);
    REQUIRE_OK(AdamWStep(ctx, dp.get(), dg.get(), dm.get(), dv.get(), n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step));
  }
  CHECK(dp.Host() == p);
  CHECK(dm.Host() == m);
  CHECK(dv.Host() == v);
}

}  // namespace
}  // namespace mxmaca::kernels::cuda
