// Tests for kernels/cpu/adamw.h: fp64 emulation of torch.optim.AdamW's update, PyTorch
// parity over several steps, determinism.
#include "kernels/cpu/adamw.h"

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/cpu/test_util.h"

namespace mxmaca::kernels::cpu {
namespace {

using testing::BitEqual;
using testing::RandomNormal;
using testing::RelError;

constexpr double kU32 = 1.0 / (1 << 24);

struct Hyper {
  float lr = 3e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, wd = 0.1f;
};

ExecContext Ctx(int threads) {
  ExecContext ctx;
  ctx.num_threads = threads;
  return ctx;
}

// Gradients for `steps` steps: mixed magnitudes (1, 1e-3, 1e-6) so that both the
// sqrt(v) and the eps regime of the denominator are exercised.
std::vector<float> Grads(int64_t steps, int64_t n, uint32_t seed) {
  std::vector<float> g = RandomNormal(steps * n, seed);
  for (int64_t i = 0; i < steps * n; ++i) g[i] *= (i % 3 == 0) ? 1.0f : (i % 3 == 1 ? 1e-3f : 1e-6f);
  return g;
}

TEST_CASE("AdamWStep matches the fp64 AdamW recurrence", "[adamw]") {
  const int64_t n = 3001, steps = 6;
  const Hyper hp;
  const std::vector<float> p0 = RandomNormal(n, 1);
  const std::vector<float> grads = Grads(steps, n, 2);
  std::vector<float> p = p0, m(n, 0.0f), v(n, 0.0f);
  std::vector<double> pd(p0.begin(), p0.end()), md(n, 0.0), vd(n, 0.0);
  for (int64_t t = 1; t <= steps; ++t) {
    const float* g = grads.data() + (t - 1) * n;
    AdamWStep(Ctx(2), p.data(), g, m.data(), v.data(), n, hp.lr, hp.beta1, hp.beta2, hp.eps,
              hp.wd, t);
    const double bc1 = 1 - std::pow(double(hp.beta1), t);
    const double bc2 = 1 - std::pow(double(hp.beta2), t);
    for (int64_t i = 0; i < n; ++i) {
      pd[i] *= 1 - double(hp.lr) * hp.wd;
      md[i] = hp.beta1 * md[i] + (1 - double(hp.beta1)) * g[i];
      vd[i] = hp.beta2 * vd[i] + (1 - double(hp.beta2)) * double(g[i]) * g[i];
      pd[i] -= hp.lr / bc1 * md[i] / (std::sqrt(vd[i]) / std::sqrt(bc2) + hp.eps);
    }
  }
  // m, v: each step adds a few fp32 roundings to quantities of the same size: ~3 u per
  // step, 6 steps -> 32 u with margin. param: each step rounds p (|p| ~ 1) once or
  // twice while the update is ~lr: 4 u per step -> 32 u.
  CHECK(RelError(m, md) < 32 * kU32);
  CHECK(RelError(v, vd) < 32 * kU32);
  CHECK(RelError(p, pd) < 32 * kU32);
  // The update itself (p - p0) against fp64: its size is ~lr * steps ~ 2e-2 of |p|, so
  // the param's absolute rounding (~u |p| per step) is ~1e-5 of it; 1e-4 bound.
  std::vector<float> du(n);
  std::vector<double> dud(n);
  for (int64_t i = 0; i < n; ++i) {
    du[i] = p[i] - p0[i];
    dud[i] = pd[i] - p0[i];
  }
  CHECK(RelError(du, dud) < 1e-4);
}

TEST_CASE("AdamWStep matches torch.optim.AdamW over several steps", "[adamw][parity]") {
  const int64_t n = 2000, steps = 5;
  const Hyper hp;
  const std::vector<float> p0 = RandomNormal(n, 3);
  const std::vector<float> grads = Grads(steps, n, 4);
  std::vector<float> p = p0, m(n, 0.0f), v(n, 0.0f);
  for (int64_t t = 1; t <= steps; ++t) {
    AdamWStep(Ctx(2), p.data(), grads.data() + (t - 1) * n, m.data(), v.data(), n, hp.lr,
              hp.beta1, hp.beta2, hp.eps, hp.wd, t);
  }
  testing::TorchRef ref("adamw");
  ref.Param("n", n);
  ref.Param("steps", steps);
  // The fp32 hyper-parameters exactly as the kernel received them.
  ref.Param("lr", hp.lr);
  ref.Param("beta1", hp.beta1);
  ref.Param("beta2", hp.beta2);
  ref.Param("eps", hp.eps);
  ref.Param("weight_decay", hp.wd);
  ref.Input("param", p0);
  ref.Input("grads", grads);
  auto out = ref.Run();
  // Same bounds as against the fp64 recurrence above.
  CHECK(RelError(m, out["exp_avg"]) < 32 * kU32);
  CHECK(RelError(v, out["exp_avg_sq"]) < 32 * kU32);
  CHECK(RelError(p, out["param"]) < 32 * kU32);
}

TEST_CASE("AdamWStep is bit-identical for 1 and 2 threads", "[adamw][determinism]") {
  const int64_t n = 100000;
  const std::vector<float> g = Grads(1, n, 5);
  auto run = [&](int t) {
    std::vector<float> p = RandomNormal(n, 6), m = RandomNormal(n, 7), v(n, 0.5f);
    AdamWStep(Ctx(t), p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.999f, 1e-8f,
              0.01f, 3);
    p.insert(p.end(), m.begin(), m.end());
    p.insert(p.end(), v.begin(), v.end());
    return p;
  };
  REQUIRE(BitEqual(run(1), run(2)));
}

}  // namespace
}  // namespace mxmaca::kernels::cpu
