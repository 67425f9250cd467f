// tests/gpu/gpu_check_numerics.cc: every kernels/cuda op against an fp64 reference
// (reference.h) on seeded random inputs; norm-wise relative errors.
// Bounds: fp32 paths 1e-5 (the bar; fp32 accumulation over at most a few
// thousand terms stays near 1e-6). bf16 paths: at most 2x the error of the
// bf16-emulated reference (operands rounded to bf16, exact product) against the exact
// fp64 result. Bit-exact where the contract promises it: dropout masks (same Philox
// stream as the CPU backend), layout permutations, AdamW against the CPU backend's fp32
// operation order.
#include <cmath>
#include <cstring>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/element_math.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/fused_attention.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"
#include "tests/gpu/check_util.h"
#include "tests/gpu/reference.h"

namespace mxmaca::gpu_check {
namespace {

namespace kc = ::mxmaca::kernels::cuda;
using kernels::ExecContext;
using kernels::Precision;
using kernels::RngKey;

constexpr double kFp32Bound = 1e-5;

std::string Dims(std::initializer_list<int64_t> d) {
  std::string s;
  for (int64_t x : d) s += (s.empty() ? "" : "x") + std::to_string(x);
  return s;
}

void CheckGemm(Table* t, kc::GemmHandle& gemm, std::mt19937_64& rng) {
  const int64_t m = 192, n = 160, k = 320;
  for (int tr = 0; tr < 4; ++tr) {
    const bool ta = tr & 1, tb = tr & 2;
    const std::string name = std::string("Gemm ") + (ta ? "T" : "N") + (tb ? "T" : "N");
    const int64_t lda = ta ? m : k, ldb = tb ? k : n;
    auto a = Normal(rng, m * k), b = Normal(rng, k * n), c0 = Normal(rng, m * n);
    Dev<float> da(a), db(b), dc(c0);
    const Vec exact = Gemm(ta, tb, m, n, k, 0.7, a.data(), lda, b.data(), ldb, 0.3, c0.data(), false);
    const Vec emul = Gemm(ta, tb, m, n, k, 0.7, a.data(), lda, b.data(), ldb, 0.3, c0.data(), true);
    const double emul_err = RelErr(std::vector<double>(emul), exact);
    Guard(t, name + " fp32", [&] {
      ExecContext ctx;
      dc.Up(c0);
      CK(kc::Gemm(ctx, gemm, ta, tb, m, n, k, 0.7f, da.get(), lda, db.get(), ldb, 0.3f, dc.get(), n));
      t->Accuracy(name, Dims({m, n, k}), "fp32", RelErr(dc.Down(), exact), kFp32Bound);
    });
    Guard(t, name + " bf16fast", [&] {  // cuBLASLt's FAST_16BF on fp32 pointers
      ExecContext ctx;
      ctx.precision = Precision::kBf16;
      dc.Up(c0);
      CK(kc::Gemm(ctx, gemm, ta, tb, m, n, k, 0.7f, da.get(), lda, db.get(), ldb, 0.3f, dc.get(), n));
      t->Accuracy(name, Dims({m, n, k}), "bf16fast", RelErr(dc.Down(), exact), 2 * emul_err);
    });
    Guard(t, name + " GemmBf16", [&] {  // ConvertToBf16 (RNE) then bf16 operands
      ExecContext ctx;
      Dev<__nv_bfloat16> ha(a.size()), hb(b.size());
      CK(kc::ConvertToBf16(ctx, da.get(), ha.get(), a.size()));
      CK(kc::ConvertToBf16(ctx, db.get(), hb.get(), b.size()));
      dc.Up(c0);
      CK(kc::GemmBf16(ctx, gemm, ta, tb, m, n, k, 0.7f, ha.get(), lda, hb.get(), ldb, 0.3f, dc.get(), n));
      t->Accuracy(name + " (GemmBf16)", Dims({m, n, k}), "bf16", RelErr(dc.Down(), exact), 2 * emul_err);
    });
  }
  // Strided batched, beta = 0 with NaN in C (must be ignored).
  const int64_t batch = 3, m2 = 64, n2 = 96, k2 = 128;
  auto a = Normal(rng, batch * m2 * k2), b = Normal(rng, batch * n2 * k2);
  std::vector<float> nan_c(batch * m2 * n2, NAN);
  Dev<float> da(a), db(b), dc(nan_c);
  ExecContext ctx;
  CK(kc::GemmStridedBatched(ctx, gemm, false, true, m2, n2, k2, 1.0f, da.get(), k2, m2 * k2,
                            db.get(), k2, n2 * k2, 0.0f, dc.get(), n2, m2 * n2, batch));
  const auto got = dc.Down();
  Vec exact;
  for (int64_t i = 0; i < batch; ++i) {
    Vec e = Gemm(false, true, m2, n2, k2, 1.0, a.data() + i * m2 * k2, k2,
                 b.data() + i * n2 * k2, k2, 0.0, nullptr, false);
    exact.insert(exact.end(), e.begin(), e.end());
  }
  t->Accuracy("GemmStridedBatched NT beta=0", Dims({batch, m2, n2, k2}), "fp32", RelErr(got, exact), kFp32Bound);
  // Views at odd element offsets (4-byte aligned): cuBLASLt must be told the alignment.
  Guard(t, "Gemm NN offset views", [&] {
    const int64_t m3 = 50, n3 = 70, k3 = 90, ld_a = k3 + 3, ld_b = n3 + 5, ld_c = n3 + 1;
    auto a3 = Normal(rng, m3 * ld_a + 1), b3 = Normal(rng, k3 * ld_b + 1);
    Dev<float> da3(a3), db3(b3), dc3(m3 * ld_c + 1);
    ExecContext ctx3;
    CK(kc::Gemm(ctx3, gemm, false, false, m3, n3, k3, 1.0f, da3.get() + 1, ld_a, db3.get() + 1, ld_b, 0.0f,
                dc3.get() + 1, ld_c));
    const auto c3 = dc3.Down();
    std::vector<float> got3(m3 * n3);
    for (int64_t i = 0; i < m3; ++i)
      for (int64_t j = 0; j < n3; ++j) got3[i * n3 + j] = c3[1 + i * ld_c + j];
    const Vec ref3 = Gemm(false, false, m3, n3, k3, 1.0, a3.data() + 1, ld_a, b3.data() + 1, ld_b, 0.0, nullptr, false);
    t->Accuracy("Gemm NN offset views (lda/ldb/ldc padded)", Dims({m3, n3, k3}), "fp32", RelErr(got3, ref3),
                kFp32Bound);
  });
}

void CheckElementwise(Table* t, std::mt19937_64& rng) {
  ExecContext ctx;
  const int64_t rows = 384, cols = 768, n = rows * cols;
  const std::string shape = Dims({rows, cols});
  auto x = Normal(rng, n, 1.5f), y = Normal(rng, n), bias = Normal(rng, cols);
  Dev<float> dx(x), dy(y), dbias(bias), dout(n);
  {  // AddBias
    Dev<float> d(y);
    CK(kc::AddBias(ctx, d.get(), dbias.get(), rows, cols));
    Vec ref(n);
    for (int64_t i = 0; i < n; ++i) ref[i] = static_cast<double>(y[i]) + bias[i % cols];
    t->Accuracy("AddBias", shape, "fp32", RelErr(d.Down(), ref), kFp32Bound);
  }
  {  // BiasGrad (accumulates onto bias)
    Dev<float> d(bias);
    CK(kc::BiasGrad(ctx, dy.get(), rows, cols, d.get()));
    Vec ref = ToDouble(bias);
    for (int64_t i = 0; i < n; ++i) ref[i % cols] += y[i];
    t->Accuracy("BiasGrad", shape, "fp32", RelErr(d.Down(), ref), kFp32Bound);
  }
  {  // Add, Scale
    CK(kc::Add(ctx, dx.get(), dy.get(), dout.get(), n));
    Vec ref(n);
    for (int64_t i = 0; i < n; ++i) ref[i] = static_cast<double>(x[i]) + y[i];
    t->Accuracy("Add", shape, "fp32", RelErr(dout.Down(), ref), kFp32Bound);
    Dev<float> d(x);
    CK(kc::Scale(ctx, d.get(), n, 0.37f));
    for (int64_t i = 0; i < n; ++i) ref[i] = static_cast<double>(x[i]) * 0.37f;
    t->Accuracy("Scale", shape, "fp32", RelErr(d.Down(), ref), kFp32Bound);
  }
  {  // SumSquares
    Dev<double> partials(kc::kSumSquaresPartials), out(1);
    CK(kc::SumSquares(ctx, dx.get(), n, partials.get(), out.get()));
    double ref = 0;
    for (float v : x) ref += static_cast<double>(v) * v;
    t->Accuracy("SumSquares", Dims({n}), "fp64acc", std::fabs(out.Down()[0] - ref) / ref, 1e-12);
  }
  struct Unary {
    const char* name;
    kc::CudaStatus (*fwd)(const ExecContext&, const float*, float*, int64_t);
    kc::CudaStatus (*bwd)(const ExecContext&, const float*, const float*, float*, int64_t);
    double (*f)(double);
    double (*df)(double);
  };
  const Unary unary[] = {{"Gelu", kc::GeluForward, kc::GeluBackward, Gelu, GeluGrad},
                         {"GeluTanh", kc::GeluTanhForward, kc::GeluTanhBackward, GeluTanh, GeluTanhGrad}};
  for (const Unary& u : unary) {
    CK(u.fwd(ctx, dx.get(), dout.get(), n));
    Vec ref(n), dref(n);
    for (int64_t i = 0; i < n; ++i) {
      ref[i] = u.f(x[i]);
      dref[i] = y[i] * u.df(x[i]);
    }
    t->Accuracy(std::string(u.name) + "Forward", shape, "fp32", RelErr(dout.Down(), ref), kFp32Bound);
    CK(u.bwd(ctx, dx.get(), dy.get(), dout.get(), n));
    t->Accuracy(std::string(u.name) + "Backward", shape, "fp32", RelErr(dout.Down(), dref), kFp32Bound);
  }
  {  // The element-wise kernels run kernels/element_math.h, as the CPU kernels do: same bits.
    namespace em = kernels::element_math;
    auto bits_bad = [&](const std::vector<float>& got, auto want) {
      int64_t bad = 0;
      for (int64_t i = 0; i < static_cast<int64_t>(got.size()); ++i) {
        const float w = want(i);
        bad += !(std::memcmp(&got[i], &w, 4) == 0 || (got[i] != got[i] && w != w));
      }
      return bad;
    };
    CK(kc::GeluForward(ctx, dx.get(), dout.get(), n));
    t->Exact("GeluForward == element_math", shape, "bits",
             bits_bad(dout.Down(), [&](int64_t i) { return em::GeluScalar(x[i]); }));
    CK(kc::GeluBackward(ctx, dx.get(), dy.get(), dout.get(), n));
    t->Exact("GeluBackward == element_math", shape, "bits",
             bits_bad(dout.Down(), [&](int64_t i) { return y[i] * em::GeluGradScalar(x[i]); }));
    CK(kc::GeluTanhForward(ctx, dx.get(), dout.get(), n));
    t->Exact("GeluTanhForward == element_math", shape, "bits",
             bits_bad(dout.Down(), [&](int64_t i) { return x[i] * em::TanhGeluScalar(x[i]).s; }));
    CK(kc::GeluTanhBackward(ctx, dx.get(), dy.get(), dout.get(), n));
    t->Exact("GeluTanhBackward == element_math", shape, "bits",
             bits_bad(dout.Down(), [&](int64_t i) { return y[i] * em::TanhGeluGradScalar(x[i]); }));
    const int64_t f = cols / 2;
    CK(kc::SwigluForward(ctx, dx.get(), dout.get(), rows, f));
    auto sw = dout.Down();
    sw.resize(rows * f);
    t->Exact("SwigluForward == element_math", Dims({rows, 2 * f}), "bits", bits_bad(sw, [&](int64_t i) {
               const int64_t r = i / f, c = i % f;
               return em::SwigluScalar(x[r * 2 * f + c], x[r * 2 * f + f + c]);
             }));
  }
  {  // SwiGLU: x [rows, 2f], f = cols / 2.
    const int64_t f = cols / 2;
    Dev<float> dyf(std::vector<float>(y.begin(), y.begin() + rows * f));
    CK(kc::SwigluForward(ctx, dx.get(), dout.get(), rows, f));
    auto yf = dout.Down();
    Vec ref(rows * f), dref(n);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < f; ++c) {
        const double g = x[r * 2 * f + c], up = x[r * 2 * f + f + c], s = Sigmoid(g);
        const double d = y[r * f + c];
        ref[r * f + c] = g * s * up;
        dref[r * 2 * f + c] = d * up * s * (1 + g * (1 - s));
        dref[r * 2 * f + f + c] = d * g * s;
      }
    }
    yf.resize(rows * f);
    t->Accuracy("SwigluForward", Dims({rows, 2 * f}), "fp32", RelErr(yf, ref), kFp32Bound);
    CK(kc::SwigluBackward(ctx, dx.get(), dyf.get(), dout.get(), rows, f));
    t->Accuracy("SwigluBackward", Dims({rows, 2 * f}), "fp32", RelErr(dout.Down(), dref), kFp32Bound);
  }
  {  // Dropout: the CPU backend's mask bit for bit, values exact (x * fp32 scale).
    const float p = 0.1f;
    const RngKey key{1234, kernels::MakeRngStream(3, 1, 7, 2)};
    const int64_t offset = 5000;
    CK(kc::DropoutForward(ctx, dx.get(), dout.get(), n, p, key, offset));
    auto got = dout.Down();
    const float s = 1.0f / (1.0f - p);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = DropKeep(key, offset + i, p) ? x[i] * s : 0.0f;
      bad += got[i] != want;
    }
    t->Exact("DropoutForward (p=0.1)", shape, "bits", bad);
    CK(kc::DropoutBackward(ctx, dy.get(), dout.get(), n, p, key, offset));
    got = dout.Down();
    bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = DropKeep(key, offset + i, p) ? y[i] * s : 0.0f;
      bad += got[i] != want;
    }
    t->Exact("DropoutBackward (p=0.1)", shape, "bits", bad);
    // The key read from device memory (what captured CUDA graphs use): the same mask.
    Dev<RngKey> dkey(std::vector<RngKey>{key});
    CK(kc::DropoutForward(ctx, dx.get(), dout.get(), n, p, dkey.get(), offset));
    got = dout.Down();
    bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = DropKeep(key, offset + i, p) ? x[i] * s : 0.0f;
      bad += got[i] != want;
    }
    t->Exact("DropoutForward (device key)", shape, "bits", bad);
  }
}

