// Tests for kernels/cpu/norm.h: fp64 references and finite differences, PyTorch parity
// ("[parity]") and thread-count determinism.
#include "kernels/cpu/norm.h"

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/cpu/test_util.h"

namespace mxmaca::kernels::cpu {
namespace {

using testing::BitEqual;
using testing::NumericalVjp;
using testing::RandomNormal;
using testing::RandomVector;
using testing::RelError;
using testing::ToDouble;

constexpr double kU32 = 1.0 / (1 << 24);

// Tolerances (norm-wise relative, fp32 unit roundoff u = 2^-24). Rounding errors of
// independent operations add like a random walk, so norm-wise errors sit near
// sqrt(#ops on the path) u; we allow that with a margin (observed: 1-3 u):
//  forward: mean/variance sums of h/8 terms per lane, a sqrt, a division and three
//    products: 16 u.
//  backward input: two more length-h reductions and a three-term difference whose
//    cancellation can amplify by a small factor: 64 u.
//  weight gradients: n-row sums in blocks of 64 then n/64 block sums; worst case
//    (n + 64) u, but statistically ~sqrt(n) u: 4 sqrt(n) u, tested at n = 200, 256.
// The finite-difference tests use eps = 1e-2 so that mishandling eps (e.g. outside
// the sqrt) shows at ~1e-3, far above these tolerances.
constexpr double kFwdTol = 16 * kU32;
constexpr double kBwdTol = 64 * kU32;
double WeightTol(int64_t n) { return 4 * std::sqrt(double(n)) * kU32; }

ExecContext Ctx(int threads) {
  ExecContext ctx;
  ctx.num_threads = threads;
  return ctx;
}

// fp64 LayerNorm of x [n, h] (beta may be empty).
std::vector<double> LayerNormRef(const std::vector<double>& x, const std::vector<double>& g,
                                 const std::vector<double>& b, int64_t n, int64_t h,
                                 double eps, std::vector<double>* mean = nullptr,
                                 std::vector<double>* rstd = nullptr) {
  std::vector<double> y(n * h);
  for (int64_t r = 0; r < n; ++r) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < h; ++c) mu += x[r * h + c];
    mu /= h;
    for (int64_t c = 0; c < h; ++c) var += (x[r * h + c] - mu) * (x[r * h + c] - mu);
    var /= h;
    const double rs = 1.0 / std::sqrt(var + eps);
    if (mean) mean->push_back(mu);
    if (rstd) rstd->push_back(rs);
    for (int64_t c = 0; c < h; ++c) {
      y[r * h + c] = (x[r * h + c] - mu) * rs * g[c] + (b.empty() ? 0.0 : b[c]);
    }
  }
  return y;
}

std::vector<double> RmsNormRef(const std::vector<double>& x, const std::vector<double>& g,
                               int64_t n, int64_t h, double eps,
                               std::vector<double>* rstd = nullptr) {
  std::vector<double> y(n * h);
  for (int64_t r = 0; r < n; ++r) {
    double ms = 0;
    for (int64_t c = 0; c < h; ++c) ms += x[r * h + c] * x[r * h + c];
    const double rs = 1.0 / std::sqrt(ms / h + eps);
    if (rstd) rstd->push_back(rs);
    for (int64_t c = 0; c < h; ++c) y[r * h + c] = x[r * h + c] * rs * g[c];
  }
  return y;
}

// Inputs with a nonzero mean (exercises the centring) and gamma away from 1.
struct Inputs {
  int64_t n, h;
  std::vector<float> x, gamma, beta, dy;
};

Inputs MakeInputs(int64_t n, int64_t h, uint32_t seed) {
  Inputs in{n, h, RandomNormal(n * h, seed, 2.0f), RandomVector(h, seed + 1, 0.5f, 1.5f),
            RandomVector(h, seed + 2), RandomNormal(n * h, seed + 3)};
  for (auto& v : in.x) v += 0.7f;
  return in;
}

