// Tests for kernels/cpu/elementwise.h: fp64 references, finite differences, PyTorch
// parity ("[parity]", runs /usr/bin/python3) and thread-count determinism.
#include "kernels/cpu/elementwise.h"

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/cpu/test_util.h"
#include "kernels/philox.h"

namespace mxmaca::kernels::cpu {
namespace {

using testing::BitEqual;
using testing::NumericalVjp;
using testing::RandomNormal;
using testing::RandomVector;
using testing::RelError;
using testing::ToDouble;

constexpr double kU32 = 1.0 / (1 << 24);

ExecContext Ctx(int threads) {
  ExecContext ctx;
  ctx.num_threads = threads;
  return ctx;
}

// fp64 references.
double Gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double GeluTanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double Silu(double g) { return g / (1.0 + std::exp(-g)); }

std::vector<double> GeluRef(const std::vector<double>& x) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = Gelu(x[i]);
  return y;
}

std::vector<double> GeluTanhRef(const std::vector<double>& x) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = GeluTanh(x[i]);
  return y;
}

std::vector<double> SwigluRef(const std::vector<double>& x, int64_t rows, int64_t f) {
  std::vector<double> y(rows * f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < f; ++c) y[r * f + c] = Silu(x[r * 2 * f + c]) * x[r * 2 * f + f + c];
  }
  return y;
}

TEST_CASE("AddBias and BiasGrad match fp64", "[elementwise]") {
  const int64_t rows = 300, cols = 70;  // 300 rows: 5 blocks of 64, the last partial
  const std::vector<float> y0 = RandomVector(rows * cols, 1);
  const std::vector<float> bias = RandomVector(cols, 2);
  std::vector<float> y = y0;
  AddBias(Ctx(2), y.data(), bias.data(), rows, cols);
  for (int64_t i = 0; i < rows * cols; ++i) REQUIRE(y[i] == y0[i] + bias[i % cols]);

  const std::vector<float> db0 = RandomVector(cols, 3);
  std::vector<float> db = db0;
  BiasGrad(Ctx(2), y0.data(), rows, cols, db.data());
  for (int64_t c = 0; c < cols; ++c) {
    double s = db0[c], sa = std::fabs(db0[c]);
    for (int64_t r = 0; r < rows; ++r) {
      s += y0[r * cols + c];
      sa += std::fabs(y0[r * cols + c]);
    }
    // rows + 1 fp32 additions in some fixed order: |err| <= gamma_{rows+1} sum |terms|.
    REQUIRE(std::fabs(db[c] - s) <= (rows + 1) * kU32 * sa);
  }
}

TEST_CASE("Add and Scale are the correctly rounded fp32 operations", "[elementwise]") {
  const int64_t n = 70001;
  const std::vector<float> a = RandomVector(n, 4), b = RandomVector(n, 5);
  std::vector<float> out(n);
  Add(Ctx(2), a.data(), b.data(), out.data(), n);
  std::vector<float> x = a;
  Scale(Ctx(2), x.data(), n, 0.37f);
  for (int64_t i = 0; i < n; ++i) {
    REQUIRE(out[i] == a[i] + b[i]);
    REQUIRE(x[i] == a[i] * 0.37f);
  }
  // Aliased output.
  std::vector<float> c = a;
  Add(Ctx(2), c.data(), b.data(), c.data(), n);
  REQUIRE(BitEqual(c, out));
}

TEST_CASE("SumSquares is fp64-accurate and thread-independent", "[elementwise][determinism]") {
  for (int64_t n : {1, 7, 4096, 100003}) {
    const std::vector<float> x = RandomNormal(n, 6, 3.0f);
    long double want = 0;
    for (float v : x) want += static_cast<long double>(v) * v;
    const double got = SumSquares(Ctx(2), x.data(), n);
    // Each square is exact in fp64 (24+24 bits < 53); n fp64 additions of positive
    // terms: relative error <= n * 2^-53.
    REQUIRE(std::fabs(got - static_cast<double>(want)) <= n * std::ldexp(1.0, -53) * double(want));
    REQUIRE(got == SumSquares(Ctx(1), x.data(), n));
  }
}

