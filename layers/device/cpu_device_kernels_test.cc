// layers/device/cpu_device_kernels_test.cc: CpuDeviceKernels is a thin wrapper, so each
// method must give exactly the bits of the direct kernels/cpu call with the same
// ExecContext. Shapes are chosen with every size distinct (and leading dimensions padded)
// so that a swapped or dropped argument changes the result; inputs are fresh seeded
// random values. Also: the memory calls and the argument checks.
#include "layers/device/cpu_device_kernels.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/philox.h"

namespace mxmaca::layers::device {
namespace {

namespace cpu = ::mxmaca::kernels::cpu;
using kernels::ExecContext;
using kernels::Precision;
using kernels::RngKey;

ExecContext Context(Precision precision) {
  ExecContext ctx;
  ctx.num_threads = 2;
  ctx.precision = precision;
  return ctx;
}

std::vector<float> Random(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<int32_t> RandomInts(int64_t n, uint32_t seed, int32_t lo, int32_t hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = dist(rng);
  return v;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

#define REQUIRE_OK(expr)                   \
  do {                                     \
    const absl::Status req_ok_s_ = (expr); \
    INFO(req_ok_s_.ToString());            \
    REQUIRE(req_ok_s_.ok());               \
  } while (0)

TEST_CASE("CpuDeviceKernels reports its name, precision and no fused attention") {
  const CpuDeviceKernels dk(Context(Precision::kBf16));
  CHECK(dk.name() == "cpu");
  CHECK(dk.precision() == Precision::kBf16);
  CHECK_FALSE(dk.has_fused_attention(64));
  CHECK(dk.context().num_threads == 2);
  ExecContext zero_threads;
  zero_threads.num_threads = 0;
  CHECK(CpuDeviceKernels(zero_threads).context().num_threads == 1);
}

TEST_CASE("memory: aligned allocation, copies round trip, Zero") {
  CpuDeviceKernels dk(Context(Precision::kFp32));
  const int64_t n = 1000;
  const std::vector<float> host = Random(n, 1);
  auto a = dk.Allocate(n * sizeof(float));
  auto b = dk.Allocate(n * sizeof(float));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(reinterpret_cast<uintptr_t>(*a) % 256 == 0);
  CHECK(reinterpret_cast<uintptr_t>(*b) % 256 == 0);
  REQUIRE_OK(dk.CopyToDevice(*a, host.data(), n * sizeof(float)));
  REQUIRE_OK(dk.CopyDeviceToDevice(*b, *a, n * sizeof(float)));
  std::vector<float> back(n, -7.0f);
  REQUIRE_OK(dk.CopyToHost(back.data(), *b, n * sizeof(float)));
  REQUIRE_OK(dk.Synchronize());
  CHECK(SameBits(back, host));
  // Zero the middle third only: the rest keeps its values.
  REQUIRE_OK(dk.Zero(static_cast<float*>(*b) + n / 3, (n / 3) * sizeof(float)));
  REQUIRE_OK(dk.CopyToHost(back.data(), *b, n * sizeof(float)));
  for (int64_t i = 0; i < n; ++i) {
    const bool zeroed = i >= n / 3 && i < 2 * (n / 3);
    if (zeroed ? back[i] != 0.0f : back[i] != host[i]) FAIL("element " << i);
  }
  dk.Free(*a);
  dk.Free(*b);
  dk.Free(nullptr);
  CHECK(dk.Allocate(0).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(dk.Allocate(-5).status().code() == absl::StatusCode::kInvalidArgument);
  // 2^62 bytes: no host has that, aligned_alloc fails.
  const auto huge = dk.Allocate(int64_t{1} << 62);
  CHECK(huge.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(huge.status().message().find("4611686018427387904 bytes") != std::string::npos);
  CHECK(dk.CopyToHost(back.data(), host.data(), -1).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Gemm equals kernels/cpu Gemm bit for bit (both precisions, all transposes)") {
  const int64_t m = 37, n = 29, k = 41;
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    const ExecContext ctx = Context(precision);
    CpuDeviceKernels dk(ctx);
    for (int tr = 0; tr < 4; ++tr) {
      const bool ta = tr & 1, tb = tr & 2;
      // Padded leading dimensions: a swapped ld reads different elements.
      const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
      const auto a = Random((ta ? k : m) * lda, 10 + tr);
      const auto b = Random((tb ? n : k) * ldb, 20 + tr);
      const auto c0 = Random(m * ldc, 30 + tr);
      auto want = c0, got = c0;
      cpu::Gemm(ctx, ta, tb, m, n, k, 0.75f, a.data(), lda, b.data(), ldb, 0.5f, want.data(), ldc);
      REQUIRE_OK(
          dk.Gemm(ta, tb, m, n, k, 0.75f, a.data(), lda, b.data(), ldb, 0.5f, got.data(), ldc));
      CHECK(SameBits(got, want));
    }
  }
  CpuDeviceKernels dk(Context(Precision::kFp32));
  std::vector<float> a(m * k), b(k * n), c(m * n);
  const absl::Status bad =
      dk.Gemm(false, false, m, n, k, 1.0f, a.data(), k - 1, b.data(), n, 0.0f, c.data(), n);
  CHECK(bad.code() == absl::StatusCode::kInvalidArgument);
  CHECK(bad.message().find("lda = 40") != std::string::npos);
}

TEST_CASE("elementwise calls equal kernels/cpu bit for bit") {
  const ExecContext ctx = Context(Precision::kFp32);
  CpuDeviceKernels dk(ctx);
  const int64_t rows = 53, cols = 38, n = rows * cols;
  const auto x = Random(n, 1, -3.0f, 3.0f), dy = Random(n, 2), bias = Random(cols, 3);

  SECTION("AddBias, Add, Scale") {
    auto want = x, got = x;
    cpu::AddBias(ctx, want.data(), bias.data(), rows, cols);
    REQUIRE_OK(dk.AddBias(got.data(), bias.data(), rows, cols));
    CHECK(SameBits(got, want));
    std::vector<float> w(n), g(n);
    cpu::Add(ctx, x.data(), dy.data(), w.data(), n);
    REQUIRE_OK(dk.Add(x.data(), dy.data(), g.data(), n));
    CHECK(SameBits(g, w));
    want = x;
    got = x;
    cpu::Scale(ctx, want.data(), n, -0.37f);
    REQUIRE_OK(dk.Scale(got.data(), n, -0.37f));
    CHECK(SameBits(got, want));
  }
  SECTION("BiasGrad overwrites dbias with the kernels/cpu column sums") {
    std::vector<float> want(cols, 0.0f);
    cpu::BiasGrad(ctx, dy.data(), rows, cols, want.data());
    std::vector<float> got = Random(cols, 4);  // stale values must not survive
    REQUIRE_OK(dk.BiasGrad(dy.data(), rows, cols, got.data()));
    CHECK(SameBits(got, want));
  }
  SECTION("SumSquares") {
    double got = -1.0;
    REQUIRE_OK(dk.SumSquares(x.data(), n, &got));
    const double want = cpu::SumSquares(ctx, x.data(), n);
    CHECK(std::memcmp(&got, &want, sizeof(double)) == 0);
  }
  SECTION("GELU (exact and tanh), forward and backward") {
    std::vector<float> w(n), g(n);
    cpu::GeluForward(ctx, x.data(), w.data(), n);
    REQUIRE_OK(dk.GeluForward(x.data(), g.data(), n));
    CHECK(SameBits(g, w));
    cpu::GeluBackward(ctx, x.data(), dy.data(), w.data(), n);
    REQUIRE_OK(dk.GeluBackward(x.data(), dy.data(), g.data(), n));
    CHECK(SameBits(g, w));
    cpu::GeluTanhForward(ctx, x.data(), w.data(), n);
    REQUIRE_OK(dk.GeluTanhForward(x.data(), g.data(), n));
    CHECK(SameBits(g, w));
    cpu::GeluTanhBackward(ctx, x.data(), dy.data(), w.data(), n);
    REQUIRE_OK(dk.GeluTanhBackward(x.data(), dy.data(), g.data(), n));
    CHECK(SameBits(g, w));
  }
  SECTION("SwiGLU forward and backward") {
    const int64_t f = cols / 2;  // x [rows, 2f]
    std::vector<float> w(rows * f), g(rows * f);
    cpu::SwigluForward(ctx, x.data(), w.data(), rows, f);
    REQUIRE_OK(dk.SwigluForward(x.data(), g.data(), rows, f));
    CHECK(SameBits(g, w));
    const auto dys = Random(rows * f, 5);
    std::vector<float> wd(n), gd(n);
    cpu::SwigluBackward(ctx, x.data(), dys.data(), wd.data(), rows, f);
    REQUIRE_OK(dk.SwigluBackward(x.data(), dys.data(), gd.data(), rows, f));
    CHECK(SameBits(gd, wd));
  }
  SECTION("dropout forward and backward with an index offset") {
    const RngKey key{1234, kernels::MakeRngStream(3, 1, 7, 2)};
    std::vector<float> w(n), g(n);
    cpu::DropoutForward(ctx, x.data(), w.data(), n, 0.3f, key, 977);
    REQUIRE_OK(dk.DropoutForward(x.data(), g.data(), n, 0.3f, &key, 977));
    CHECK(SameBits(g, w));
    cpu::DropoutBackward(ctx, dy.data(), w.data(), n, 0.3f, key, 977);
    REQUIRE_OK(dk.DropoutBackward(dy.data(), g.data(), n, 0.3f, &key, 977));
    CHECK(SameBits(g, w));
    CHECK(dk.DropoutForward(x.data(), g.data(), n, 1.0f, &key, 0).code() ==
          absl::StatusCode::kInvalidArgument);
  }
  CHECK(dk.Add(x.data(), dy.data(), nullptr, -1).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("LayerNorm and RMSNorm equal kernels/cpu bit for bit") {
  const ExecContext ctx = Context(Precision::kFp32);
  CpuDeviceKernels dk(ctx);
  const int64_t n = 19, h = 72;
  const auto x = Random(n * h, 1, -2.0f, 3.0f), dy = Random(n * h, 2);
  const auto gamma = Random(h, 3, 0.5f, 1.5f), beta = Random(h, 4);
  const auto dgamma0 = Random(h, 5), dbeta0 = Random(h, 6);  // *BackwardWeight accumulate
  std::vector<float> wy(n * h), gy(n * h), wmean(n), gmean(n), wrstd(n), grstd(n);
  cpu::LayerNormForward(ctx, x.data(), gamma.data(), beta.data(), 1e-5f, n, h, wy.data(),
                        wmean.data(), wrstd.data());
  REQUIRE_OK(dk.LayerNormForward(x.data(), gamma.data(), beta.data(), 1e-5f, n, h, gy.data(),
                                 gmean.data(), grstd.data()));
  CHECK(SameBits(gy, wy));
  CHECK(SameBits(gmean, wmean));
  CHECK(SameBits(grstd, wrstd));
  std::vector<float> wdx(n * h), gdx(n * h);
  cpu::LayerNormBackwardInput(ctx, dy.data(), x.data(), gamma.data(), wmean.data(), wrstd.data(), n,
                              h, wdx.data());
  REQUIRE_OK(dk.LayerNormBackwardInput(dy.data(), x.data(), gamma.data(), wmean.data(),
                                       wrstd.data(), n, h, gdx.data()));
  CHECK(SameBits(gdx, wdx));
  auto wdg = dgamma0, gdg = dgamma0, wdb = dbeta0, gdb = dbeta0;
  cpu::LayerNormBackwardWeight(ctx, dy.data(), x.data(), wmean.data(), wrstd.data(), n, h,
                               wdg.data(), wdb.data());
  REQUIRE_OK(dk.LayerNormBackwardWeight(dy.data(), x.data(), wmean.data(), wrstd.data(), n, h,
                                        gdg.data(), gdb.data()));
  CHECK(SameBits(gdg, wdg));
  CHECK(SameBits(gdb, wdb));

  cpu::RmsNormForward(ctx, x.data(), gamma.data(), 1e-6f, n, h, wy.data(), wrstd.data());
  REQUIRE_OK(dk.RmsNormForward(x.data(), gamma.data(), 1e-6f, n, h, gy.data(), grstd.data()));
  CHECK(SameBits(gy, wy));
  CHECK(SameBits(grstd, wrstd));
  cpu::RmsNormBackwardInput(ctx, dy.data(), x.data(), gamma.data(), wrstd.data(), n, h, wdx.data());
  REQUIRE_OK(
      dk.RmsNormBackwardInput(dy.data(), x.data(), gamma.data(), wrstd.data(), n, h, gdx.data()));
  CHECK(SameBits(gdx, wdx));
  wdg = dgamma0;
  gdg = dgamma0;
  cpu::RmsNormBackwardWeight(ctx, dy.data(), x.data(), wrstd.data(), n, h, wdg.data());
  REQUIRE_OK(dk.RmsNormBackwardWeight(dy.data(), x.data(), wrstd.data(), n, h, gdg.data()));
  CHECK(SameBits(gdg, wdg));
  CHECK(dk.RmsNormForward(x.data(), gamma.data(), 1e-6f, n, 0, gy.data(), grstd.data()).code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("embedding and cross-entropy equal kernels/cpu bit for bit") {
  const ExecContext ctx = Context(Precision::kFp32);
  CpuDeviceKernels dk(ctx);
  const int64_t n = 45, h = 24, vocab = 31;
  const auto ids = RandomInts(n, 1, 0, vocab - 1);
  const auto table = Random(vocab * h, 2), dout = Random(n * h, 3), out0 = Random(n * h, 4);
  for (bool accumulate : {false, true}) {
    auto w = out0, g = out0;
    cpu::EmbeddingForward(ctx, ids.data(), n, table.data(), h, w.data(), accumulate);
    REQUIRE_OK(dk.EmbeddingForward(ids.data(), n, table.data(), h, g.data(), accumulate));
    CHECK(SameBits(g, w));
  }
  auto wt = table, gt = table;  // the backward accumulates into dtable
  cpu::EmbeddingBackward(ctx, ids.data(), n, dout.data(), h, wt.data());
  REQUIRE_OK(dk.EmbeddingBackward(ids.data(), n, dout.data(), h, gt.data()));
  CHECK(SameBits(gt, wt));
  // A vocabulary shard (rows [10, 22) of 31): other shards' ids give zero rows or no change.
  const int64_t start = 10, rows = 12;
  for (bool accumulate : {false, true}) {
    auto w = out0, g = out0;
    cpu::VocabShardEmbeddingForward(ctx, ids.data(), n, table.data(), start, rows, h, w.data(),
                                    accumulate);
    REQUIRE_OK(dk.VocabShardEmbeddingForward(ids.data(), n, table.data(), start, rows, h,
                                             g.data(), accumulate));
    CHECK(SameBits(g, w));
  }
  auto ws = table, gs = table;
  cpu::VocabShardEmbeddingBackward(ctx, ids.data(), n, dout.data(), start, rows, h, ws.data());
  REQUIRE_OK(
      dk.VocabShardEmbeddingBackward(ids.data(), n, dout.data(), start, rows, h, gs.data()));
  CHECK(SameBits(gs, ws));
  CHECK(dk.VocabShardEmbeddingForward(ids.data(), n, table.data(), start, -1, h, gs.data(), false)
            .code() == absl::StatusCode::kInvalidArgument);

  const int64_t vp = 40, v = 33;  // padded vocab, softmax over the first v columns
  const auto logits = Random(n * vp, 5, -4.0f, 4.0f), dloss = Random(n, 6);
  auto targets = RandomInts(n, 7, 0, v - 1);
  targets[3] = -1;  // outside this shard: loss = lse
  std::vector<float> wl(n), gl(n), wlse(n), glse(n);
  cpu::CrossEntropyForward(ctx, logits.data(), targets.data(), n, vp, v, wl.data(), wlse.data());
  REQUIRE_OK(
      dk.CrossEntropyForward(logits.data(), targets.data(), n, vp, v, gl.data(), glse.data()));
  CHECK(SameBits(gl, wl));
  CHECK(SameBits(glse, wlse));
  std::vector<float> wd(n * vp), gd(n * vp);
  cpu::CrossEntropyBackward(ctx, logits.data(), targets.data(), wlse.data(), dloss.data(), n, vp, v,
                            wd.data());
  REQUIRE_OK(dk.CrossEntropyBackward(logits.data(), targets.data(), wlse.data(), dloss.data(), n,
                                     vp, v, gd.data()));
  CHECK(SameBits(gd, wd));
  CHECK(dk.CrossEntropyForward(logits.data(), targets.data(), n, vp, vp + 1, gl.data(), glse.data())
            .code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("attention calls equal kernels/cpu bit for bit; fused attention is unimplemented") {
  const int64_t b = 2, s = 21, heads = 6, groups = 2, hd = 8;
  const AttentionDims d{b, s, heads, groups, hd};
  const cpu::AttentionShape shape{b, s, heads, groups, hd};
  const int64_t nq = b * heads * s * hd, nkv = b * groups * s * hd;
  const int64_t nqkv = b * s * (heads + 2 * groups) * hd, np = b * heads * s * s;
  std::vector<int32_t> doc(b * s);
  for (int64_t i = 0; i < b * s; ++i) doc[i] = (i % s) < 9 ? 0 : 9;
  const RngKey key{99, kernels::MakeRngStream(2, 0, 1, 3)};
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    const ExecContext ctx = Context(precision);
    CpuDeviceKernels dk(ctx);
    const auto qkv = Random(nqkv, 1);
    std::vector<float> wq(nq), wk(nkv), wv(nkv), gq(nq), gk(nkv), gv(nkv);
    cpu::SplitQkv(ctx, shape, qkv.data(), wq.data(), wk.data(), wv.data());
    REQUIRE_OK(dk.SplitQkv(d, qkv.data(), gq.data(), gk.data(), gv.data()));
    CHECK(SameBits(gq, wq));
    CHECK(SameBits(gk, wk));
    CHECK(SameBits(gv, wv));
    const auto dq = Random(nq, 2), dkk = Random(nkv, 3), dv = Random(nkv, 4);
    std::vector<float> wqkv(nqkv), gqkv(nqkv);
    cpu::MergeQkvGrad(ctx, shape, dq.data(), dkk.data(), dv.data(), wqkv.data());
    REQUIRE_OK(dk.MergeQkvGrad(d, dq.data(), dkk.data(), dv.data(), gqkv.data()));
    CHECK(SameBits(gqkv, wqkv));
    std::vector<float> wt(nq), gt(nq);
    cpu::HeadsToTokens(ctx, shape, dq.data(), wt.data());
    REQUIRE_OK(dk.HeadsToTokens(d, dq.data(), gt.data()));
    CHECK(SameBits(gt, wt));
    cpu::TokensToHeads(ctx, shape, dq.data(), wt.data());
    REQUIRE_OK(dk.TokensToHeads(d, dq.data(), gt.data()));
    CHECK(SameBits(gt, wt));

    for (float p : {0.0f, 0.15f}) {
      const int32_t* docs = p > 0 ? doc.data() : nullptr;
      std::vector<float> wp(np), gp(np), wo(nq), go(nq);
      cpu::AttentionForward(ctx, shape, wq.data(), wk.data(), wv.data(), docs, 0.3f, p, key,
                            wp.data(), wo.data());
      REQUIRE_OK(dk.AttentionForward(d, wq.data(), wk.data(), wv.data(), docs, 0.3f, p, &key,
                                     gp.data(), go.data()));
      CHECK(SameBits(gp, wp));
      CHECK(SameBits(go, wo));
      const auto dout = Random(nq, 5);
      std::vector<float> wdq(nq), gdq(nq), wdk(nkv), gdk(nkv), wdv(nkv), gdv(nkv);
      cpu::AttentionBackward(ctx, shape, wq.data(), wk.data(), wv.data(), wp.data(), docs, 0.3f, p,
                             key, dout.data(), wdq.data(), wdk.data(), wdv.data());
      REQUIRE_OK(dk.AttentionBackward(d, wq.data(), wk.data(), wv.data(), wp.data(), docs, 0.3f, p,
                                      &key, dout.data(), gdq.data(), gdk.data(), gdv.data()));
      CHECK(SameBits(gdq, wdq));
      CHECK(SameBits(gdk, wdk));
      CHECK(SameBits(gdv, wdv));
    }
    std::vector<float> o(nq), lse(b * heads * s), delta(b * heads * s);
    const absl::Status fwd = dk.FusedAttentionForward(d, wq.data(), wk.data(), wv.data(), nullptr,
                                                      0.3f, 0.0f, &key, o.data(), lse.data());
    CHECK(fwd.code() == absl::StatusCode::kUnimplemented);
    CHECK(fwd.message().find("no fused attention on the CPU backend") != std::string::npos);
    const absl::Status bwd = dk.FusedAttentionBackward(
        d, wq.data(), wk.data(), wv.data(), o.data(), lse.data(), nullptr, 0.3f, 0.0f, &key,
        o.data(), gq.data(), gk.data(), gv.data(), delta.data());
    CHECK(bwd.code() == absl::StatusCode::kUnimplemented);
  }
  CpuDeviceKernels dk(Context(Precision::kFp32));
  std::vector<float> buf(nqkv);
  CHECK(dk.SplitQkv(AttentionDims{b, s, 5, 2, hd}, buf.data(), buf.data(), buf.data(), buf.data())
            .code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("RoPE and AdamW equal kernels/cpu bit for bit") {
  const ExecContext ctx = Context(Precision::kFp32);
  CpuDeviceKernels dk(ctx);
  const int64_t b = 2, s = 13, heads = 3, hd = 16, rotary = 10;
  const auto x = Random(b * heads * s * hd, 1);
  const auto positions = RandomInts(b * s, 2, 0, 500);
  auto w = x, g = x;
  cpu::RopeForward(ctx, w.data(), positions.data(), b, s, heads, hd, rotary, 10000.0f);
  REQUIRE_OK(dk.RopeForward(g.data(), positions.data(), b, s, heads, hd, rotary,
                            kernels::RopeFrequencies{10000.0f}));
  CHECK(SameBits(g, w));
  cpu::RopeBackward(ctx, w.data(), positions.data(), b, s, heads, hd, rotary, 500000.0f);
  REQUIRE_OK(dk.RopeBackward(g.data(), positions.data(), b, s, heads, hd, rotary,
                             kernels::RopeFrequencies{500000.0f}));
  CHECK(SameBits(g, w));
  // Llama-3 scaling with interleaved pairs and position interpolation.
  kernels::RopeFrequencies scaled{500000.0f};
  scaled.llama3_scaling = true;
  scaled.scaling_factor = 8.0f;
  scaled.seq_len_interpolation_factor = 2.0f;
  scaled.interleaved = true;
  cpu::RopeForward(ctx, w.data(), positions.data(), b, s, heads, hd, rotary, scaled);
  REQUIRE_OK(dk.RopeForward(g.data(), positions.data(), b, s, heads, hd, rotary, scaled));
  CHECK(SameBits(g, w));
  cpu::RopeBackward(ctx, w.data(), positions.data(), b, s, heads, hd, rotary, scaled);
  REQUIRE_OK(dk.RopeBackward(g.data(), positions.data(), b, s, heads, hd, rotary, scaled));
  CHECK(SameBits(g, w));
  CHECK(dk.RopeForward(g.data(), positions.data(), b, s, heads, hd, 7,
                       kernels::RopeFrequencies{10000.0f})
            .code() == absl::StatusCode::kInvalidArgument);
  scaled.scaling_factor = 0.0f;
  CHECK(dk.RopeForward(g.data(), positions.data(), b, s, heads, hd, rotary, scaled).code() ==
        absl::StatusCode::kInvalidArgument);

  const int64_t n = 777;
  const auto param = Random(n, 3), grad = Random(n, 4), m0 = Random(n, 5, -0.1f, 0.1f),
             v0 = Random(n, 6, 0.0f, 0.01f);
  auto wp = param, gp = param, wm = m0, gm = m0, wv = v0, gv = v0;
  cpu::AdamWStep(ctx, wp.data(), grad.data(), wm.data(), wv.data(), n, 3e-4f, 0.9f, 0.95f, 1e-8f,
                 0.1f, 3);
  REQUIRE_OK(dk.AdamWStep(gp.data(), grad.data(), gm.data(), gv.data(), n, 3e-4f, 0.9f, 0.95f,
                          1e-8f, 0.1f, 3));
  CHECK(SameBits(gp, wp));
  CHECK(SameBits(gm, wm));
  CHECK(SameBits(gv, wv));
  CHECK(dk.AdamWStep(gp.data(), grad.data(), gm.data(), gv.data(), n, 3e-4f, 0.9f, 0.95f, 1e-8f,
                     0.1f, 0)
            .code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mxmaca::layers::device