TEST_CASE("LayerNorm forward/backward match fp64 and finite differences", "[norm]") {
  const float eps = 1e-2f;
  for (bool with_beta : {true, false}) {
    const Inputs in = MakeInputs(200, 48, with_beta ? 1 : 2);
    const int64_t n = in.n, h = in.h;
    const std::vector<float> beta = with_beta ? in.beta : std::vector<float>{};
    std::vector<float> y(n * h), mean(n), rstd(n), dx(n * h);
    LayerNormForward(Ctx(2), in.x.data(), in.gamma.data(), with_beta ? beta.data() : nullptr,
                     eps, n, h, y.data(), mean.data(), rstd.data());
    std::vector<double> mean_ref, rstd_ref;
    const std::vector<double> g64 = ToDouble(in.gamma), b64 = ToDouble(beta);
    const std::vector<double> y_ref =
        LayerNormRef(ToDouble(in.x), g64, b64, n, h, eps, &mean_ref, &rstd_ref);
    CHECK(RelError(y, y_ref) < kFwdTol);
    CHECK(RelError(mean, mean_ref) < kFwdTol);
    CHECK(RelError(rstd, rstd_ref) < kFwdTol);

    LayerNormBackwardInput(Ctx(2), in.dy.data(), in.x.data(), in.gamma.data(), mean.data(),
                           rstd.data(), n, h, dx.data());
    // Step 1e-4 on O(1) inputs: truncation ~1e-8 relative, cancellation ~1e-12.
    const auto fx = [&](const std::vector<double>& xx) {
      return LayerNormRef(xx, g64, b64, n, h, eps);
    };
    CHECK(RelError(dx, NumericalVjp(fx, ToDouble(in.x), ToDouble(in.dy), 1e-4)) < kBwdTol);

    const std::vector<float> dg0 = RandomVector(h, 7), db0 = RandomVector(h, 8);
    std::vector<float> dg = dg0, db = db0;
    LayerNormBackwardWeight(Ctx(2), in.dy.data(), in.x.data(), mean.data(), rstd.data(), n,
                            h, dg.data(), with_beta ? db.data() : nullptr);
    const auto fg = [&](const std::vector<double>& gg) {
      return LayerNormRef(ToDouble(in.x), gg, b64, n, h, eps);
    };
    std::vector<double> dg_want = NumericalVjp(fg, g64, ToDouble(in.dy), 1e-4);
    for (int64_t c = 0; c < h; ++c) dg_want[c] += dg0[c];  // accumulates
    CHECK(RelError(dg, dg_want) < WeightTol(n));
    if (with_beta) {
      const auto fb = [&](const std::vector<double>& bb) {
        return LayerNormRef(ToDouble(in.x), g64, bb, n, h, eps);
      };
      std::vector<double> db_want = NumericalVjp(fb, b64, ToDouble(in.dy), 1e-4);
      for (int64_t c = 0; c < h; ++c) db_want[c] += db0[c];
      CHECK(RelError(db, db_want) < WeightTol(n));
    } else {
      CHECK(BitEqual(db, db0));  // nullptr dbeta: untouched
    }
  }
}

TEST_CASE("RMSNorm forward/backward match fp64 and finite differences", "[norm]") {
  const float eps = 1e-2f;
  const Inputs in = MakeInputs(200, 48, 3);
  const int64_t n = in.n, h = in.h;
  std::vector<float> y(n * h), rstd(n), dx(n * h);
  RmsNormForward(Ctx(2), in.x.data(), in.gamma.data(), eps, n, h, y.data(), rstd.data());
  const std::vector<double> g64 = ToDouble(in.gamma);
  std::vector<double> rstd_ref;
  CHECK(RelError(y, RmsNormRef(ToDouble(in.x), g64, n, h, eps, &rstd_ref)) < kFwdTol);
  CHECK(RelError(rstd, rstd_ref) < kFwdTol);
  RmsNormBackwardInput(Ctx(2), in.dy.data(), in.x.data(), in.gamma.data(), rstd.data(), n,
                       h, dx.data());
  const auto fx = [&](const std::vector<double>& xx) { return RmsNormRef(xx, g64, n, h, eps); };
  CHECK(RelError(dx, NumericalVjp(fx, ToDouble(in.x), ToDouble(in.dy), 1e-4)) < kBwdTol);
  const std::vector<float> dg0 = RandomVector(h, 9);
  std::vector<float> dg = dg0;
  RmsNormBackwardWeight(Ctx(2), in.dy.data(), in.x.data(), rstd.data(), n, h, dg.data());
  const auto fg = [&](const std::vector<double>& gg) {
    return RmsNormRef(ToDouble(in.x), gg, n, h, eps);
  };
  std::vector<double> dg_want = NumericalVjp(fg, g64, ToDouble(in.dy), 1e-4);
  for (int64_t c = 0; c < h; ++c) dg_want[c] += dg0[c];
  CHECK(RelError(dg, dg_want) < WeightTol(n));
}

TEST_CASE("Backward input may run in place over dy", "[norm]") {
  const Inputs in = MakeInputs(20, 33, 4);
  std::vector<float> y(in.n * in.h), mean(in.n), rstd(in.n), dx(in.n * in.h);
  LayerNormForward(Ctx(1), in.x.data(), in.gamma.data(), in.beta.data(), 1e-5f, in.n, in.h,
                   y.data(), mean.data(), rstd.data());
  LayerNormBackwardInput(Ctx(1), in.dy.data(), in.x.data(), in.gamma.data(), mean.data(),
                         rstd.data(), in.n, in.h, dx.data());
  std::vector<float> inplace = in.dy;
  LayerNormBackwardInput(Ctx(1), inplace.data(), in.x.data(), in.gamma.data(), mean.data(),
                         rstd.data(), in.n, in.h, inplace.data());
  REQUIRE(BitEqual(dx, inplace));
}