void CheckNorms(Table* t, std::mt19937_64& rng) {
  ExecContext ctx;
  const int64_t n = 256, h = 1024;
  const std::string shape = Dims({n, h});
  auto x = Normal(rng, n * h, 2.0f, 0.5f), dy = Normal(rng, n * h), gamma = Normal(rng, h, 0.5f, 1.0f),
       beta = Normal(rng, h), g0 = Normal(rng, h), b0 = Normal(rng, h);
  Dev<float> dx(x), ddy(dy), dgamma(gamma), dbeta(beta), dout(n * h), mean(n), rstd(n);
  for (int rms = 0; rms < 2; ++rms) {
    const std::string name = rms ? "RmsNorm" : "LayerNorm";
    if (rms) {
      CK(kc::RmsNormForward(ctx, dx.get(), dgamma.get(), 1e-5f, n, h, dout.get(), rstd.get()));
    } else {
      CK(kc::LayerNormForward(ctx, dx.get(), dgamma.get(), dbeta.get(), 1e-5f, n, h, dout.get(),
                              mean.get(), rstd.get()));
    }
    Vec y, mu, rs;
    NormForward(rms, x.data(), gamma.data(), beta.data(), 1e-5, n, h, &y, &mu, &rs);
    t->Accuracy(name + "Forward y", shape, "fp32", RelErr(dout.Down(), y), kFp32Bound);
    t->Accuracy(name + "Forward rstd", shape, "fp32", RelErr(rstd.Down(), rs), kFp32Bound);
    if (!rms) t->Accuracy(name + "Forward mean", shape, "fp32", RelErr(mean.Down(), mu), kFp32Bound);
    // Backward from the kernel's own fp32 stash (the reference reads the same floats).
    const auto mean_f = rms ? std::vector<float>(n, 0.0f) : mean.Down();
    const auto rstd_f = rstd.Down();
    Vec dxr, dg, db;
    NormBackward(rms, dy.data(), x.data(), gamma.data(), mean_f.data(), rstd_f.data(), n, h, &dxr, &dg, &db);
    Dev<float> acc_g(g0), acc_b(b0);
    if (rms) {
      CK(kc::RmsNormBackwardInput(ctx, ddy.get(), dx.get(), dgamma.get(), rstd.get(), n, h, dout.get()));
      CK(kc::RmsNormBackwardWeight(ctx, ddy.get(), dx.get(), rstd.get(), n, h, acc_g.get()));
    } else {
      CK(kc::LayerNormBackwardInput(ctx, ddy.get(), dx.get(), dgamma.get(), mean.get(), rstd.get(), n, h, dout.get()));
      CK(kc::LayerNormBackwardWeight(ctx, ddy.get(), dx.get(), mean.get(), rstd.get(), n, h, acc_g.get(), acc_b.get()));
    }
    t->Accuracy(name + "BackwardInput dx", shape, "fp32", RelErr(dout.Down(), dxr), kFp32Bound);
    for (int64_t c = 0; c < h; ++c) {
      dg[c] += g0[c];
      db[c] += b0[c];
    }
    t->Accuracy(name + "BackwardWeight dgamma", shape, "fp32", RelErr(acc_g.Down(), dg), kFp32Bound);
    if (!rms) t->Accuracy(name + "BackwardWeight dbeta", shape, "fp32", RelErr(acc_b.Down(), db), kFp32Bound);
  }
}

