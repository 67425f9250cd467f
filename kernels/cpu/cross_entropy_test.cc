// Tests for kernels/cpu/cross_entropy.h: fp64 reference, finite differences, padded
// vocabulary, in-place backward, PyTorch parity and determinism.
#include "kernels/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/cpu/test_util.h"

namespace mxmaca::kernels::cpu {
namespace {

using testing::BitEqual;
using testing::NumericalVjp;
using testing::RandomInts;
using testing::RandomNormal;
using testing::RandomVector;
using testing::RelError;
using testing::ToDouble;

constexpr double kU32 = 1.0 / (1 << 24);
// lse: max + log of an 8-lane fp32 sum of exps (each ~2 ulp): relative error of the sum
// ~ (V/8) u worst case, ~sqrt(V/8) u typically, i.e. an absolute error ~1e-6 on log(sum);
// norm-wise 32 u on lse/loss values of ~10 (observed ~1 u). dlogits: each softmax value
// carries exp's 2 ulp plus the lse error times |x - lse| <= ~20: 64 u.
constexpr double kFwdTol = 32 * kU32;
constexpr double kBwdTol = 64 * kU32;

ExecContext Ctx(int threads) {
  ExecContext ctx;
  ctx.num_threads = threads;
  return ctx;
}

struct Problem {
  int64_t n, vp, v;
  std::vector<float> logits;
  std::vector<int32_t> targets;
  std::vector<float> dloss;
};

Problem Make(int64_t n, int64_t vp, int64_t v, uint32_t seed) {
  Problem p{n, vp, v, RandomNormal(n * vp, seed, 4.0f), RandomInts(n, seed + 1, 0, v - 1),
            RandomVector(n, seed + 2, 0.1f, 2.0f)};
  // Padding columns hold large values: they must never enter the softmax.
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = v; c < vp; ++c) p.logits[i * vp + c] = 50.0f;
  return p;
}

// fp64: per-row loss weighted by dloss, over the first v columns.
std::vector<double> LossRef(const std::vector<double>& logits, const Problem& p,
                            std::vector<double>* lse = nullptr) {
  std::vector<double> loss(p.n);
  for (int64_t i = 0; i < p.n; ++i) {
    double m = -INFINITY;
    for (int64_t c = 0; c < p.v; ++c) m = std::max(m, logits[i * p.vp + c]);
    double s = 0;
    for (int64_t c = 0; c < p.v; ++c) s += std::exp(logits[i * p.vp + c] - m);
    const double l = m + std::log(s);
    if (lse) lse->push_back(l);
    loss[i] = l - logits[i * p.vp + p.targets[i]];
  }
  return loss;
}

TEST_CASE("CrossEntropy forward/backward match fp64 and finite differences",
          "[cross_entropy]") {
  const Problem p = Make(24, 136, 129, 1);  // V not a multiple of 8 (scalar tail)
  std::vector<float> loss(p.n), lse(p.n), dl(p.n * p.vp, 7.0f);
  CrossEntropyForward(Ctx(2), p.logits.data(), p.targets.data(), p.n, p.vp, p.v,
                      loss.data(), lse.data());
  std::vector<double> lse_ref;
  CHECK(RelError(loss, LossRef(ToDouble(p.logits), p, &lse_ref)) < kFwdTol);
  CHECK(RelError(lse, lse_ref) < kFwdTol);
  CrossEntropyBackward(Ctx(2), p.logits.data(), p.targets.data(), lse.data(), p.dloss.data(),
                       p.n, p.vp, p.v, dl.data());
  // FD step 1e-5 on logits of size ~4: truncation ~1e-10, cancellation ~1e-11.
  const auto f = [&](const std::vector<double>& x) { return LossRef(x, p); };
  const std::vector<double> fd =
      NumericalVjp(f, ToDouble(p.logits), ToDouble(p.dloss), 1e-5);
  CHECK(RelError(dl, fd) < kBwdTol);
  for (int64_t i = 0; i < p.n; ++i)
    for (int64_t c = p.v; c < p.vp; ++c) REQUIRE(dl[i * p.vp + c] == 0.0f);
}

TEST_CASE("CrossEntropyBackward in place equals out of place", "[cross_entropy]") {
  const Problem p = Make(50, 520, 500, 2);
  std::vector<float> loss(p.n), lse(p.n), dl(p.n * p.vp);
  CrossEntropyForward(Ctx(2), p.logits.data(), p.targets.data(), p.n, p.vp, p.v,
                      loss.data(), lse.data());
  CrossEntropyBackward(Ctx(2), p.logits.data(), p.targets.data(), lse.data(), p.dloss.data(),
                       p.n, p.vp, p.v, dl.data());
  std::vector<float> inplace = p.logits;
  CrossEntropyBackward(Ctx(2), inplace.data(), p.targets.data(), lse.data(), p.dloss.data(),
                       p.n, p.vp, p.v, inplace.data());
  REQUIRE(BitEqual(inplace, dl));
}

TEST_CASE("CrossEntropy composes over vocabulary shards (targets outside the shard)",
          "[cross_entropy]") {
  // Two shards of a 300-column vocabulary (each padded to 160 columns); the full-vocab
  // kernel is the reference.
  const int64_t n = 40, v = 300, shard_v = 150, shard_vp = 160;
  Problem full = Make(n, v, v, 5);
  std::vector<float> loss(n), lse(n), dl(n * v);
  CrossEntropyForward(Ctx(2), full.logits.data(), full.targets.data(), n, v, v, loss.data(),
                      lse.data());
  CrossEntropyBackward(Ctx(2), full.logits.data(), full.targets.data(), lse.data(),
                       full.dloss.data(), n, v, v, dl.data());
  std::vector<float> shard_lse[2], shard_loss[2], shard_logits[2];
  std::vector<int32_t> shard_targets[2];
  for (int s = 0; s < 2; ++s) {
    shard_logits[s].assign(n * shard_vp, 99.0f);  // padding
    shard_targets[s].resize(n);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t c = 0; c < shard_v; ++c)
        shard_logits[s][i * shard_vp + c] = full.logits[i * v + s * shard_v + c];
      shard_targets[s][i] = full.targets[i] - static_cast<int32_t>(s * shard_v);  // may be <0 or >=150
    }
    shard_lse[s].resize(n);
    shard_loss[s].resize(n);
    CrossEntropyForward(Ctx(2), shard_logits[s].data(), shard_targets[s].data(), n, shard_vp,
                        shard_v, shard_loss[s].data(), shard_lse[s].data());
  }
  std::vector<float> global_lse(n);
  for (int64_t i = 0; i < n; ++i) {
    // The all-reduce of the layers: global lse and the owner's target logit.
    const double a = shard_lse[0][i], b = shard_lse[1][i], m = std::max(a, b);
    global_lse[i] = static_cast<float>(m + std::log(std::exp(a - m) + std::exp(b - m)));
    double target_logit = 0;
    for (int s = 0; s < 2; ++s) target_logit += double(shard_lse[s][i]) - shard_loss[s][i];
    // Shard sums round differently from the one-shot sum: a few ulp of |lse| < 16
    // (ulp = 9.5e-7; observed 1 ulp): 4e-6.
    REQUIRE(std::fabs(global_lse[i] - lse[i]) < 4e-6);
    REQUIRE(std::fabs((global_lse[i] - target_logit) - loss[i]) < 4e-6);
  }
  for (int s = 0; s < 2; ++s) {
    std::vector<float> d(n * shard_vp);
    CrossEntropyBackward(Ctx(2), shard_logits[s].data(), shard_targets[s].data(),
                         global_lse.data(), full.dloss.data(), n, shard_vp, shard_v, d.data());
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t c = 0; c < shard_v; ++c) {
        // |d| <= |dloss| <= 2; an lse difference delta (~1 ulp = 1e-6) moves the softmax
        // by delta relative, exp adds 2 ulp: <= 2 (1e-6 + 2.4e-7) ~ 2.5e-6.
        REQUIRE(std::fabs(d[i * shard_vp + c] - dl[i * v + s * shard_v + c]) < 4e-6);
      }
      for (int64_t c = shard_v; c < shard_vp; ++c) REQUIRE(d[i * shard_vp + c] == 0.0f);
    }
  }
}