TEST_CASE("GELU forward and backward match fp64 and finite differences", "[elementwise]") {
  const int64_t n = 4000;
  const std::vector<float> x = RandomNormal(n, 7, 2.0f);
  const std::vector<float> dy = RandomNormal(n, 8);
  std::vector<float> y(n), dx(n);
  GeluForward(Ctx(2), x.data(), y.data(), n);
  GeluBackward(Ctx(2), x.data(), dy.data(), dx.data(), n);
  // A handful of fp32 operations, each <= 1 ulp (erf to ~1 ulp): 16 u norm-wise covers it.
  CHECK(RelError(y, GeluRef(ToDouble(x))) < 16 * kU32);
  // Central differences of the fp64 reference with h = 1e-5: truncation ~h^2 = 1e-10,
  // cancellation ~1e-16/1e-5 = 1e-11, far below the fp32 kernel's own ~1e-7.
  const std::vector<double> fd = NumericalVjp(GeluRef, ToDouble(x), ToDouble(dy), 1e-5);
  CHECK(RelError(dx, fd) < 32 * kU32);
}

TEST_CASE("Tanh GELU forward and backward match fp64 and finite differences",
          "[elementwise]") {
  const int64_t n = 4003;  // not a multiple of 8: scalar tail
  std::vector<float> x = RandomNormal(n, 18, 3.0f);
  x[0] = 0.0f;
  x[1] = -30.0f;  // far tails: y -> -0 and y -> x
  x[2] = 30.0f;
  const std::vector<float> dy = RandomNormal(n, 19);
  std::vector<float> y(n), dx(n);
  GeluTanhForward(Ctx(2), x.data(), y.data(), n);
  GeluTanhBackward(Ctx(2), x.data(), dy.data(), dx.data(), n);
  // A cubic, an exp (2 ulp), a division and two products: 16 u norm-wise (as GELU).
  CHECK(RelError(y, GeluTanhRef(ToDouble(x))) < 16 * kU32);
  const std::vector<double> fd = NumericalVjp(GeluTanhRef, ToDouble(x), ToDouble(dy), 1e-5);
  CHECK(RelError(dx, fd) < 32 * kU32);
  REQUIRE(y[2] == 30.0f);
  REQUIRE(std::fabs(y[1]) < 1e-30f);
}

TEST_CASE("SwiGLU forward and backward match fp64 and finite differences", "[elementwise]") {
  const int64_t rows = 24, f = 40;
  const std::vector<float> x = RandomNormal(rows * 2 * f, 9, 2.0f);
  const std::vector<float> dy = RandomNormal(rows * f, 10);
  std::vector<float> y(rows * f), dx(rows * 2 * f);
  SwigluForward(Ctx(2), x.data(), y.data(), rows, f);
  SwigluBackward(Ctx(2), x.data(), dy.data(), dx.data(), rows, f);
  auto ref = [&](const std::vector<double>& xx) { return SwigluRef(xx, rows, f); };
  CHECK(RelError(y, ref(ToDouble(x))) < 16 * kU32);
  const std::vector<double> fd = NumericalVjp(ref, ToDouble(x), ToDouble(dy), 1e-5);
  CHECK(RelError(dx, fd) < 32 * kU32);
}

TEST_CASE("GELU and SwiGLU match PyTorch", "[elementwise][parity]") {
  {
    const int64_t n = 5000;
    const std::vector<float> x = RandomNormal(n, 21, 3.0f), dy = RandomNormal(n, 22);
    std::vector<float> y(n), dx(n);
    GeluTanhForward(Ctx(2), x.data(), y.data(), n);
    GeluTanhBackward(Ctx(2), x.data(), dy.data(), dx.data(), n);
    testing::TorchRef ref("gelu_tanh");
    ref.Param("n", n);
    ref.Input("x", x);
    ref.Input("dy", dy);
    auto out = ref.Run();
    CHECK(RelError(y, out["y"]) < 16 * kU32);
    CHECK(RelError(dx, out["dx"]) < 32 * kU32);
  }
  {
    const int64_t n = 5000;
    const std::vector<float> x = RandomNormal(n, 11, 3.0f), dy = RandomNormal(n, 12);
    std::vector<float> y(n), dx(n);
    GeluForward(Ctx(2), x.data(), y.data(), n);
    GeluBackward(Ctx(2), x.data(), dy.data(), dx.data(), n);
    testing::TorchRef ref("gelu");
    ref.Param("n", n);
    ref.Input("x", x);
    ref.Input("dy", dy);
    auto out = ref.Run();
    // Same bound as against our fp64 reference: fp32 rounding of a few operations.
    CHECK(RelError(y, out["y"]) < 16 * kU32);
    CHECK(RelError(dx, out["dx"]) < 32 * kU32);
  }
  {
    const int64_t rows = 64, f = 96;
    const std::vector<float> x = RandomNormal(rows * 2 * f, 13, 3.0f);
    const std::vector<float> dy = RandomNormal(rows * f, 14);
    std::vector<float> y(rows * f), dx(rows * 2 * f);
    SwigluForward(Ctx(2), x.data(), y.data(), rows, f);
    SwigluBackward(Ctx(2), x.data(), dy.data(), dx.data(), rows, f);
    testing::TorchRef ref("swiglu");
    ref.Param("rows", rows);
    ref.Param("f", f);
    ref.Input("x", x);
    ref.Input("dy", dy);
    auto out = ref.Run();
    CHECK(RelError(y, out["y"]) < 16 * kU32);
    CHECK(RelError(dx, out["dx"]) < 32 * kU32);
  }
}