void CheckEmbedding(Table* t, std::mt19937_64& rng) {
  ExecContext ctx;
  const int64_t v = 1000, h = 512, n = 2048;
  auto table = Normal(rng, v * h), dout = Normal(rng, n * h), out0 = Normal(rng, n * h),
       dtable0 = Normal(rng, v * h);
  auto ids = Ints(rng, n, 0, static_cast<int32_t>(v - 1));
  for (int64_t i = 0; i < n; i += 7) ids[i] = 3;  // a hot row: many contributions
  Dev<int32_t> dids(ids);
  Dev<float> dtab(table), ddout(dout);
  for (int shard = 0; shard < 2; ++shard) {
    const int64_t start = shard ? 300 : 0, rows = shard ? 400 : v;
    const std::string name = shard ? "VocabShardEmbedding" : "Embedding";
    const std::string shape = Dims({n, v, h});
    for (int acc = 0; acc < 2; ++acc) {
      Dev<float> out(out0);
      if (shard) {
        CK(kc::VocabShardEmbeddingForward(ctx, dids.get(), n, dtab.get() + start * h, start, rows, h, out.get(), acc));
      } else {
        CK(kc::EmbeddingForward(ctx, dids.get(), n, dtab.get(), h, out.get(), acc));
      }
      Vec ref(n * h);
      for (int64_t i = 0; i < n; ++i) {
        const bool in = ids[i] >= start && ids[i] < start + rows;
        for (int64_t c = 0; c < h; ++c) {
          const double base = acc ? out0[i * h + c] : 0.0;
          ref[i * h + c] = base + (in ? table[ids[i] * h + c] : 0.0);
        }
      }
      t->Accuracy(name + "Forward" + (acc ? " (accumulate)" : ""), shape, "fp32", RelErr(out.Down(), ref), kFp32Bound);
    }
    Dev<float> dtab_acc(std::vector<float>(dtable0.begin() + start * h, dtable0.begin() + (start + rows) * h));
    if (shard) {
      CK(kc::VocabShardEmbeddingBackward(ctx, dids.get(), n, ddout.get(), start, rows, h, dtab_acc.get()));
    } else {
      CK(kc::EmbeddingBackward(ctx, dids.get(), n, ddout.get(), h, dtab_acc.get()));
    }
    Vec ref(dtable0.begin() + start * h, dtable0.begin() + (start + rows) * h);
    for (int64_t i = 0; i < n; ++i) {
      if (ids[i] < start || ids[i] >= start + rows) continue;
      for (int64_t c = 0; c < h; ++c) ref[(ids[i] - start) * h + c] += dout[i * h + c];
    }
    t->Accuracy(name + "Backward", shape, "fp32", RelErr(dtab_acc.Down(), ref), kFp32Bound);
  }
}