// Megatron's softmax over the padded vocabulary (--softmax-over-padded-vocab): the caller
// passes the softmax columns v = VP. Padded columns hold large values, so they now change
// the loss; the masked default (v = V) must not see them at all.
TEST_CASE("CrossEntropy over the padded vocabulary (softmax columns = VP)", "[cross_entropy]") {
  const int64_t n = 24, vp = 136, v = 129;
  Problem p = Make(n, vp, v, 11);  // real logits ~N(0, 16), targets in [0, V)
  const std::vector<float> pad = RandomVector(n * (vp - v), 12, 10.0f, 14.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = v; c < vp; ++c) p.logits[i * vp + c] = pad[i * (vp - v) + (c - v)];
  Problem all = p;  // the fp64 reference sees every column
  all.v = vp;

  std::vector<float> loss(n), lse(n), dl(n * vp, 7.0f);
  CrossEntropyForward(Ctx(2), p.logits.data(), p.targets.data(), n, vp, vp, loss.data(),
                      lse.data());
  std::vector<double> lse_ref;
  const std::vector<double> loss_ref = LossRef(ToDouble(p.logits), all, &lse_ref);
  CHECK(RelError(loss, loss_ref) < kFwdTol);
  CHECK(RelError(lse, lse_ref) < kFwdTol);
  CrossEntropyBackward(Ctx(2), p.logits.data(), p.targets.data(), lse.data(), p.dloss.data(), n,
                       vp, vp, dl.data());
  // Same FD step and tolerance as the masked test above (logits ~4..14: truncation ~1e-10).
  const auto f = [&](const std::vector<double>& x) { return LossRef(x, all); };
  CHECK(RelError(dl, NumericalVjp(f, ToDouble(p.logits), ToDouble(p.dloss), 1e-5)) < kBwdTol);
  // The padded columns carry a real share of the softmax (values 10..14 against a real
  // maximum ~12): their gradient is dloss * softmax, far from zero.
  double pad_grad = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = v; c < vp; ++c) pad_grad += std::fabs(dl[i * vp + c]);
  CHECK(pad_grad > 0.1);

  // Raising the padded logits by 1 changes every row's loss with the option (the padding
  // holds >= ~1% of each row's mass, so d loss >= ~1e-2 >> the 1e-5 rounding) and leaves
  // the masked default's loss, lse and gradient bit-identical.
  Problem raised = p;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = v; c < vp; ++c) raised.logits[i * vp + c] += 1.0f;
  std::vector<float> loss2(n), lse2(n);
  CrossEntropyForward(Ctx(2), raised.logits.data(), p.targets.data(), n, vp, vp, loss2.data(),
                      lse2.data());
  for (int64_t i = 0; i < n; ++i) CHECK(loss2[i] - loss[i] > 1e-3f);
  auto masked = [&](const Problem& q) {
    std::vector<float> l(n), e(n), d(n * vp);
    CrossEntropyForward(Ctx(2), q.logits.data(), q.targets.data(), n, vp, v, l.data(), e.data());
    CrossEntropyBackward(Ctx(2), q.logits.data(), q.targets.data(), e.data(), q.dloss.data(), n,
                         vp, v, d.data());
    d.insert(d.end(), l.begin(), l.end());
    d.insert(d.end(), e.begin(), e.end());
    return d;
  };
  REQUIRE(BitEqual(masked(p), masked(raised)));
}