TEST_CASE("LayerNorm and RMSNorm match PyTorch", "[norm][parity]") {
  const Inputs in = MakeInputs(256, 96, 5);
  const int64_t n = in.n, h = in.h;
  {
    const float eps = 1e-5f;
    std::vector<float> y(n * h), mean(n), rstd(n), dx(n * h), dg(h, 0.0f), db(h, 0.0f);
    LayerNormForward(Ctx(2), in.x.data(), in.gamma.data(), in.beta.data(), eps, n, h,
                     y.data(), mean.data(), rstd.data());
    LayerNormBackwardInput(Ctx(2), in.dy.data(), in.x.data(), in.gamma.data(), mean.data(),
                           rstd.data(), n, h, dx.data());
    LayerNormBackwardWeight(Ctx(2), in.dy.data(), in.x.data(), mean.data(), rstd.data(), n,
                            h, dg.data(), db.data());
    testing::TorchRef ref("layer_norm");
    ref.Param("n", n);
    ref.Param("h", h);
    ref.Param("eps", eps);
    ref.Input("x", in.x);
    ref.Input("gamma", in.gamma);
    ref.Input("beta", in.beta);
    ref.Input("dy", in.dy);
    auto out = ref.Run();
    CHECK(RelError(y, out["y"]) < kFwdTol);
    CHECK(RelError(mean, out["mean"]) < kFwdTol);
    CHECK(RelError(rstd, out["rstd"]) < kFwdTol);
    CHECK(RelError(dx, out["dx"]) < kBwdTol);
    CHECK(RelError(dg, out["dgamma"]) < WeightTol(n));
    CHECK(RelError(db, out["dbeta"]) < WeightTol(n));
  }
  {
    const float eps = 1e-6f;
    std::vector<float> y(n * h), rstd(n), dx(n * h), dg(h, 0.0f);
    RmsNormForward(Ctx(2), in.x.data(), in.gamma.data(), eps, n, h, y.data(), rstd.data());
    RmsNormBackwardInput(Ctx(2), in.dy.data(), in.x.data(), in.gamma.data(), rstd.data(), n,
                         h, dx.data());
    RmsNormBackwardWeight(Ctx(2), in.dy.data(), in.x.data(), rstd.data(), n, h, dg.data());
    testing::TorchRef ref("rms_norm");
    ref.Param("n", n);
    ref.Param("h", h);
    ref.Param("eps", eps);
    ref.Input("x", in.x);
    ref.Input("gamma", in.gamma);
    ref.Input("dy", in.dy);
    auto out = ref.Run();
    CHECK(RelError(y, out["y"]) < kFwdTol);
    CHECK(RelError(rstd, out["rstd"]) < kFwdTol);
    CHECK(RelError(dx, out["dx"]) < kBwdTol);
    CHECK(RelError(dg, out["dgamma"]) < WeightTol(n));
  }
}

TEST_CASE("Norm kernels are bit-identical for 1 and 2 threads", "[norm][determinism]") {
  const Inputs in = MakeInputs(1000, 256, 6);
  const int64_t n = in.n, h = in.h;
  auto run = [&](int t) {
    std::vector<float> y(n * h), mean(n), rstd(n), dx(n * h), dg(h, 0.25f), db(h, 0.5f),
        ry(n * h), rr(n), rdx(n * h), rdg(h, 0.125f);
    LayerNormForward(Ctx(t), in.x.data(), in.gamma.data(), in.beta.data(), 1e-5f, n, h,
                     y.data(), mean.data(), rstd.data());
    LayerNormBackwardInput(Ctx(t), in.dy.data(), in.x.data(), in.gamma.data(), mean.data(),
                           rstd.data(), n, h, dx.data());
    LayerNormBackwardWeight(Ctx(t), in.dy.data(), in.x.data(), mean.data(), rstd.data(), n,
                            h, dg.data(), db.data());
    RmsNormForward(Ctx(t), in.x.data(), in.gamma.data(), 1e-6f, n, h, ry.data(), rr.data());
    RmsNormBackwardInput(Ctx(t), in.dy.data(), in.x.data(), in.gamma.data(), rr.data(), n, h,
                         rdx.data());
    RmsNormBackwardWeight(Ctx(t), in.dy.data(), in.x.data(), rr.data(), n, h, rdg.data());
    std::vector<float> all;
    for (auto* v : {&y, &mean, &rstd, &dx, &dg, &db, &ry, &rr, &rdx, &rdg}) {
      all.insert(all.end(), v->begin(), v->end());
    }
    return all;
  };
  REQUIRE(BitEqual(run(1), run(2)));
}

}  // namespace
}  // namespace mxmaca::kernels::cpu