void CheckCrossEntropy(Table* t, std::mt19937_64& rng) {
  ExecContext ctx;
  const int64_t n = 256, v = 1000, vp = 1088;
  const std::string shape = Dims({n, vp}) + " V=" + std::to_string(v);
  auto logits = Normal(rng, n * vp, 3.0f), dloss = Normal(rng, n);
  auto targets = Ints(rng, n, 0, static_cast<int32_t>(v - 1));
  targets[5] = -1;                           // another shard's target
  targets[9] = static_cast<int32_t>(v + 3);  // a padding column: not in this shard
  Dev<float> dl(logits), ddloss(dloss), loss(n), lse(n), dlogits(n * vp);
  Dev<int32_t> dt(targets);
  CK(kc::CrossEntropyForward(ctx, dl.get(), dt.get(), n, vp, v, loss.get(), lse.get()));
  Vec rloss, rlse;
  CrossEntropyForward(logits.data(), targets.data(), n, vp, v, &rloss, &rlse);
  t->Accuracy("CrossEntropyForward loss", shape, "fp32", RelErr(loss.Down(), rloss), kFp32Bound);
  t->Accuracy("CrossEntropyForward lse", shape, "fp32", RelErr(lse.Down(), rlse), kFp32Bound);
  const auto lse_f = lse.Down();
  const Vec ref = CrossEntropyBackward(logits.data(), targets.data(), lse_f.data(), dloss.data(), n, vp, v);
  CK(kc::CrossEntropyBackward(ctx, dl.get(), dt.get(), lse.get(), ddloss.get(), n, vp, v, dlogits.get()));
  t->Accuracy("CrossEntropyBackward", shape, "fp32", RelErr(dlogits.Down(), ref), kFp32Bound);
  CK(kc::CrossEntropyBackward(ctx, dl.get(), dt.get(), lse.get(), ddloss.get(), n, vp, v, dl.get()));
  t->Accuracy("CrossEntropyBackward (in place)", shape, "fp32", RelErr(dl.Down(), ref), kFp32Bound);
}

