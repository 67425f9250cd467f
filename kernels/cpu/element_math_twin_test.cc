// kernels/cpu/element_math_twin_test.cc: the CPU kernels compute every element with the
// functions the CUDA kernels run (kernels/element_math.h), bit for bit — vector lanes and
// tails alike — so this CI test, which has no GPU, checks the GPU's per-element arithmetic.
// Inputs are drawn fresh each run (seed printed) over a range that covers the functions'
// branches (saturated tails, the exp flush to zero, negative and positive arguments), plus
// fixed special values (0, -0, +-inf, NaN). Also: the shared functions' accuracy against
// double-precision libm, with bounds from their sources (element_math.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/element_math.h"
#include "kernels/philox.h"

namespace mxmaca::kernels::cpu {
namespace {

namespace em = element_math;

uint32_t FreshSeed() {
  const uint32_t seed = std::random_device{}();
  std::printf("element_math_twin_test seed %u\n", seed);
  return seed;
}

// Inputs: n values, uniform in [-lo, lo], with special values in the first slots. n = 1003
// is not a multiple of 8, so every kernel runs vector lanes and a scalar tail.
std::vector<float> Inputs(uint32_t seed, float range, bool specials = true) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-range, range);
  std::vector<float> x(1003);
  for (float& v : x) v = u(rng);
  if (specials) {
    const float inf = std::numeric_limits<float>::infinity();
    const float sp[] = {0.0f, -0.0f, inf, -inf, 1e-30f, -1e-30f, 9.5f, -9.5f, 88.5f, -90.0f};
    for (size_t i = 0; i < sizeof(sp) / sizeof(sp[0]); ++i) x[i * 97 % x.size()] = sp[i];
  }
  return x;
}

bool SameBits(float a, float b) {
  uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return ua == ub || (std::isnan(a) && std::isnan(b));
}

// CheckBits: got[i] has the bits of want(i) for every i; reports the first mismatch.
template <typename F>
void CheckBits(const std::vector<float>& got, F want, const char* what) {
  for (size_t i = 0; i < got.size(); ++i) {
    const float w = want(i);
    if (!SameBits(got[i], w)) {
      FAIL(what << ": element " << i << " is " << got[i] << ", element_math gives " << w);
    }
  }
  SUCCEED(what);
}

TEST_CASE("GELU kernels equal element_math per element, bit for bit") {
  const ExecContext ctx;
  const uint32_t seed = FreshSeed();
  const std::vector<float> x = Inputs(seed, 12.0f);
  const std::vector<float> dy = Inputs(seed + 1, 2.0f, /*specials=*/false);
  std::vector<float> y(x.size()), dx(x.size());

  GeluForward(ctx, x.data(), y.data(), x.size());
  CheckBits(y, [&](size_t i) { return em::GeluScalar(x[i]); }, "GeluForward");
  GeluBackward(ctx, x.data(), dy.data(), dx.data(), x.size());
  CheckBits(dx, [&](size_t i) { return dy[i] * em::GeluGradScalar(x[i]); }, "GeluBackward");
  GeluTanhForward(ctx, x.data(), y.data(), x.size());
  CheckBits(y, [&](size_t i) { return x[i] * em::TanhGeluScalar(x[i]).s; }, "GeluTanhForward");
  GeluTanhBackward(ctx, x.data(), dy.data(), dx.data(), x.size());
  CheckBits(dx, [&](size_t i) { return dy[i] * em::TanhGeluGradScalar(x[i]); },
            "GeluTanhBackward");
}

TEST_CASE("SwiGLU kernels equal element_math per element, bit for bit") {
  const ExecContext ctx;
  const uint32_t seed = FreshSeed();
  const int64_t rows = 7, f = 43;  // f % 8 != 0: vector lanes and a tail in every row
  std::vector<float> x = Inputs(seed, 12.0f);
  x.resize(rows * 2 * f);
  std::vector<float> dy = Inputs(seed + 2, 2.0f, false);
  dy.resize(rows * f);
  std::vector<float> y(rows * f), dx(rows * 2 * f);
  SwigluForward(ctx, x.data(), y.data(), rows, f);
  CheckBits(y, [&](size_t i) {
    const int64_t r = i / f, c = i % f;
    return em::SwigluScalar(x[r * 2 * f + c], x[r * 2 * f + f + c]);
  }, "SwigluForward");
  SwigluBackward(ctx, x.data(), dy.data(), dx.data(), rows, f);
  CheckBits(dx, [&](size_t i) {
    const int64_t r = i / (2 * f), c = i % (2 * f);
    const int64_t cc = c < f ? c : c - f;
    const em::SwigluGrad g =
        em::SwigluGradScalar(x[r * 2 * f + cc], x[r * 2 * f + f + cc], dy[r * f + cc]);
    return c < f ? g.dgate : g.dup;
  }, "SwigluBackward");
}