TEST_CASE("Dropout keeps elements by UniformAt >= p, scales, and reuses the mask",
          "[elementwise]") {
  const int64_t n = 200000;
  const float p = 0.1f;
  const RngKey key{1234, MakeRngStream(3, 1, 7, 0)};
  const int64_t offset = 5000;
  const std::vector<float> x = RandomVector(n, 15, 0.5f, 1.5f);  // nonzero
  std::vector<float> y(n), dx(n);
  DropoutForward(Ctx(2), x.data(), y.data(), n, p, key, offset);
  DropoutBackward(Ctx(2), x.data(), dx.data(), n, p, key, offset);
  int64_t kept = 0;
  const float scale = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = UniformAt(key, offset + i) >= p;
    kept += keep;
    REQUIRE(y[i] == (keep ? x[i] * scale : 0.0f));
    REQUIRE(dx[i] == y[i]);  // backward of dy = x applies the same mask and scale
  }
  // Binomial(n, 0.9): sd = sqrt(n p (1-p)) ~ 134; 6 sd.
  REQUIRE(std::fabs(kept - 0.9 * n) < 6 * std::sqrt(n * 0.09));
  // Sharding: two halves with their global offsets reproduce the whole.
  std::vector<float> y2(n);
  DropoutForward(Ctx(1), x.data(), y2.data(), n / 2, p, key, offset);
  DropoutForward(Ctx(1), x.data() + n / 2, y2.data() + n / 2, n - n / 2, p, key,
                 offset + n / 2);
  REQUIRE(BitEqual(y, y2));
  // p == 0 copies.
  DropoutForward(Ctx(2), x.data(), y2.data(), n, 0.0f, key, 0);
  REQUIRE(BitEqual(x, y2));
}

TEST_CASE("Elementwise kernels are bit-identical for 1 and 2 threads",
          "[elementwise][determinism]") {
  const int64_t rows = 1000, cols = 300;
  const std::vector<float> x = RandomNormal(rows * cols, 16);
  const std::vector<float> dy = RandomNormal(rows * cols, 17);
  auto run = [&](int threads) {
    std::vector<float> out;
    std::vector<float> db(cols, 0.5f), g(rows * cols), dg(rows * cols), s(rows * cols / 2),
        ds(rows * cols);
    BiasGrad(Ctx(threads), dy.data(), rows, cols, db.data());
    GeluForward(Ctx(threads), x.data(), g.data(), rows * cols);
    GeluBackward(Ctx(threads), x.data(), dy.data(), dg.data(), rows * cols);
    std::vector<float> tg(rows * cols), tdg(rows * cols);
    GeluTanhForward(Ctx(threads), x.data(), tg.data(), rows * cols);
    GeluTanhBackward(Ctx(threads), x.data(), dy.data(), tdg.data(), rows * cols);
    out.insert(out.end(), tg.begin(), tg.end());
    out.insert(out.end(), tdg.begin(), tdg.end());
    SwigluForward(Ctx(threads), x.data(), s.data(), rows, cols / 2);
    SwigluBackward(Ctx(threads), x.data(), dy.data(), ds.data(), rows, cols / 2);
    for (auto* v : {&db, &g, &dg, &s, &ds}) out.insert(out.end(), v->begin(), v->end());
    return out;
  };
  REQUIRE(BitEqual(run(1), run(2)));
}

}  // namespace
}  // namespace mxmaca::kernels::cpu