TEST_CASE("CrossEntropy shard pieces with and without the padded softmax", "[cross_entropy]") {
  // VP = 136 split over two vocab shards of 68 columns; V = 60, so shard 1 is padding only.
  // The layers' vocab-parallel composition (row max across shards, sum of the shards'
  // sum-exp, lse = max + log(sum)) must equal the one-shard kernel, both for the masked
  // default (softmax columns per shard: 60 and 0) and with the option (68 and 68).
  const int64_t n = 32, vp = 136, v = 60, rows = 68;
  Problem p = Make(n, vp, v, 21);
  const std::vector<float> pad = RandomVector(n * (vp - v), 22, 6.0f, 12.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = v; c < vp; ++c) p.logits[i * vp + c] = pad[i * (vp - v) + (c - v)];
  for (const bool padded : {false, true}) {
    INFO((padded ? "softmax over VP" : "masked padding"));
    const int64_t cols = padded ? vp : v;
    std::vector<float> loss(n), lse(n);
    CrossEntropyForward(Ctx(2), p.logits.data(), p.targets.data(), n, vp, cols, loss.data(),
                        lse.data());
    std::vector<float> shard[2], max[2], sum[2];
    int64_t shard_cols[2];
    for (int s = 0; s < 2; ++s) {
      shard_cols[s] = padded ? rows : std::clamp<int64_t>(v - s * rows, 0, rows);
      shard[s].resize(n * rows);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < rows; ++c) shard[s][i * rows + c] = p.logits[i * vp + s * rows + c];
      max[s].resize(n);
      CrossEntropyRowMax(Ctx(2), shard[s].data(), n, rows, shard_cols[s], max[s].data());
    }
    std::vector<float> global_max(n);
    for (int64_t i = 0; i < n; ++i) global_max[i] = std::max(max[0][i], max[1][i]);
    for (int s = 0; s < 2; ++s) {
      sum[s].resize(n);
      CrossEntropySumExp(Ctx(2), shard[s].data(), global_max.data(), n, rows, shard_cols[s],
                         sum[s].data());
    }
    for (int64_t i = 0; i < n; ++i) {
      const float got = global_max[i] + std::log(sum[0][i] + sum[1][i]);
      // Two shard sums instead of one: a few ulp of |lse| < 32 (ulp 1.9e-6): 8e-6.
      REQUIRE(std::fabs(got - lse[i]) < 8e-6);
      // Targets are real tokens (< V): always in shard 0.
      REQUIRE(std::fabs((got - shard[0][i * rows + p.targets[i]]) - loss[i]) < 8e-6);
    }
    if (!padded) {
      for (int64_t i = 0; i < n; ++i) REQUIRE(max[1][i] == -INFINITY);
      for (int64_t i = 0; i < n; ++i) REQUIRE(sum[1][i] == 0.0f);
    }
  }
}