void CheckRope(Table* t, std::mt19937_64& rng) {
  ExecContext ctx;
  const int64_t b = 2, s = 300, heads = 4, d = 128, rotary = 64;
  std::vector<int32_t> pos(b * s);
  for (int64_t i = 0; i < b * s; ++i) pos[i] = static_cast<int32_t>(i % s < 170 ? i % s : i % s - 170);
  auto x = Normal(rng, b * heads * s * d);
  Dev<int32_t> dpos(pos);
  for (int dir = 0; dir < 2; ++dir) {
    Dev<float> dx(x);
    if (dir == 0) {
      CK(kc::RopeForward(ctx, dx.get(), dpos.get(), b, s, heads, d, rotary, 10000.0f));
    } else {
      CK(kc::RopeBackward(ctx, dx.get(), dpos.get(), b, s, heads, d, rotary, 10000.0f));
    }
    const Vec ref = Rope(x.data(), pos.data(), b, s, heads, d, rotary, 10000.0f, dir == 0 ? 1.0 : -1.0);
    t->Accuracy(dir == 0 ? "RopeForward (rotary 64 of 128)" : "RopeBackward (rotary 64 of 128)",
                Dims({b, heads, s, d}), "fp32", RelErr(dx.Down(), ref), kFp32Bound);
  }
}

