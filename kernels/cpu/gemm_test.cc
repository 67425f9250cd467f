// Tests for kernels/cpu/gemm.h against a fp64 reference.
#include "kernels/cpu/gemm.h"

#include <cmath>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/test_util.h"

namespace mxmaca::kernels::cpu {
namespace {

using testing::BitEqual;
using testing::RandomVector;

constexpr double kU32 = 1.0 / (1 << 24);  // fp32 unit roundoff 2^-24
constexpr double kU16 = 1.0 / (1 << 8);   // bf16 unit roundoff 2^-8 (8-bit significand)

struct Problem {
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
  std::vector<float> a, b, c;
};

Problem MakeProblem(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                    float beta, uint32_t seed, int64_t pad = 3) {
  Problem p{ta, tb, m, n, k, 0, 0, 0, alpha, beta, {}, {}, {}};
  const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k;
  const int64_t b_rows = tb ? n : k, b_cols = tb ? k : n;
  p.lda = a_cols + pad;
  p.ldb = b_cols + pad;
  p.ldc = n + pad;
  p.a = RandomVector(a_rows * p.lda, seed);
  p.b = RandomVector(b_rows * p.ldb, seed + 1);
  p.c = RandomVector(m * p.ldc, seed + 2);
  return p;
}

// op(X)[i, j] of a stored row-major matrix, optionally rounded to bf16.
double At(const std::vector<float>& x, bool trans, int64_t ld, int64_t i, int64_t j,
          bool bf16) {
  const float v = trans ? x[j * ld + i] : x[i * ld + j];
  return bf16 ? RoundToBf16(v) : v;
}

// Reference in fp64: want = alpha * op(A) op(B) + beta * C and the magnitude
// |alpha| |op(A)| |op(B)| + |beta| |C| used by the error bounds.
void Reference(const Problem& p, bool bf16_inputs, std::vector<double>* want,
               std::vector<double>* mag) {
  want->assign(p.c.size(), 0.0);
  mag->assign(p.c.size(), 0.0);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      double s = 0.0, sa = 0.0;
      for (int64_t l = 0; l < p.k; ++l) {
        const double x = At(p.a, p.ta, p.lda, i, l, bf16_inputs) *
                         At(p.b, p.tb, p.ldb, l, j, bf16_inputs);
        s += x;
        sa += std::fabs(x);
      }
      const double c = p.c[i * p.ldc + j];
      (*want)[i * p.ldc + j] = p.alpha * s + (p.beta == 0.0f ? 0.0 : p.beta * c);
      (*mag)[i * p.ldc + j] = std::fabs(p.alpha) * sa + std::fabs(p.beta) * std::fabs(c);
    }
  }
}

std::vector<float> Run(const Problem& p, Precision precision, int threads) {
  std::vector<float> c = p.c;
  ExecContext ctx;
  ctx.num_threads = threads;
  ctx.precision = precision;
  Gemm(ctx, p.ta, p.tb, p.m, p.n, p.k, p.alpha, p.a.data(), p.lda, p.b.data(), p.ldb,
       p.beta, c.data(), p.ldc);
  return c;
}

// Checks every C element against `want` within bound_factor * mag (the classical
// componentwise bound |fl(x.y) - x.y| <= gamma_k |x|.|y|, Higham, "Accuracy and
// Stability of Numerical Algorithms", 3.1, valid for any summation order and FMA), and
// that padding columns of C are untouched.
void CheckBound(const Problem& p, const std::vector<float>& got,
                const std::vector<double>& want, const std::vector<double>& mag,
                double bound_factor) {
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.ldc; ++j) {
      const int64_t idx = i * p.ldc + j;
      if (j >= p.n) {
        REQUIRE(got[idx] == p.c[idx]);
        continue;
      }
      const double err = std::fabs(got[idx] - want[idx]);
      INFO("i=" << i << " j=" << j << " got " << got[idx] << " want " << want[idx]);
      REQUIRE(err <= bound_factor * mag[idx] + 1e-30);
    }
  }
}

double Gamma(int64_t k, double u) { return (k + 2) * u / (1 - (k + 2) * u); }

TEST_CASE("Gemm fp32 matches fp64 reference for all transpositions", "[gemm]") {
  uint32_t seed = 100;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{37, 29, 53},
                             {300, 150, 70},     // several row tiles
                             {90, 400, 33}}) {   // column tiles
        const Problem p = MakeProblem(ta, tb, m, n, k, 0.75f, -0.5f, seed += 3);
        std::vector<double> want, mag;
        Reference(p, false, &want, &mag);
        const std::vector<float> got = Run(p, Precision::kFp32, 2);
        INFO("ta=" << ta << " tb=" << tb << " m=" << m << " n=" << n << " k=" << k);
        // k products and sums plus the alpha/beta scaling: gamma_{k+2} in fp32.
        CheckBound(p, got, want, mag, Gamma(k, kU32));
      }
    }
  }
}

