// kernels/cuda/cross_entropy_test.cc: vocab cross-entropy against kernels/cpu (needs a
// GPU; skips with the reason otherwise). 1e-5 norm-wise: fp32 logsumexp over V = 500
// summed in different orders.
#include "kernels/cuda/cross_entropy.h"

#include <catch2/catch.hpp>

#include "kernels/cpu/cross_entropy.h"
#include "kernels/cuda/test_util.h"

namespace mxmaca::kernels::cuda {
namespace {

using testing::DeviceVector;
using testing::Normal;
using testing::RelErr;

TEST_CASE("cross-entropy forward/backward match the CPU backend (padding, other shards)") {
  if (!testing::GpuOrSkip()) return;
  ExecContext ctx;
  const int64_t n = 40, v = 500, vp = 512;
  const auto logits = Normal(1, n * vp, 3.0f), dloss = Normal(2, n);
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 53) % v);
  t[4] = -1;
  t[7] = static_cast<int32_t>(v + 2);
  std::vector<float> loss(n), lse(n), d(n * vp);
  cpu::CrossEntropyForward(ctx, logits.data(), t.data(), n, vp, v, loss.data(), lse.data());
  cpu::CrossEntropyBackward(ctx, logits.data(), t.data(), lse.data(), dloss.data(), n, vp, v, d.data());
  DeviceVector<float> dl(logits), ddl(dloss), gl(n), glse(n), gd(n * vp);
  DeviceVector<int32_t> dt(t);
  REQUIRE_OK(CrossEntropyForward(ctx, dl.get(), dt.get(), n, vp, v, gl.get(), glse.get()));
  CHECK(RelErr(gl.Host(), loss) < 1e-5);
  CHECK(RelErr(glse.Host(), lse) < 1e-5);
  REQUIRE_OK(CrossEntropyBackward(ctx, dl.get(), dt.get(), glse.get(), ddl.get(), n, vp, v, gd.get()));
  CHECK(RelErr(gd.Host(), d) < 1e-5);
  REQUIRE_OK(CrossEntropyBackward(ctx, dl.get(), dt.get(), glse.get(), ddl.get(), n, vp, v, dl.get()));
  CHECK(RelErr(dl.Host(), d) < 1e-5);
}

}  // namespace
}  // namespace mxmaca::kernels::cuda