void CheckAdamW(Table* t, std::mt19937_64& rng) {
  ExecContext ctx;
  const int64_t n = 1 << 16;
  const float lr = 3e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
  auto p0 = Normal(rng, n, 0.02f);
  Dev<float> p(p0), m(std::vector<float>(n, 0.0f)), v(std::vector<float>(n, 0.0f));
  Vec rp = ToDouble(p0), rm(n, 0), rv(n, 0);
  std::vector<float> cp = p0, cm(n, 0.0f), cv(n, 0.0f);  // the CPU backend's fp32 order
  for (int64_t step = 1; step <= 5; ++step) {
    auto g = Normal(rng, n, 0.01f);
    Dev<float> dg(g);
    CK(kc::AdamWStep(ctx, p.get(), dg.get(), m.get(), v.get(), n, lr, b1, b2, eps, wd, step));
    AdamW(&rp, g.data(), &rm, &rv, lr, b1, b2, eps, wd, step);
    const double lr_d = lr;
    const float decay = static_cast<float>(1.0 - lr_d * static_cast<double>(wd));
    const float omb1 = static_cast<float>(1.0 - static_cast<double>(b1));
    const float omb2 = static_cast<float>(1.0 - static_cast<double>(b2));
    const double bc1 = 1.0 - std::pow(static_cast<double>(b1), static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(static_cast<double>(b2), static_cast<double>(step));
    const float neg_ss = static_cast<float>(-(lr_d / bc1));
    const float bc2s = static_cast<float>(std::sqrt(bc2));
    for (int64_t i = 0; i < n; ++i) {
      float pp = cp[i] * decay;
      const float mm = cm[i] * b1 + omb1 * g[i];
      const float vv = cv[i] * b2 + omb2 * g[i] * g[i];
      const float denom = std::sqrt(vv) / bc2s + eps;
      cp[i] = pp + neg_ss * mm / denom;
      cm[i] = mm;
      cv[i] = vv;
    }
  }
  const auto gp = p.Down();
  // Compare the parameter change (p - p0), the part AdamW computes.
  std::vector<double> dgpu(n);
  Vec dref(n);
  for (int64_t i = 0; i < n; ++i) {
    dgpu[i] = static_cast<double>(gp[i]) - p0[i];
    dref[i] = rp[i] - p0[i];
  }
  t->Accuracy("AdamWStep x5 (param change)", Dims({n}), "fp32", RelErr(dgpu, dref), kFp32Bound);
  t->Accuracy("AdamWStep x5 exp_avg_sq", Dims({n}), "fp32", RelErr(v.Down(), rv), kFp32Bound);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += gp[i] != cp[i];
  t->Exact("AdamWStep x5 vs CPU fp32 order", Dims({n}), "bits", bad);
}

void CheckAttention(Table* t, kc::GemmHandle& gemm, std::mt19937_64& rng) {
  const AttnShape rs{2, 96, 4, 2, 32};
  const kc::AttentionShape sh{rs.b, rs.s, rs.heads, rs.groups, rs.d};
  const int64_t S = rs.s, D = rs.d, nq = rs.b * rs.heads * S * D, nkv = rs.b * rs.groups * S * D;
  const int64_t np = rs.b * rs.heads * S * S;
  auto q = Normal(rng, nq), k = Normal(rng, nkv), v = Normal(rng, nkv), dout = Normal(rng, nq);
  std::vector<int32_t> doc(rs.b * S);
  for (int64_t b = 0; b < rs.b; ++b) {
    for (int64_t i = 0; i < S; ++i) doc[b * S + i] = b == 0 ? 0 : (i < 40 ? 0 : (i < 70 ? 40 : 70));
  }
  Dev<float> dq(q), dk(k), dv(v), ddout(dout), probs(np), o(nq), scratch(np), gq(nq), gk(nkv), gv(nkv);
  Dev<int32_t> ddoc(doc);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const std::string shape = Dims({rs.b, rs.heads, rs.groups, S, D});
  for (int cfg = 0; cfg < 3; ++cfg) Guard(t, "Attention config " + std::to_string(cfg), [&] {
    const bool bf16 = cfg == 2;
    const float p = cfg == 0 ? 0.0f : 0.1f;
    const RngKey key{99, kernels::MakeRngStream(1, 2, 3, 4)};
    ExecContext ctx;
    ctx.precision = bf16 ? Precision::kBf16 : Precision::kFp32;
    const std::string path = bf16 ? "bf16fast" : "fp32";
    const std::string tag = std::string(p > 0 ? " drop=0.1" : "") + (cfg == 1 ? " docs" : "");
    const int32_t* docp = cfg == 1 ? ddoc.get() : nullptr;
    const int32_t* hdoc = cfg == 1 ? doc.data() : nullptr;
    CK(kc::AttentionForward(ctx, gemm, sh, dq.get(), dk.get(), dv.get(), docp, static_cast<float>(scale), p, key,
                            probs.get(), o.get(), scratch.get()));
    Vec rp, ro, ep, eo;
    AttentionForward(rs, q.data(), k.data(), v.data(), hdoc, scale, p, key, false, &rp, &ro);
    const auto gprobs = probs.Down();
    if (!bf16) {
      t->Accuracy("AttentionForward probs" + tag, shape, path, RelErr(gprobs, rp), kFp32Bound);
      t->Accuracy("AttentionForward o" + tag, shape, path, RelErr(o.Down(), ro), kFp32Bound);
    } else {
      AttentionForward(rs, q.data(), k.data(), v.data(), hdoc, scale, p, key, true, &ep, &eo);
      t->Accuracy("AttentionForward probs" + tag, shape, path, RelErr(gprobs, rp), 2 * RelErr(ep, rp));
      t->Accuracy("AttentionForward o" + tag, shape, path, RelErr(o.Down(), ro), 2 * RelErr(eo, ro));
    }
    // Backward from the kernel's probs (the reference reads the same floats).
    CK(kc::AttentionBackward(ctx, gemm, sh, dq.get(), dk.get(), dv.get(), probs.get(), docp, static_cast<float>(scale),
                             p, key, ddout.get(), gq.get(), gk.get(), gv.get(), scratch.get()));
    Vec rdq, rdk, rdv, edq, edk, edv;
    AttentionBackward(rs, q.data(), k.data(), v.data(), gprobs.data(), hdoc, scale, p, key, dout.data(), false, &rdq, &rdk, &rdv);
    double bq = kFp32Bound, bk = kFp32Bound, bv = kFp32Bound;
    if (bf16) {
      AttentionBackward(rs, q.data(), k.data(), v.data(), gprobs.data(), hdoc, scale, p, key, dout.data(), true, &edq, &edk, &edv);
      bq = 2 * RelErr(edq, rdq);
      bk = 2 * RelErr(edk, rdk);
      bv = 2 * RelErr(edv, rdv);
    }
    t->Accuracy("AttentionBackward dq" + tag, shape, path, RelErr(gq.Down(), rdq), bq);
    t->Accuracy("AttentionBackward dk" + tag, shape, path, RelErr(gk.Down(), rdk), bk);
    t->Accuracy("AttentionBackward dv" + tag, shape, path, RelErr(gv.Down(), rdv), bv);
  });
  // Layout kernels: exact permutations.
  ExecContext ctx;
  const int64_t hpg = rs.heads / rs.groups, width = rs.groups * (hpg + 2) * D;
  auto qkv = Normal(rng, rs.b * S * width);
  Dev<float> dqkv(qkv), back(qkv.size());
  CK(kc::SplitQkv(ctx, sh, dqkv.get(), dq.get(), dk.get(), dv.get()));
  const auto sq = dq.Down(), sk = dk.Down(), sv = dv.Down();
  int64_t bad = 0;
  for (int64_t b = 0; b < rs.b; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t g = 0; g < rs.groups; ++g)
        for (int64_t j = 0; j < hpg + 2; ++j)
          for (int64_t e = 0; e < D; ++e) {
            const float want = qkv[(b * S + s) * width + (g * (hpg + 2) + j) * D + e];
            const float got = j < hpg ? sq[((b * rs.heads + g * hpg + j) * S + s) * D + e]
                                      : (j == hpg ? sk : sv)[((b * rs.groups + g) * S + s) * D + e];
            bad += got != want;
          }
  t->Exact("SplitQkv", shape, "bits", bad);
  CK(kc::MergeQkvGrad(ctx, sh, dq.get(), dk.get(), dv.get(), back.get()));
  const auto merged = back.Down();
  bad = 0;
  for (size_t i = 0; i < qkv.size(); ++i) bad += merged[i] != qkv[i];
  t->Exact("MergeQkvGrad (inverse of SplitQkv)", shape, "bits", bad);
  Dev<float> tok(nq), heads(nq);
  CK(kc::HeadsToTokens(ctx, sh, dq.get(), tok.get()));
  const auto tk = tok.Down();
  bad = 0;
  for (int64_t b = 0; b < rs.b; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < rs.heads; ++h)
        for (int64_t e = 0; e < D; ++e)
          bad += tk[((b * S + s) * rs.heads + h) * D + e] != sq[((b * rs.heads + h) * S + s) * D + e];
  t->Exact("HeadsToTokens", shape, "bits", bad);
  CK(kc::TokensToHeads(ctx, sh, tok.get(), heads.get()));
  const auto hd = heads.Down();
  bad = 0;
  for (int64_t i = 0; i < nq; ++i) bad += hd[i] != sq[i];
  t->Exact("TokensToHeads (inverse)", shape, "bits", bad);
}

// The fused (online-softmax) attention: fp32 only; S = 150 has a partial 64-row tile.
void CheckFusedAttention(Table* t, std::mt19937_64& rng) {
  for (int64_t d : {64, 128}) {
    const AttnShape rs{2, 150, 4, 2, d};
    const kc::AttentionShape sh{rs.b, rs.s, rs.heads, rs.groups, rs.d};
    const int64_t S = rs.s, nq = rs.b * rs.heads * S * d, nkv = rs.b * rs.groups * S * d;
    auto q = Normal(rng, nq), k = Normal(rng, nkv), v = Normal(rng, nkv), dout = Normal(rng, nq);
    std::vector<int32_t> doc(rs.b * S);
    for (int64_t i = 0; i < rs.b * S; ++i) doc[i] = (i % S) < 64 ? 0 : ((i % S) < 100 ? 64 : 100);
    Dev<float> dq(q), dk(k), dv(v), ddout(dout), o(nq), lse(rs.b * rs.heads * S), gq(nq), gk(nkv), gv(nkv),
        delta(rs.b * rs.heads * S);
    Dev<int32_t> ddoc(doc);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    const std::string shape = Dims({rs.b, rs.heads, rs.groups, S, d});
    for (int cfg = 0; cfg < 2; ++cfg) {
      const float p = cfg ? 0.1f : 0.0f;
      const RngKey key{17, kernels::MakeRngStream(4, 3, 2, 1)};
      const std::string tag = cfg ? " drop=0.1 docs" : "";
      ExecContext ctx;
      CK(kc::FusedAttentionForward(ctx, sh, dq.get(), dk.get(), dv.get(), cfg ? ddoc.get() : nullptr,
                                   static_cast<float>(scale), p, key, o.get(), lse.get()));
      Vec rp, ro, rl;
      AttentionForward(rs, q.data(), k.data(), v.data(), cfg ? doc.data() : nullptr, scale, p, key, false, &rp, &ro, &rl);
      t->Accuracy("FusedAttentionForward o" + tag, shape, "fp32", RelErr(o.Down(), ro), kFp32Bound);
      t->Accuracy("FusedAttentionForward lse" + tag, shape, "fp32", RelErr(lse.Down(), rl), kFp32Bound);
      CK(kc::FusedAttentionBackward(ctx, sh, dq.get(), dk.get(), dv.get(), o.get(), lse.get(),
                                    cfg ? ddoc.get() : nullptr, static_cast<float>(scale), p, key, ddout.get(),
                                    gq.get(), gk.get(), gv.get(), delta.get()));
      const std::vector<float> pf(rp.begin(), rp.end());
      Vec rdq, rdk, rdv;
      AttentionBackward(rs, q.data(), k.data(), v.data(), pf.data(), cfg ? doc.data() : nullptr, scale, p, key,
                        dout.data(), false, &rdq, &rdk, &rdv);
      t->Accuracy("FusedAttentionBackward dq" + tag, shape, "fp32", RelErr(gq.Down(), rdq), kFp32Bound);
      t->Accuracy("FusedAttentionBackward dk" + tag, shape, "fp32", RelErr(gk.Down(), rdk), kFp32Bound);
      t->Accuracy("FusedAttentionBackward dv" + tag, shape, "fp32", RelErr(gv.Down(), rdv), kFp32Bound);
    }
  }
}

// docs/ARCHITECTURE.md "Kernel calls only enqueue": a training-step-like sequence captured into a
// CUDA graph (strict global capture mode: any synchronising or allocating call inside
// fails the capture) and replayed must give the eager run's bits (which also checks
// run-to-run determinism).
void CheckGraphCapture(Table* t, kc::GemmHandle& gemm, std::mt19937_64& rng) {
  const int64_t n = 256, h = 512, f = 1024, v = 1000;
  const kc::AttentionShape sh{2, 128, 4, 2, 64};
  const int64_t nq = 2 * 4 * 128 * 64, nkv = 2 * 2 * 128 * 64, np = 2 * 4 * 128 * 128;
  Dev<float> x(Normal(rng, n * h)), gamma(Normal(rng, h, 0.2f, 1.0f)), beta(Normal(rng, h)), y(n * h), mean(n),
      rstd(n), w(Normal(rng, h * f, 0.05f)), z(n * f), g(n * f), loss(n), lse(n), q(Normal(rng, nq)),
      k(Normal(rng, nkv)), vv(Normal(rng, nkv)), o1(nq), lse1(2 * 4 * 128), probs(np), o2(nq), scratch(np);
  Dev<int32_t> targets(Ints(rng, n, 0, static_cast<int32_t>(v - 1)));
  Dev<double> partials(kc::kSumSquaresPartials), ss(1);
  cudaStream_t stream;
  CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ExecContext ctx;
  ctx.stream = stream;
  const kernels::RngKey key{5, 6};
  auto step = [&] {
    CK(kc::LayerNormForward(ctx, x.get(), gamma.get(), beta.get(), 1e-5f, n, h, y.get(), mean.get(), rstd.get()));
    CK(kc::Gemm(ctx, gemm, false, false, n, f, h, 1.0f, y.get(), h, w.get(), f, 0.0f, z.get(), f));
    CK(kc::GeluForward(ctx, z.get(), g.get(), n * f));
    CK(kc::DropoutForward(ctx, g.get(), g.get(), n * f, 0.1f, key, 0));
    CK(kc::CrossEntropyForward(ctx, g.get(), targets.get(), n, f, v, loss.get(), lse.get()));
    CK(kc::SumSquares(ctx, g.get(), n * f, partials.get(), ss.get()));
    CK(kc::FusedAttentionForward(ctx, sh, q.get(), k.get(), vv.get(), nullptr, 0.125f, 0.1f, key, o1.get(), lse1.get()));
    CK(kc::AttentionForward(ctx, gemm, sh, q.get(), k.get(), vv.get(), nullptr, 0.125f, 0.1f, key, probs.get(),
                            o2.get(), scratch.get()));
  };
  auto snapshot = [&] {
    std::vector<float> all;
    for (const Dev<float>* d : {&y, &z, &g, &loss, &lse, &o1, &lse1, &o2}) {
      const auto h_ = d->Down();
      all.insert(all.end(), h_.begin(), h_.end());
    }
    const double s2 = ss.Down()[0];
    all.push_back(static_cast<float>(s2));
    return all;
  };
  auto clear = [&] {
    for (const Dev<float>* d : {&y, &z, &g, &loss, &lse, &o1, &lse1, &o2}) {
      CU(cudaMemset(d->get(), 0, d->size() * sizeof(float)));
    }
    CU(cudaMemset(ss.get(), 0, sizeof(double)));
    CU(cudaDeviceSynchronize());  // the non-blocking stream does not wait for these
  };
  step();
  CU(cudaStreamSynchronize(stream));
  const auto eager = snapshot();
  clear();
  step();
  CU(cudaStreamSynchronize(stream));
  const auto again = snapshot();
  int64_t bad = 0;
  for (size_t i = 0; i < eager.size(); ++i) bad += std::memcmp(&eager[i], &again[i], sizeof(float)) != 0;
  t->Exact("eager run twice: same bits", "LN+Gemm+Gelu+Drop+CE+SS+attn", "bits", bad);
  clear();
  cudaGraph_t graph = nullptr;
  CU(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  try {
    step();
  } catch (const CheckError&) {
    cudaStreamEndCapture(stream, &graph);
    throw;
  }
  CU(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  CU(cudaGraphInstantiate(&exec, graph, 0));
  CU(cudaGraphLaunch(exec, stream));
  CU(cudaStreamSynchronize(stream));
  const auto replay = snapshot();
  bad = 0;
  for (size_t i = 0; i < eager.size(); ++i) bad += std::memcmp(&eager[i], &replay[i], sizeof(float)) != 0;
  t->Exact("CUDA graph capture + replay == eager", "LN+Gemm+Gelu+Drop+CE+SS+attn", "bits", bad);
  CU(cudaGraphExecDestroy(exec));
  CU(cudaGraphDestroy(graph));
  CU(cudaStreamDestroy(stream));
}

}  // namespace

void RunNumericChecks(Table* table) {
  std::mt19937_64 rng(20261130);
  std::unique_ptr<kc::GemmHandle> gemm;
  try {
    CK(kc::GemmHandle::Create(32 << 20, &gemm));
  } catch (const CheckError& e) {
    table->Error("GemmHandle::Create", e.what());
    return;
  }
  // Each group runs on its own; a failed call ends only its group (a FAIL row).
  auto group = [&](const char* name, auto&& f) {
    ClearStaleError();
    try {
      f();
    } catch (const std::exception& e) {  // CheckError, or std::bad_alloc and the like
      ClearStaleError();
      table->Error(name, e.what());
    }
  };
  group("Gemm", [&] { CheckGemm(table, *gemm, rng); });
  group("elementwise", [&] { CheckElementwise(table, rng); });
  group("norms", [&] { CheckNorms(table, rng); });
  group("embedding", [&] { CheckEmbedding(table, rng); });
  group("cross-entropy", [&] { CheckCrossEntropy(table, rng); });
  group("AdamW", [&] { CheckAdamW(table, rng); });
  group("RoPE", [&] { CheckRope(table, rng); });
  group("attention", [&] { CheckAttention(table, *gemm, rng); });
  group("graph capture", [&] { CheckGraphCapture(table, *gemm, rng); });
  // Last: a fault in the newest kernel cannot hide the results above.
  group("fused attention", [&] { CheckFusedAttention(table, rng); });
}

}  // namespace mxmaca::gpu_check
