// tests/gpu/reference_test.cc: the fp64 references of the GPU check binary
// (reference.h) against the CPU backend (kernels/cpu), on the build machine — so the
// yardstick the GPU kernels are measured with is itself checked where no GPU exists.
// Tolerance 1e-5 norm-wise for fp32 kernels (the GPU check's own fp32 bar; the CPU
// kernels are fp32 with fp32 accumulation over at most ~1000 terms, ~1e-7..1e-6).
// bf16: the CPU backend rounds GEMM operands exactly as the emulated reference does, so
// they agree to fp32 accumulation error too, except attention, where a probability
// rounded to bf16 can land on the other side of a rounding boundary (1e-4).
#include "tests/gpu/reference.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"

namespace mxmaca::gpu_check {
namespace {

namespace cpu = ::mxmaca::kernels::cpu;
using kernels::ExecContext;
using kernels::Precision;

std::vector<float> Rand(std::mt19937_64& rng, size_t n, float stddev = 1.0f, float mean = 0.0f) {
  std::normal_distribution<float> d(mean, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST_CASE("reference Gemm matches cpu::Gemm (fp32 and bf16)") {
  std::mt19937_64 rng(1);
  const int64_t m = 37, n = 29, k = 53;
  for (int tr = 0; tr < 4; ++tr) {
    const bool ta = tr & 1, tb = tr & 2;
    auto a = Rand(rng, m * k), b = Rand(rng, k * n), c = Rand(rng, m * n);
    const auto c0 = c;
    for (int bf = 0; bf < 2; ++bf) {
      ExecContext ctx;
      ctx.precision = bf ? Precision::kBf16 : Precision::kFp32;
      c = c0;
      cpu::Gemm(ctx, ta, tb, m, n, k, 0.7f, a.data(), ta ? m : k, b.data(), tb ? k : n, 0.3f,
                c.data(), n);
      const Vec ref = Gemm(ta, tb, m, n, k, 0.7, a.data(), ta ? m : k, b.data(), tb ? k : n,
                           0.3, c0.data(), bf);
      CHECK(RelErr(c, ref) < 1e-5);
    }
  }
}

TEST_CASE("reference activations and dropout match kernels/cpu") {
  std::mt19937_64 rng(2);
  ExecContext ctx;
  const int64_t n = 4096;
  auto x = Rand(rng, n, 2.0f), dy = Rand(rng, n);
  std::vector<float> y(n), dx(n);
  Vec ref(n), dref(n);
  cpu::GeluForward(ctx, x.data(), y.data(), n);
  cpu::GeluBackward(ctx, x.data(), dy.data(), dx.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ref[i] = Gelu(x[i]);
    dref[i] = dy[i] * GeluGrad(x[i]);
  }
  CHECK(RelErr(y, ref) < 1e-5);
  CHECK(RelErr(dx, dref) < 1e-5);
  cpu::GeluTanhForward(ctx, x.data(), y.data(), n);
  cpu::GeluTanhBackward(ctx, x.data(), dy.data(), dx.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ref[i] = GeluTanh(x[i]);
    dref[i] = dy[i] * GeluTanhGrad(x[i]);
  }
  CHECK(RelErr(y, ref) < 1e-5);
  CHECK(RelErr(dx, dref) < 1e-5);
  const kernels::RngKey key{5, kernels::MakeRngStream(1, 2, 3, 4)};
  cpu::DropoutForward(ctx, x.data(), y.data(), n, 0.25f, key, 77);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += (y[i] != 0.0f) != DropKeep(key, 77 + i, 0.25f);
  CHECK(bad == 0);
}

TEST_CASE("reference norms match kernels/cpu") {
  std::mt19937_64 rng(3);
  ExecContext ctx;
  const int64_t n = 33, h = 96;
  auto x = Rand(rng, n * h, 2.0f, 0.5f), dy = Rand(rng, n * h), gamma = Rand(rng, h, 0.5f, 1.0f),
       beta = Rand(rng, h);
  for (int rms = 0; rms < 2; ++rms) {
    std::vector<float> y(n * h), mean(n, 0.0f), rstd(n), dx(n * h), dg(h, 0.0f), db(h, 0.0f);
    if (rms) {
      cpu::RmsNormForward(ctx, x.data(), gamma.data(), 1e-5f, n, h, y.data(), rstd.data());
      cpu::RmsNormBackwardInput(ctx, dy.data(), x.data(), gamma.data(), rstd.data(), n, h, dx.data());
      cpu::RmsNormBackwardWeight(ctx, dy.data(), x.data(), rstd.data(), n, h, dg.data());
    } else {
      cpu::LayerNormForward(ctx, x.data(), gamma.data(), beta.data(), 1e-5f, n, h, y.data(),
                            mean.data(), rstd.data());
      cpu::LayerNormBackwardInput(ctx, dy.data(), x.data(), gamma.data(), mean.data(),
                                  rstd.data(), n, h, dx.data());
      cpu::LayerNormBackwardWeight(ctx, dy.data(), x.data(), mean.data(), rstd.data(), n, h,
                                   dg.data(), db.data());
    }
    Vec ry, rmu, rrs, rdx, rdg, rdb;
    NormForward(rms, x.data(), gamma.data(), beta.data(), 1e-5, n, h, &ry, &rmu, &rrs);
    NormBackward(rms, dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), n, h, &rdx,
                 &rdg, &rdb);
    CHECK(RelErr(y, ry) < 1e-5);
    CHECK(RelErr(rstd, rrs) < 1e-5);
    CHECK(RelErr(dx, rdx) < 1e-5);
    CHECK(RelErr(dg, rdg) < 1e-5);
    if (!rms) CHECK(RelErr(db, rdb) < 1e-5);
  }
}

TEST_CASE("reference cross-entropy matches kernels/cpu") {
  std::mt19937_64 rng(4);
  ExecContext ctx;
  const int64_t n = 20, v = 300, vp = 320;
  auto logits = Rand(rng, n * vp, 3.0f), dloss = Rand(rng, n);
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 37) % v);
  t[3] = -1;
  std::vector<float> loss(n), lse(n), d(n * vp);
  cpu::CrossEntropyForward(ctx, logits.data(), t.data(), n, vp, v, loss.data(), lse.data());
  cpu::CrossEntropyBackward(ctx, logits.data(), t.data(), lse.data(), dloss.data(), n, vp, v, d.data());
  Vec rloss, rlse;
  CrossEntropyForward(logits.data(), t.data(), n, vp, v, &rloss, &rlse);
  CHECK(RelErr(loss, rloss) < 1e-5);
  CHECK(RelErr(lse, rlse) < 1e-5);
  CHECK(RelErr(d, CrossEntropyBackward(logits.data(), t.data(), lse.data(), dloss.data(), n, vp, v)) < 1e-5);
}

TEST_CASE("reference AdamW matches kernels/cpu over 5 steps") {
  std::mt19937_64 rng(5);
  ExecContext ctx;
  const int64_t n = 1000;
  auto p = Rand(rng, n, 0.02f);
  const auto p0 = p;
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  Vec rp(p.begin(), p.end()), rm(n, 0), rv(n, 0);
  for (int64_t step = 1; step <= 5; ++step) {
    auto g = Rand(rng, n, 0.01f);
    cpu::AdamWStep(ctx, p.data(), g.data(), m.data(), v.data(), n, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
    AdamW(&rp, g.data(), &rm, &rv, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
  }
  std::vector<double> d(n);
  Vec dref(n);
  for (int64_t i = 0; i < n; ++i) {
    d[i] = static_cast<double>(p[i]) - p0[i];
    dref[i] = rp[i] - p0[i];
  }
  // The parameter change is ~1e-3 of the parameters: fp32 rounding of p costs ~1e-4 of
  // the change; compare it with that allowance.
  CHECK(RelErr(d, dref) < 1e-3);
  CHECK(RelErr(v, rv) < 1e-5);
}

TEST_CASE("reference RoPE matches kernels/cpu") {
  std::mt19937_64 rng(7);
  ExecContext ctx;
  const int64_t b = 2, s = 30, heads = 3, d = 16, rotary = 12;
  std::vector<int32_t> pos(b * s);
  for (int64_t i = 0; i < b * s; ++i) pos[i] = static_cast<int32_t>(i % s);
  auto x = Rand(rng, b * heads * s * d);
  for (int dir = 0; dir < 2; ++dir) {
    auto y = x;
    if (dir == 0) {
      cpu::RopeForward(ctx, y.data(), pos.data(), b, s, heads, d, rotary, 10000.0f);
    } else {
      cpu::RopeBackward(ctx, y.data(), pos.data(), b, s, heads, d, rotary, 10000.0f);
    }
    CHECK(RelErr(y, Rope(x.data(), pos.data(), b, s, heads, d, rotary, 10000.0f, dir ? -1.0 : 1.0)) < 1e-6);
  }
}

TEST_CASE("reference attention matches kernels/cpu (docs, dropout, GQA, bf16)") {
  std::mt19937_64 rng(6);
  const AttnShape rs{2, 24, 4, 2, 8};
  const cpu::AttentionShape sh{rs.b, rs.s, rs.heads, rs.groups, rs.d};
  const int64_t nq = rs.b * rs.heads * rs.s * rs.d, nkv = rs.b * rs.groups * rs.s * rs.d;
  const int64_t np = rs.b * rs.heads * rs.s * rs.s;
  auto q = Rand(rng, nq), k = Rand(rng, nkv), v = Rand(rng, nkv), dout = Rand(rng, nq);
  std::vector<int32_t> doc(rs.b * rs.s);
  for (int64_t i = 0; i < rs.b * rs.s; ++i) doc[i] = (i % rs.s) < 10 ? 0 : 10;
  const kernels::RngKey key{9, 11};
  const double scale = 1 / std::sqrt(8.0);
  for (int bf = 0; bf < 2; ++bf) {
    ExecContext ctx;
    ctx.precision = bf ? Precision::kBf16 : Precision::kFp32;
    const double tol = bf ? 1e-4 : 1e-5;
    std::vector<float> probs(np), o(nq), dq(nq), dk(nkv), dv(nkv);
    cpu::AttentionForward(ctx, sh, q.data(), k.data(), v.data(), doc.data(), scale, 0.2f, key,
                          probs.data(), o.data());
    Vec rp, ro;
    AttentionForward(rs, q.data(), k.data(), v.data(), doc.data(), scale, 0.2f, key, bf, &rp, &ro);
    CHECK(RelErr(probs, rp) < tol);
    CHECK(RelErr(o, ro) < tol);
    cpu::AttentionBackward(ctx, sh, q.data(), k.data(), v.data(), probs.data(), doc.data(),
                           scale, 0.2f, key, dout.data(), dq.data(), dk.data(), dv.data());
    Vec rdq, rdk, rdv;
    AttentionBackward(rs, q.data(), k.data(), v.data(), probs.data(), doc.data(), scale, 0.2f,
                      key, dout.data(), bf, &rdq, &rdk, &rdv);
    CHECK(RelErr(dq, rdq) < tol);
    CHECK(RelErr(dk, rdk) < tol);
    CHECK(RelErr(dv, rdv) < tol);
  }
}

}  // namespace
}  // namespace mxmaca::gpu_check