TEST_CASE("Gemm beta = 0 ignores NaNs in C", "[gemm]") {
  Problem p = MakeProblem(false, true, 130, 140, 64, 1.0f, 0.0f, 7);
  for (auto& x : p.c) x = std::numeric_limits<float>::quiet_NaN();
  std::vector<double> want, mag;
  Reference(p, false, &want, &mag);
  const std::vector<float> got = Run(p, Precision::kFp32, 2);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) REQUIRE(std::isfinite(got[i * p.ldc + j]));
  }
}

TEST_CASE("Gemm is bit-identical for 1 and 2 threads", "[gemm][determinism]") {
  for (Precision prec : {Precision::kFp32, Precision::kBf16}) {
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{512, 256, 384},
                           {128, 1000, 512},    // column tiles
                           {256, 64, 2048}}) {  // long k: weight-gradient shape
      const Problem p = MakeProblem(true, false, m, n, k, 1.0f, 1.0f, 11);
      REQUIRE(BitEqual(Run(p, prec, 1), Run(p, prec, 2)));
      const Problem q = MakeProblem(false, true, m, n, k, 1.0f, 0.0f, 12);
      REQUIRE(BitEqual(Run(q, prec, 1), Run(q, prec, 2)));
    }
  }
}

TEST_CASE("Gemm bf16 equals the emulated bf16-input reference", "[gemm][bf16]") {
  uint32_t seed = 300;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Problem p = MakeProblem(ta, tb, 200, 170, 96, 0.5f, 1.0f, seed += 3);
      const std::vector<float> got = Run(p, Precision::kBf16, 2);
      // Emulated: inputs rounded to bf16, products exact (8+8 significant bits fit in
      // fp32's 24), so only the fp32 accumulation errs: gamma_{k+2}(fp32).
      std::vector<double> want_bf16, mag_bf16;
      Reference(p, true, &want_bf16, &mag_bf16);
      INFO("ta=" << ta << " tb=" << tb);
      CheckBound(p, got, want_bf16, mag_bf16, Gamma(p.k, kU32));
      // Against the exact fp64 product of the unrounded inputs: each input errs by at
      // most u16 relative, so each product by (2 u16 + u16^2), plus accumulation.
      std::vector<double> want, mag;
      Reference(p, false, &want, &mag);
      CheckBound(p, got, want, mag, 2 * kU16 + kU16 * kU16 + Gamma(p.k, kU32));
      // And the inputs really were rounded: fp32 GEMM would be ~1e-7 off; bf16
      // rounding of uniform inputs gives ~1e-3 norm-wise. 1e-4 separates the two.
      std::vector<float> ab_only(p.c.size());
      const Problem p0 = [&] {
        Problem z = p;
        z.beta = 0.0f;
        return z;
      }();
      std::vector<double> w0, m0;
      Reference(p0, false, &w0, &m0);
      REQUIRE(testing::RelError(Run(p0, Precision::kBf16, 1), w0) > 1e-4);
    }
  }
}

TEST_CASE("GemmStridedBatched equals per-item Gemm calls", "[gemm]") {
  for (int64_t batch : {2, 6}) {  // below and above the item-parallel threshold
    const int64_t m = 70, n = 90, k = 40;
    const int64_t lda = k, ldb = k, ldc = n;  // A [m,k], B^T: [n,k]
    const int64_t sa = m * lda + 5, sb = n * ldb + 7, sc = m * ldc + 2;
    const std::vector<float> a = RandomVector(batch * sa, 21);
    const std::vector<float> b = RandomVector(batch * sb, 22);
    const std::vector<float> c0 = RandomVector(batch * sc, 23);
    for (Precision prec : {Precision::kFp32, Precision::kBf16}) {
      ExecContext ctx;
      ctx.num_threads = 2;
      ctx.precision = prec;
      std::vector<float> c_batched = c0, c_loop = c0;
      GemmStridedBatched(ctx, false, true, m, n, k, 1.5f, a.data(), lda, sa, b.data(), ldb,
                         sb, 0.5f, c_batched.data(), ldc, sc, batch);
      ExecContext one = ctx;
      one.num_threads = 1;
      for (int64_t i = 0; i < batch; ++i) {
        Gemm(one, false, true, m, n, k, 1.5f, a.data() + i * sa, lda, b.data() + i * sb,
             ldb, 0.5f, c_loop.data() + i * sc, ldc);
      }
      REQUIRE(BitEqual(c_batched, c_loop));
      // One item checked against fp64 as well.
      double max_err = 0.0;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double s = 0.0;
          for (int64_t l = 0; l < k; ++l) {
            s += double(a[(batch - 1) * sa + i * lda + l]) * b[(batch - 1) * sb + j * ldb + l];
          }
          const double want = 1.5 * s + 0.5 * c0[(batch - 1) * sc + i * ldc + j];
          max_err = std::max(max_err, std::fabs(want - c_batched[(batch - 1) * sc + i * ldc + j]));
        }
      }
      // |a|,|b| < 1, k = 40: |A||B| <= 40; bf16: (2 u16 + gamma) * 1.5 * 40 ~ 0.47.
      REQUIRE(max_err <= (prec == Precision::kFp32 ? 1e-4 : 0.5));
    }
  }
}

}  // namespace
}  // namespace mxmaca::kernels::cpu