TEST_CASE("Dropout kernel equals element_math with Philox draws, bit for bit") {
  const ExecContext ctx;
  const uint32_t seed = FreshSeed();
  const std::vector<float> x = Inputs(seed, 3.0f);
  std::vector<float> y(x.size());
  const RngKey key{seed, 17};
  const float p = 0.3f, scale = 1.0f / (1.0f - p);
  const int64_t offset = 12345;
  DropoutForward(ctx, x.data(), y.data(), x.size(), p, key, offset);
  CheckBits(y, [&](size_t i) {
    return em::DropoutElement(x[i], UniformAt(key, offset + i), p, scale);
  }, "DropoutForward");
}

TEST_CASE("AdamW kernel equals element_math per element, bit for bit") {
  const ExecContext ctx;
  const uint32_t seed = FreshSeed();
  const std::vector<float> g = Inputs(seed, 1.0f, false);
  std::vector<float> p = Inputs(seed + 3, 1.0f, false), m = Inputs(seed + 4, 0.1f, false),
                     v = Inputs(seed + 5, 0.01f, false);
  for (float& e : v) e = std::fabs(e);
  std::vector<float> p2 = p, m2 = m, v2 = v;
  const float lr = 3e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
  const int64_t step = 7;
  AdamWStep(ctx, p.data(), g.data(), m.data(), v.data(), p.size(), lr, b1, b2, eps, wd, step);
  const em::AdamWCoefficients c = em::MakeAdamWCoefficients(lr, b1, b2, eps, wd, step);
  for (size_t i = 0; i < p2.size(); ++i) em::AdamWElement(c, g[i], &p2[i], &m2[i], &v2[i]);
  CheckBits(p, [&](size_t i) { return p2[i]; }, "AdamW param");
  CheckBits(m, [&](size_t i) { return m2[i]; }, "AdamW exp_avg");
  CheckBits(v, [&](size_t i) { return v2[i]; }, "AdamW exp_avg_sq");
}

// Accuracy of the shared functions against libm in double (u = 2^-24, fp32's unit
// roundoff). exp: Cephes expf is ~2 ulp = 4u; we allow 3 ulp = 6u relative on [-86.5, 88].
// erfc(z) = t exp(arg), arg = (-(z z) + c0) + t p(t): Numerical Recipes' formula is within
// 1.2e-7 relative of erfc; fp32 evaluation adds an absolute error in arg of at most
// u z^2 (z z) + u (z^2 + 1.3) (first sum) + u (z^2 + 2.6) (second sum) + ~3u (t p, with
// |t p| < 1.3 and t's own rounding) <= u (3 z^2 + 7), which exp turns into that relative
// error, plus 4u from ExpScalar, u from t's rounding and u from the final product: in all
// 1.2e-7 + u (3 z^2 + 13) relative.
TEST_CASE("element_math exp and erfc are within their stated error bounds") {
  std::mt19937 rng(FreshSeed());
  std::uniform_real_distribution<float> ux(-86.5f, 88.0f), uz(0.0f, 4.0f);
  const double u = std::ldexp(1.0, -24);
  for (int i = 0; i < 200000; ++i) {
    const float x = ux(rng);
    const double want = std::exp(static_cast<double>(x));
    REQUIRE(std::fabs(em::ExpScalar(x) - want) <= 6 * u * want);
    const float z = uz(rng);
    const double ez = std::erfc(static_cast<double>(z));
    const double bound = 1.2e-7 + u * (3.0 * static_cast<double>(z) * z + 13.0);
    REQUIRE(std::fabs(em::ErfcScalar(z) - ez) <= bound * ez);
  }
  REQUIRE(em::ExpScalar(-86.6f) == 0.0f);
  REQUIRE(std::isinf(em::ExpScalar(88.5f)));
  REQUIRE(std::isnan(em::ExpScalar(NAN)));
  REQUIRE(em::ErfcScalar(9.5f) == 0.0f);
}

}  // namespace
}  // namespace mxmaca::kernels::cpu
