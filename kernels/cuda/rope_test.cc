// kernels/cuda/rope_test.cc: RoPE against kernels/cpu (needs a GPU; skips with the reason
// otherwise). 1e-6 norm-wise: the same fp32 angles; cos/sin tables may differ by an fp32
// ulp where CUDA's fp64 cos/sin round differently (~6e-8 relative per element).
#include "kernels/cuda/rope.h"

#include <catch2/catch.hpp>

#include "kernels/cpu/rope.h"
#include "kernels/cuda/test_util.h"

namespace mxmaca::kernels::cuda {
namespace {

using testing::DeviceVector;
using testing::Normal;
using testing::RelErr;

TEST_CASE("RoPE forward/backward match the CPU backend (partial rotary dim, doc positions)") {
  if (!testing::GpuOrSkip()) return;
  ExecContext ctx;
  const int64_t b = 2, s = 37, heads = 3, d = 24, rotary = 16;
  std::vector<int32_t> pos(b * s);
  for (int64_t i = 0; i < b * s; ++i) pos[i] = static_cast<int32_t>(i % s < 20 ? i % s : i % s - 20);
  const auto x = Normal(1, b * heads * s * d);
  DeviceVector<int32_t> dpos(pos);
  for (int dir = 0; dir < 2; ++dir) {
    std::vector<float> want = x;
    DeviceVector<float> dx(x);
    if (dir == 0) {
      cpu::RopeForward(ctx, want.data(), pos.data(), b, s, heads, d, rotary, 10000.0f);
      REQUIRE_OK(RopeForward(ctx, dx.get(), dpos.get(), b, s, heads, d, rotary, 10000.0f));
    } else {
      cpu::RopeBackward(ctx, want.data(), pos.data(), b, s, heads, d, rotary, 10000.0f);
      REQUIRE_OK(RopeBackward(ctx, dx.get(), dpos.get(), b, s, heads, d, rotary, 10000.0f));
    }
    CHECK(RelErr(dx.Host(), want) < 1e-6);
  }
}

TEST_CASE("RoPE refuses an odd or too large rotary dim") {
  ExecContext ctx;
  CHECK_FALSE(RopeForward(ctx, nullptr, nullptr, 1, 4, 1, 8, 7, 10000.0f).ok());
  CHECK_FALSE(RopeForward(ctx, nullptr, nullptr, 1, 4, 1, 8, 10, 10000.0f).ok());
}

}  // namespace
}  // namespace mxmaca::kernels::cuda