TEST_CASE("CrossEntropy matches PyTorch with a padded vocabulary", "[cross_entropy][parity]") {
  const Problem p = Make(64, 1024, 1000, 3);
  std::vector<float> loss(p.n), lse(p.n), dl(p.n * p.vp);
  CrossEntropyForward(Ctx(2), p.logits.data(), p.targets.data(), p.n, p.vp, p.v,
                      loss.data(), lse.data());
  CrossEntropyBackward(Ctx(2), p.logits.data(), p.targets.data(), lse.data(), p.dloss.data(),
                       p.n, p.vp, p.v, dl.data());
  testing::TorchRef ref("cross_entropy");
  ref.Param("n", p.n);
  ref.Param("vp", p.vp);
  ref.Param("v", p.v);
  ref.Input("logits", p.logits);
  ref.Input("targets", p.targets);
  ref.Input("dloss", p.dloss);
  auto out = ref.Run();
  CHECK(RelError(loss, out["loss"]) < kFwdTol);
  CHECK(RelError(lse, out["lse"]) < kFwdTol);
  CHECK(RelError(dl, out["dlogits"]) < kBwdTol);
}

TEST_CASE("CrossEntropy is bit-identical for 1 and 2 threads",
          "[cross_entropy][determinism]") {
  const Problem p = Make(300, 1024, 1000, 4);
  auto run = [&](int t) {
    std::vector<float> loss(p.n), lse(p.n), dl(p.n * p.vp);
    CrossEntropyForward(Ctx(t), p.logits.data(), p.targets.data(), p.n, p.vp, p.v,
                        loss.data(), lse.data());
    CrossEntropyBackward(Ctx(t), p.logits.data(), p.targets.data(), lse.data(),
                         p.dloss.data(), p.n, p.vp, p.v, dl.data());
    dl.insert(dl.end(), loss.begin(), loss.end());
    dl.insert(dl.end(), lse.begin(), lse.end());
    return dl;
  };
  REQUIRE(BitEqual(run(1), run(2)));
}

}  // namespace
}  // namespace mxmaca::kernels::cpu
