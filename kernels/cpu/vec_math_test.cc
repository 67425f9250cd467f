// Tests for the package-private vectorised helpers: vec_math.h (exp, erfc, normal CDF)
// and philox_avx2.h (8-lane UniformAt).
#include <cmath>
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/cpu/philox_avx2.h"
#include "kernels/cpu/test_util.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/philox.h"

namespace mxmaca::kernels::cpu {
namespace {

constexpr double kU32 = 1.0 / (1 << 24);

// x values spanning the interesting ranges, including the exact edges.
std::vector<float> Probe(float lo, float hi, int n) {
  std::vector<float> x = testing::RandomVector(n, 1, lo, hi);
  x.insert(x.end(), {0.0f, -0.0f, lo, hi, 1e-30f, -1e-30f});
  while (x.size() % 8) x.push_back(0.5f);
  return x;
}

TEST_CASE("Exp8 equals ExpScalar bitwise and exp within 3 ulp", "[vec_math]") {
  const std::vector<float> x = Probe(-86.5f, 87.0f, 20000);
  for (size_t i = 0; i < x.size(); i += 8) {
    alignas(32) float v[8];
    _mm256_store_ps(v, Exp8(_mm256_loadu_ps(&x[i])));
    for (int l = 0; l < 8; ++l) {
      const float s = ExpScalar(x[i + l]);
      REQUIRE(std::memcmp(&s, &v[l], 4) == 0);
      const double want = std::exp(static_cast<double>(x[i + l]));
      INFO("x = " << x[i + l]);
      // Cephes expf: ~2 ulp; 3 u relative (a normal result, x > -87).
      REQUIRE(std::fabs(s - want) <= 3 * 2 * kU32 * want);
    }
  }
  REQUIRE(ExpScalar(-100.0f) == 0.0f);
  REQUIRE(ExpScalar(-86.6f) == 0.0f);
  REQUIRE(std::fpclassify(ExpScalar(-86.5f)) == FP_NORMAL);
  REQUIRE(std::isinf(ExpScalar(100.0f)));
  REQUIRE(std::isnan(ExpScalar(NAN)));
}

TEST_CASE("NormalCdf8 equals NormalCdfScalar and Phi within 1e-6 relative", "[vec_math]") {
  const std::vector<float> x = Probe(-12.0f, 12.0f, 20000);
  for (size_t i = 0; i < x.size(); i += 8) {
    alignas(32) float v[8];
    _mm256_store_ps(v, NormalCdf8(_mm256_loadu_ps(&x[i])));
    for (int l = 0; l < 8; ++l) {
      const float s = NormalCdfScalar(x[i + l]);
      REQUIRE(std::memcmp(&s, &v[l], 4) == 0);
      const double want = 0.5 * std::erfc(-static_cast<double>(x[i + l]) / std::sqrt(2.0));
      INFO("x = " << x[i + l] << " got " << s << " want " << want);
      // Numerical Recipes erfc: 1.2e-7 relative. In the far tail the fp32 exponent
      // argument A ~ -(z^2 + 1.27) dominates: an absolute error e in A is a relative
      // error e in the result. z = |x|/sqrt(2) carries <= 0.8 u (rounded constant and
      // product), so z^2 carries 1.6 u z^2; each of the three roundings on the way to A
      // (z*z, + c0, + t*p) costs up to half an ulp of a value < 2 z^2, i.e. u z^2.
      // Total <= 4.6 u z^2 (observed 4.5 u z^2 at x = -11.4); bound 6 u z^2 + 16 u.
      const double z2 = 0.5 * double(x[i + l]) * x[i + l];
      if (z2 > 81.0) {
        REQUIRE(s == 0.0f);  // erfc(z > 9) is flushed to 0 (true value < 4.1e-37)
      } else {
        REQUIRE(std::fabs(s - want) <= (2e-7 + (6 * z2 + 16) * kU32) * want);
      }
      REQUIRE((s == 0.0f || std::fpclassify(s) == FP_NORMAL));
    }
  }
}

TEST_CASE("UniformAt8 equals UniformAt lane by lane, across a 2^32 carry", "[philox]") {
  const RngKey key{0x0123456789ABCDEFull, MakeRngStream(9, 8, 7, 6)};
  for (uint64_t base : {uint64_t{0}, uint64_t{12345}, uint64_t{0xFFFFFFFCull},
                        uint64_t{0x1FFFFFFF9ull}, ~uint64_t{0} - 20}) {
    for (uint64_t off = 0; off < 64; off += 8) {
      alignas(32) float v[8];
      _mm256_store_ps(v, UniformAt8(key, base + off));
      for (int l = 0; l < 8; ++l) REQUIRE(v[l] == UniformAt(key, base + off + l));
    }
  }
}

TEST_CASE("DropoutRow/DropoutRow2 equal the scalar definition", "[philox]") {
  const RngKey key{5, 6};
  const std::vector<float> a = testing::RandomVector(203, 2), b = testing::RandomVector(203, 3);
  std::vector<float> da(203, 7.0f), db = b;
  DropoutRow2(a.data(), da.data(), db.data(), db.data(), 3, 200, 0.3f, 1.0f / 0.7f, key, 1000);
  for (int j = 0; j < 203; ++j) {
    if (j < 3 || j >= 200) {
      REQUIRE(da[j] == 7.0f);
      REQUIRE(db[j] == b[j]);
      continue;
    }
    const bool keep = UniformAt(key, 1000 + j) >= 0.3f;
    REQUIRE(da[j] == (keep ? a[j] * (1.0f / 0.7f) : 0.0f));
    REQUIRE(db[j] == (keep ? b[j] * (1.0f / 0.7f) : 0.0f));
  }
}

}  // namespace
}  // namespace mxmaca::kernels::cpu
