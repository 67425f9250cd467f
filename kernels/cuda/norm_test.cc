// kernels/cuda/norm_test.cc: LayerNorm / RMSNorm against kernels/cpu (needs a GPU; skips
// with the reason otherwise). 1e-5 norm-wise: fp32 row statistics over H = 384 summed in
// different orders (~1e-7), weight gradients over N = 70 rows likewise.
#include "kernels/cuda/norm.h"

#include <catch2/catch.hpp>

#include "kernels/cpu/norm.h"
#include "kernels/cuda/test_util.h"

namespace mxmaca::kernels::cuda {
namespace {

using testing::DeviceVector;
using testing::Normal;
using testing::RelErr;

TEST_CASE("LayerNorm and RMSNorm forward/backward match the CPU backend") {
  if (!testing::GpuOrSkip()) return;
  ExecContext ctx;
  const int64_t n = 70, h = 384;
  const auto x = Normal(1, n * h, 2.0f, 0.3f), dy = Normal(2, n * h), gamma = Normal(3, h, 0.3f, 1.0f),
             beta = Normal(4, h), g0 = Normal(5, h), b0 = Normal(6, h);
  DeviceVector<float> dx(x), ddy(dy), dgamma(gamma), dbeta(beta), y(n * h), mean(n), rstd(n),
      dxo(n * h), ag(g0), ab(b0);
  std::vector<float> wy(n * h), wmean(n), wrstd(n), wdx(n * h), wg = g0, wb = b0;
  cpu::LayerNormForward(ctx, x.data(), gamma.data(), beta.data(), 1e-5f, n, h, wy.data(), wmean.data(), wrstd.data());
  REQUIRE_OK(LayerNormForward(ctx, dx.get(), dgamma.get(), dbeta.get(), 1e-5f, n, h, y.get(), mean.get(), rstd.get()));
  CHECK(RelErr(y.Host(), wy) < 1e-5);
  CHECK(RelErr(mean.Host(), wmean) < 1e-5);
  CHECK(RelErr(rstd.Host(), wrstd) < 1e-5);
  cpu::LayerNormBackwardInput(ctx, dy.data(), x.data(), gamma.data(), wmean.data(), wrstd.data(), n, h, wdx.data());
  cpu::LayerNormBackwardWeight(ctx, dy.data(), x.data(), wmean.data(), wrstd.data(), n, h, wg.data(), wb.data());
  REQUIRE_OK(LayerNormBackwardInput(ctx, ddy.get(), dx.get(), dgamma.get(), mean.get(), rstd.get(), n, h, dxo.get()));
  REQUIRE_OK(LayerNormBackwardWeight(ctx, ddy.get(), dx.get(), mean.get(), rstd.get(), n, h, ag.get(), ab.get()));
  CHECK(RelErr(dxo.Host(), wdx) < 1e-5);
  CHECK(RelErr(ag.Host(), wg) < 1e-5);
  CHECK(RelErr(ab.Host(), wb) < 1e-5);

  DeviceVector<float> rg(g0);
  wg = g0;
  cpu::RmsNormForward(ctx, x.data(), gamma.data(), 1e-5f, n, h, wy.data(), wrstd.data());
  REQUIRE_OK(RmsNormForward(ctx, dx.get(), dgamma.get(), 1e-5f, n, h, y.get(), rstd.get()));
  CHECK(RelErr(y.Host(), wy) < 1e-5);
  CHECK(RelErr(rstd.Host(), wrstd) < 1e-5);
  cpu::RmsNormBackwardInput(ctx, dy.data(), x.data(), gamma.data(), wrstd.data(), n, h, wdx.data());
  cpu::RmsNormBackwardWeight(ctx, dy.data(), x.data(), wrstd.data(), n, h, wg.data());
  REQUIRE_OK(RmsNormBackwardInput(ctx, ddy.get(), dx.get(), dgamma.get(), rstd.get(), n, h, dxo.get()));
  REQUIRE_OK(RmsNormBackwardWeight(ctx, ddy.get(), dx.get(), rstd.get(), n, h, rg.get()));
  CHECK(RelErr(dxo.Host(), wdx) < 1e-5);
  CHECK(RelErr(rg.Host(), wg) < 1e-5);
}

}  // namespace
}  // namespace mxmaca::kernels::cuda
