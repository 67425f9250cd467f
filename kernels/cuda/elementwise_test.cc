// kernels/cuda/elementwise_test.cc: element-wise kernels against kernels/cpu (needs a
// GPU; skips with the reason otherwise). Tolerance 1e-5 norm-wise: both sides are fp32
// evaluations of the same formula with few-ulp math functions.
#include "kernels/cuda/elementwise.h"

#include <catch2/catch.hpp>

#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/test_util.h"
#include "kernels/philox.h"

namespace mxmaca::kernels::cuda {
namespace {

using testing::DeviceVector;
using testing::Normal;
using testing::RelErr;

TEST_CASE("activations, bias and reductions match the CPU backend") {
  if (!testing::GpuOrSkip()) return;
  ExecContext ctx;
  const int64_t rows = 67, cols = 130, n = rows * cols;
  const auto x = Normal(1, n, 2.0f), dy = Normal(2, n), bias = Normal(3, cols);
  DeviceVector<float> dx(x), ddy(dy), dbias(bias), out(n);
  std::vector<float> want(n);
  cpu::GeluForward(ctx, x.data(), want.data(), n);
  REQUIRE_OK(GeluForward(ctx, dx.get(), out.get(), n));
  CHECK(RelErr(out.Host(), want) < 1e-5);
  cpu::GeluBackward(ctx, x.data(), dy.data(), want.data(), n);
  REQUIRE_OK(GeluBackward(ctx, dx.get(), ddy.get(), out.get(), n));
  CHECK(RelErr(out.Host(), want) < 1e-5);
  cpu::GeluTanhForward(ctx, x.data(), want.data(), n);
  REQUIRE_OK(GeluTanhForward(ctx, dx.get(), out.get(), n));
  CHECK(RelErr(out.Host(), want) < 1e-5);
  cpu::GeluTanhBackward(ctx, x.data(), dy.data(), want.data(), n);
  REQUIRE_OK(GeluTanhBackward(ctx, dx.get(), ddy.get(), out.get(), n));
  CHECK(RelErr(out.Host(), want) < 1e-5);
  const int64_t f = cols / 2;
  std::vector<float> ys(rows * f), dxs(n);
  cpu::SwigluForward(ctx, x.data(), ys.data(), rows, f);
  REQUIRE_OK(SwigluForward(ctx, dx.get(), out.get(), rows, f));
  auto got = out.Host();
  got.resize(rows * f);
  CHECK(RelErr(got, ys) < 1e-5);
  cpu::SwigluBackward(ctx, x.data(), dy.data(), dxs.data(), rows, f);
  REQUIRE_OK(SwigluBackward(ctx, dx.get(), ddy.get(), out.get(), rows, f));
  CHECK(RelErr(out.Host(), dxs) < 1e-5);
  // AddBias exact (one addition per element); BiasGrad fp32 sums in different orders.
  want = dy;
  cpu::AddBias(ctx, want.data(), bias.data(), rows, cols);
  REQUIRE_OK(AddBias(ctx, ddy.get(), dbias.get(), rows, cols));
  CHECK(ddy.Host() == want);
  std::vector<float> db_want = bias;
  cpu::BiasGrad(ctx, x.data(), rows, cols, db_want.data());
  REQUIRE_OK(BiasGrad(ctx, dx.get(), rows, cols, dbias.get()));
  CHECK(RelErr(dbias.Host(), db_want) < 1e-5);
  DeviceVector<double> partials(kSumSquaresPartials), ss(1);
  REQUIRE_OK(SumSquares(ctx, dx.get(), n, partials.get(), ss.get()));
  const double want_ss = cpu::SumSquares(ctx, x.data(), n);
  CHECK(std::fabs(ss.Host()[0] - want_ss) <= 1e-12 * want_ss);
}

TEST_CASE("dropout draws the CPU backend's mask bit for bit") {
  if (!testing::GpuOrSkip()) return;
  ExecContext ctx;
  const int64_t n = 10007;
  const auto x = Normal(4, n);
  const RngKey key{42, MakeRngStream(1, 0, 3, 2)};
  std::vector<float> want(n);
  cpu::DropoutForward(ctx, x.data(), want.data(), n, 0.3f, key, 12345);
  DeviceVector<float> dx(x), out(n);
  REQUIRE_OK(DropoutForward(ctx, dx.get(), out.get(), n, 0.3f, key, 12345));
  CHECK(out.Host() == want);
  cpu::DropoutBackward(ctx, x.data(), want.data(), n, 0.3f, key, 12345);
  REQUIRE_OK(DropoutBackward(ctx, dx.get(), out.get(), n, 0.3f, key, 12345));
  CHECK(out.Host() == want);
}

}  // namespace
}  // namespace mxmaca::kernels::cuda
