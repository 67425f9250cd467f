// layers/internal/gelu_tanh_test.cc: against an fp64 evaluation and a central difference.
#include "layers/internal/gelu_tanh.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

namespace mxmaca::layers::internal {
namespace {

double GeluTanh64(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST_CASE("GeluTanh forward and backward against fp64") {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const int n = 4096;
  std::vector<float> x(n), y(n), dy(n), dx(n);
  for (int i = 0; i < n; ++i) {
    x[i] = normal(rng);
    dy[i] = normal(rng);
  }
  kernels::ExecContext ctx;
  GeluTanhForward(ctx, x.data(), y.data(), n);
  GeluTanhBackward(ctx, x.data(), dy.data(), dx.data(), n);
  for (int i = 0; i < n; ++i) {
    const double want = GeluTanh64(x[i]);
    // fp32 evaluation: a few ulps of |x| (tanh and the cubic each round once or twice).
    CHECK(std::abs(y[i] - want) <= 1e-6 * (1.0 + std::abs(x[i])));
    // The derivative against a central difference of the fp64 function (h = 1e-5: the
    // truncation error h^2 f'''/6 is below 1e-9). The fp32 derivative sums terms of size
    // up to ~|x| with ~10 roundings each: bound 1e-5 |dy| (1 + |x|); a wrong formula is
    // off by O(|dy|).
    const double h = 1e-5;
    const double d = (GeluTanh64(x[i] + h) - GeluTanh64(x[i] - h)) / (2 * h);
    CHECK(std::abs(dx[i] - dy[i] * d) <= 1e-5 * std::abs(dy[i]) * (1.0 + std::abs(x[i])));
  }
}

}  // namespace
}  // namespace mxmaca::layers::internal
