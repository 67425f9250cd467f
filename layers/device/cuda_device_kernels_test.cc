// layers/device/cuda_device_kernels_test.cc: CudaDeviceKernels against CpuDeviceKernels
// through the DeviceKernels interface, on fresh seeded random inputs.
//
// Without a GPU (or without CUDA in the build) the comparisons are skipped after checking
// that Create explains why ("no GPU: cudaGetDeviceCount returned ...", or kUnimplemented
// "built without CUDA"), and the skip reason is printed so a passing run says it checked
// nothing. Tolerances (norm-wise relative, ||gpu - cpu|| / ||cpu||), as kernels/cuda's
// own tests and tests/gpu:
//   1e-5 for fp32 paths: both sides evaluate the same formulas in fp32 and differ only in
//        reduction order and few-ulp math functions (~1e-7 per element);
//   5e-3 for the bf16 Gemm and 2e-3 for bf16 attention: the operands are rounded to bf16
//        (2^-9 relative) and cuBLASLt's down-conversion may truncate rather than round;
//   1e-6 for RoPE (cos/sin tables agree to an ulp);
//   exact where the arithmetic is the same per element in the same order: AddBias, Add,
//        Scale, dropout masks, layout changes, embedding (token-order accumulation) and
//        AdamW (built with -fmad=false on the GPU).
#include "layers/device/cuda_device_kernels.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/philox.h"
#include "layers/device/cpu_device_kernels.h"

namespace mxmaca::layers::device {
namespace {

using kernels::Precision;
using kernels::RngKey;

#define REQUIRE_OK(expr)                   \
  do {                                     \
    const absl::Status req_ok_s_ = (expr); \
    INFO(req_ok_s_.ToString());            \
    REQUIRE(req_ok_s_.ok());               \
  } while (0)

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

double RelErr(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// GpuOrSkip: a CUDA instance (device 0, its own stream), or nullptr after checking and
// printing why there is none.
std::unique_ptr<CudaDeviceKernels> GpuOrSkip(Precision precision) {
  auto created = CudaDeviceKernels::Create(0, nullptr, precision);
  if (created.ok()) return std::move(*created);
  const absl::Status& s = created.status();
#ifdef MXMACA_HAS_CUDA
  // A machine without a GPU: ProbeDevice's reason.
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(s.message().find("no GPU: cudaGetDeviceCount") != std::string::npos);
#else
  CHECK(s.code() == absl::StatusCode::kUnimplemented);
  CHECK(s.message().find("built without CUDA") != std::string::npos);
#endif
  std::printf("SKIPPED (%s): %s\n", Catch::getResultCapture().getCurrentTestName().c_str(),
              std::string(s.message()).c_str());
  WARN("SKIPPED: " << s.message());
  return nullptr;
}

// Both: the two backends side by side. Up() puts a host vector on the GPU (freed at the
// end); Down() copies a GPU buffer back after synchronising.
class Both {
 public:
  Both(std::unique_ptr<CudaDeviceKernels> gpu, Precision precision)
      : gpu_(std::move(gpu)), cpu_(Context(precision)) {}
  ~Both() {
    for (void* p : buffers_) gpu_->Free(p);
  }
  CudaDeviceKernels& gpu() { return *gpu_; }
  CpuDeviceKernels& cpu() { return cpu_; }

  template <typename T>
  T* Up(const std::vector<T>& host) {
    auto p = gpu_->Allocate(static_cast<int64_t>(host.size() * sizeof(T)) + 1);
    REQUIRE(p.ok());
    buffers_.push_back(*p);
    REQUIRE_OK(gpu_->CopyToDevice(*p, host.data(), host.size() * sizeof(T)));
    return static_cast<T*>(*p);
  }
  template <typename T>
  T* Zeros(int64_t n) {
    return Up(std::vector<T>(n));
  }
  template <typename T>
  std::vector<T> Down(const T* device, int64_t n) {
    std::vector<T> host(n);
    REQUIRE_OK(gpu_->CopyToHost(host.data(), device, n * sizeof(T)));
    REQUIRE_OK(gpu_->Synchronize());
    return host;
  }

 private:
  static kernels::ExecContext Context(Precision precision) {
    kernels::ExecContext ctx;
    ctx.num_threads = 2;
    ctx.precision = precision;
    return ctx;
  }
  std::unique_ptr<CudaDeviceKernels> gpu_;
  CpuDeviceKernels cpu_;
  std::vector<void*> buffers_;
};

TEST_CASE("CUDA instance: memory round trip, Zero, out-of-memory message") {
  auto gpu = GpuOrSkip(Precision::kFp32);
  if (!gpu) return;
  CHECK(gpu->name() == "cuda");
  CHECK(gpu->has_fused_attention(64));
  CHECK_FALSE(gpu->has_fused_attention(48));
  CHECK(gpu->stream() != nullptr);
  Both k(std::move(gpu), Precision::kFp32);
  const auto x = Random(5000, 1);
  float* a = k.Up(x);
  float* b = k.Zeros<float>(5000);
  REQUIRE_OK(k.gpu().CopyDeviceToDevice(b, a, 5000 * sizeof(float)));
  CHECK(k.Down(b, 5000) == x);
  REQUIRE_OK(k.gpu().Zero(b + 1000, 2000 * sizeof(float)));
  auto want = x;
  std::fill(want.begin() + 1000, want.begin() + 3000, 0.0f);
  CHECK(k.Down(b, 5000) == want);
  // 1 PiB: no device has it. The error names the size; later calls still work.
  const auto huge = k.gpu().Allocate(int64_t{1} << 50);
  CHECK(huge.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(huge.status().message().find("1125899906842624 bytes") != std::string::npos);
  CHECK(huge.status().message().find("bytes free of") != std::string::npos);
  REQUIRE_OK(k.gpu().Scale(a, 5000, 2.0f));
  auto doubled = x;
  for (float& v : doubled) v *= 2.0f;
  CHECK(k.Down(a, 5000) == doubled);
}

TEST_CASE("CUDA Gemm matches the CPU backend (fp32 and bf16, all transposes)") {
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    auto gpu = GpuOrSkip(precision);
    if (!gpu) return;
    Both k(std::move(gpu), precision);
    const int64_t m = 67, n = 45, kk = 130;
    for (int tr = 0; tr < 4; ++tr) {
      const bool ta = tr & 1, tb = tr & 2;
      const int64_t lda = (ta ? m : kk) + 3, ldb = (tb ? kk : n) + 1, ldc = n + 2;
      const auto a = Random((ta ? kk : m) * lda, 10 + tr), b = Random((tb ? n : kk) * ldb, 20 + tr);
      const auto c0 = Random(m * ldc, 30 + tr);
      auto want = c0;
      REQUIRE_OK(k.cpu().Gemm(ta, tb, m, n, kk, 0.5f, a.data(), lda, b.data(), ldb, 0.25f,
                              want.data(), ldc));
      float* c = k.Up(c0);
      REQUIRE_OK(k.gpu().Gemm(ta, tb, m, n, kk, 0.5f, k.Up(a), lda, k.Up(b), ldb, 0.25f, c, ldc));
      CHECK(RelErr(k.Down(c, m * ldc), want) < (precision == Precision::kBf16 ? 5e-3 : 1e-5));
    }
  }
}

TEST_CASE("CUDA elementwise calls match the CPU backend") {
  auto gpu = GpuOrSkip(Precision::kFp32);
  if (!gpu) return;
  Both k(std::move(gpu), Precision::kFp32);
  const int64_t rows = 67, cols = 130, n = rows * cols, f = cols / 2;
  const auto x = Random(n, 1, -3.0f, 3.0f), dy = Random(n, 2), bias = Random(cols, 3);
  const float* gx = k.Up(x);
  const float* gdy = k.Up(dy);
  float* out = k.Zeros<float>(n);
  std::vector<float> want(n);

  auto y = x;
  REQUIRE_OK(k.cpu().AddBias(y.data(), bias.data(), rows, cols));
  float* gy = k.Up(x);
  REQUIRE_OK(k.gpu().AddBias(gy, k.Up(bias), rows, cols));
  CHECK(k.Down(gy, n) == y);
  REQUIRE_OK(k.cpu().Add(x.data(), dy.data(), want.data(), n));
  REQUIRE_OK(k.gpu().Add(gx, gdy, out, n));
  CHECK(k.Down(out, n) == want);

  // BiasGrad overwrites: the GPU's dbias starts with stale values.
  std::vector<float> db(cols);
  REQUIRE_OK(k.cpu().BiasGrad(dy.data(), rows, cols, db.data()));
  float* gdb = k.Up(Random(cols, 4));
  REQUIRE_OK(k.gpu().BiasGrad(gdy, rows, cols, gdb));
  CHECK(RelErr(k.Down(gdb, cols), db) < 1e-5);

  double ss = 0;
  REQUIRE_OK(k.cpu().SumSquares(x.data(), n, &ss));
  double* gss = k.Zeros<double>(1);
  REQUIRE_OK(k.gpu().SumSquares(gx, n, gss));
  CHECK(std::fabs(k.Down(gss, 1)[0] - ss) <= 1e-12 * ss);  // fp64 sums, different order

  REQUIRE_OK(k.cpu().GeluForward(x.data(), want.data(), n));
  REQUIRE_OK(k.gpu().GeluForward(gx, out, n));
  CHECK(RelErr(k.Down(out, n), want) < 1e-5);
  REQUIRE_OK(k.cpu().GeluBackward(x.data(), dy.data(), want.data(), n));
  REQUIRE_OK(k.gpu().GeluBackward(gx, gdy, out, n));
  CHECK(RelErr(k.Down(out, n), want) < 1e-5);
  REQUIRE_OK(k.cpu().GeluTanhForward(x.data(), want.data(), n));
  REQUIRE_OK(k.gpu().GeluTanhForward(gx, out, n));
  CHECK(RelErr(k.Down(out, n), want) < 1e-5);
  REQUIRE_OK(k.cpu().GeluTanhBackward(x.data(), dy.data(), want.data(), n));
  REQUIRE_OK(k.gpu().GeluTanhBackward(gx, gdy, out, n));
  CHECK(RelErr(k.Down(out, n), want) < 1e-5);

  std::vector<float> sw(rows * f);
  REQUIRE_OK(k.cpu().SwigluForward(x.data(), sw.data(), rows, f));
  REQUIRE_OK(k.gpu().SwigluForward(gx, out, rows, f));
  CHECK(RelErr(k.Down(out, rows * f), sw) < 1e-5);
  REQUIRE_OK(k.cpu().SwigluBackward(x.data(), dy.data(), want.data(), rows, f));
  REQUIRE_OK(k.gpu().SwigluBackward(gx, gdy, out, rows, f));
  CHECK(RelErr(k.Down(out, n), want) < 1e-5);

  const RngKey key{42, kernels::MakeRngStream(1, 0, 3, 2)};
  const RngKey* gkey = k.Up(std::vector<RngKey>{key});  // the GPU reads keys from device memory
  REQUIRE_OK(k.cpu().DropoutForward(x.data(), want.data(), n, 0.3f, &key, 12345));
  REQUIRE_OK(k.gpu().DropoutForward(gx, out, n, 0.3f, gkey, 12345));
  CHECK(k.Down(out, n) == want);
  REQUIRE_OK(k.cpu().DropoutBackward(dy.data(), want.data(), n, 0.3f, &key, 12345));
  REQUIRE_OK(k.gpu().DropoutBackward(gdy, out, n, 0.3f, gkey, 12345));
  CHECK(k.Down(out, n) == want);
}

TEST_CASE("CUDA norms, embedding and cross-entropy match the CPU backend") {
  auto gpu = GpuOrSkip(Precision::kFp32);
  if (!gpu) return;
  Both k(std::move(gpu), Precision::kFp32);
  const int64_t n = 37, h = 200;
  const auto x = Random(n * h, 1, -2.0f, 3.0f), dy = Random(n * h, 2);
  const auto gamma = Random(h, 3, 0.5f, 1.5f), beta = Random(h, 4);
  const auto dg0 = Random(h, 5), db0 = Random(h, 6);
  const float* gx = k.Up(x);
  const float* gdy = k.Up(dy);
  const float* ggamma = k.Up(gamma);
  std::vector<float> y(n * h), mean(n), rstd(n), dx(n * h);
  float* gyo = k.Zeros<float>(n * h);
  float* gmean = k.Zeros<float>(n);
  float* grstd = k.Zeros<float>(n);
  REQUIRE_OK(k.cpu().LayerNormForward(x.data(), gamma.data(), beta.data(), 1e-5f, n, h, y.data(),
                                      mean.data(), rstd.data()));
  REQUIRE_OK(k.gpu().LayerNormForward(gx, ggamma, k.Up(beta), 1e-5f, n, h, gyo, gmean, grstd));
  CHECK(RelErr(k.Down(gyo, n * h), y) < 1e-5);
  CHECK(RelErr(k.Down(gmean, n), mean) < 1e-5);
  CHECK(RelErr(k.Down(grstd, n), rstd) < 1e-5);
  // Backward calls read the CPU's statistics on both sides (isolates each call).
  const float* cmean = k.Up(mean);
  const float* crstd = k.Up(rstd);
  REQUIRE_OK(k.cpu().LayerNormBackwardInput(dy.data(), x.data(), gamma.data(), mean.data(),
                                            rstd.data(), n, h, dx.data()));
  REQUIRE_OK(k.gpu().LayerNormBackwardInput(gdy, gx, ggamma, cmean, crstd, n, h, gyo));
  CHECK(RelErr(k.Down(gyo, n * h), dx) < 1e-5);
  auto dg = dg0, db = db0;
  float* gdg = k.Up(dg0);
  float* gdb = k.Up(db0);
  REQUIRE_OK(k.cpu().LayerNormBackwardWeight(dy.data(), x.data(), mean.data(), rstd.data(), n, h,
                                             dg.data(), db.data()));
  REQUIRE_OK(k.gpu().LayerNormBackwardWeight(gdy, gx, cmean, crstd, n, h, gdg, gdb));
  CHECK(RelErr(k.Down(gdg, h), dg) < 1e-5);
  CHECK(RelErr(k.Down(gdb, h), db) < 1e-5);

  REQUIRE_OK(k.cpu().RmsNormForward(x.data(), gamma.data(), 1e-6f, n, h, y.data(), rstd.data()));
  REQUIRE_OK(k.gpu().RmsNormForward(gx, ggamma, 1e-6f, n, h, gyo, grstd));
  CHECK(RelErr(k.Down(gyo, n * h), y) < 1e-5);
  CHECK(RelErr(k.Down(grstd, n), rstd) < 1e-5);
  const float* crms = k.Up(rstd);
  REQUIRE_OK(k.cpu().RmsNormBackwardInput(dy.data(), x.data(), gamma.data(), rstd.data(), n, h,
                                          dx.data()));
  REQUIRE_OK(k.gpu().RmsNormBackwardInput(gdy, gx, ggamma, crms, n, h, gyo));
  CHECK(RelErr(k.Down(gyo, n * h), dx) < 1e-5);
  dg = dg0;
  gdg = k.Up(dg0);
  REQUIRE_OK(k.cpu().RmsNormBackwardWeight(dy.data(), x.data(), rstd.data(), n, h, dg.data()));
  REQUIRE_OK(k.gpu().RmsNormBackwardWeight(gdy, gx, crms, n, h, gdg));
  CHECK(RelErr(k.Down(gdg, h), dg) < 1e-5);

  // Embedding: exact (same per-element arithmetic, token order).
  const int64_t vocab = 50;
  const auto ids = RandomInts(n, 7, 0, vocab - 1);
  const auto table = Random(vocab * h, 8);
  const int32_t* gids = k.Up(ids);
  for (bool accumulate : {false, true}) {
    auto out = dy;
    float* gout = k.Up(dy);
    REQUIRE_OK(k.cpu().EmbeddingForward(ids.data(), n, table.data(), h, out.data(), accumulate));
    REQUIRE_OK(k.gpu().EmbeddingForward(gids, n, k.Up(table), h, gout, accumulate));
    CHECK(k.Down(gout, n * h) == out);
  }
  auto dtable = table;
  float* gdtable = k.Up(table);
  REQUIRE_OK(k.cpu().EmbeddingBackward(ids.data(), n, dy.data(), h, dtable.data()));
  REQUIRE_OK(k.gpu().EmbeddingBackward(gids, n, gdy, h, gdtable));
  CHECK(k.Down(gdtable, vocab * h) == dtable);

  const int64_t vp = 136, v = 129;
  const auto logits = Random(n * vp, 9, -4.0f, 4.0f), dloss = Random(n, 10);
  auto targets = RandomInts(n, 11, 0, v - 1);
  targets[5] = -1;  // outside this shard
  std::vector<float> loss(n), lse(n), dlogits(n * vp);
  const float* glogits = k.Up(logits);
  const int32_t* gtargets = k.Up(targets);
  float* gloss = k.Zeros<float>(n);
  float* glse = k.Zeros<float>(n);
  REQUIRE_OK(k.cpu().CrossEntropyForward(logits.data(), targets.data(), n, vp, v, loss.data(),
                                         lse.data()));
  REQUIRE_OK(k.gpu().CrossEntropyForward(glogits, gtargets, n, vp, v, gloss, glse));
  CHECK(RelErr(k.Down(gloss, n), loss) < 1e-5);
  CHECK(RelErr(k.Down(glse, n), lse) < 1e-5);
  float* gd = k.Zeros<float>(n * vp);
  REQUIRE_OK(k.cpu().CrossEntropyBackward(logits.data(), targets.data(), lse.data(), dloss.data(),
                                          n, vp, v, dlogits.data()));
  REQUIRE_OK(k.gpu().CrossEntropyBackward(glogits, gtargets, k.Up(lse), k.Up(dloss), n, vp, v, gd));
  CHECK(RelErr(k.Down(gd, n * vp), dlogits) < 1e-5);
}

TEST_CASE("CUDA attention (materialised and fused) matches the CPU backend") {
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    auto gpu = GpuOrSkip(precision);
    if (!gpu) return;
    Both k(std::move(gpu), precision);
    const double tol = precision == Precision::kBf16 ? 2e-3 : 1e-5;
    // Two shapes, the second larger: the attention scratch grows between them.
    for (const AttentionDims d : {AttentionDims{2, 24, 4, 2, 32}, AttentionDims{2, 70, 6, 3, 32}}) {
      const int64_t nq = d.b * d.heads * d.s * d.head_dim, nkv = d.b * d.groups * d.s * d.head_dim;
      const int64_t nqkv = nq + 2 * nkv, np = d.b * d.heads * d.s * d.s;
      const auto qkv = Random(nqkv, 1);
      std::vector<float> q(nq), kk(nkv), v(nkv);
      REQUIRE_OK(k.cpu().SplitQkv(d, qkv.data(), q.data(), kk.data(), v.data()));
      float* gq = k.Zeros<float>(nq);
      float* gk = k.Zeros<float>(nkv);
      float* gv = k.Zeros<float>(nkv);
      REQUIRE_OK(k.gpu().SplitQkv(d, k.Up(qkv), gq, gk, gv));
      CHECK(k.Down(gq, nq) == q);
      CHECK(k.Down(gk, nkv) == kk);
      CHECK(k.Down(gv, nkv) == v);
      std::vector<float> merged(nqkv), tokens(nq), heads(nq);
      REQUIRE_OK(k.cpu().MergeQkvGrad(d, q.data(), kk.data(), v.data(), merged.data()));
      float* gm = k.Zeros<float>(nqkv);
      REQUIRE_OK(k.gpu().MergeQkvGrad(d, gq, gk, gv, gm));
      CHECK(k.Down(gm, nqkv) == merged);
      REQUIRE_OK(k.cpu().HeadsToTokens(d, q.data(), tokens.data()));
      float* gt = k.Zeros<float>(nq);
      REQUIRE_OK(k.gpu().HeadsToTokens(d, gq, gt));
      CHECK(k.Down(gt, nq) == tokens);
      REQUIRE_OK(k.cpu().TokensToHeads(d, q.data(), heads.data()));
      REQUIRE_OK(k.gpu().TokensToHeads(d, gq, gt));
      CHECK(k.Down(gt, nq) == heads);

      std::vector<int32_t> doc(d.b * d.s);
      for (int64_t i = 0; i < d.b * d.s; ++i) doc[i] = (i % d.s) < d.s / 3 ? 0 : d.s / 3;
      const int32_t* gdoc = k.Up(doc);
      const auto dout = Random(nq, 2);
      const float* gdout = k.Up(dout);
      const RngKey key{7, kernels::MakeRngStream(5, 1, 0, 0)};
      const RngKey* gkey = k.Up(std::vector<RngKey>{key});
      for (float p : {0.0f, 0.1f}) {
        std::vector<float> probs(np), o(nq), dq(nq), dk(nkv), dv(nkv);
        REQUIRE_OK(k.cpu().AttentionForward(d, q.data(), kk.data(), v.data(), doc.data(), 0.2f, p,
                                            &key, probs.data(), o.data()));
        float* gp = k.Zeros<float>(np);
        float* go = k.Zeros<float>(nq);
        REQUIRE_OK(k.gpu().AttentionForward(d, gq, gk, gv, gdoc, 0.2f, p, gkey, gp, go));
        CHECK(RelErr(k.Down(gp, np), probs) < tol);
        CHECK(RelErr(k.Down(go, nq), o) < tol);
        // Both backwards read the CPU's probabilities (isolates the backward).
        REQUIRE_OK(k.cpu().AttentionBackward(d, q.data(), kk.data(), v.data(), probs.data(),
                                             doc.data(), 0.2f, p, &key, dout.data(), dq.data(),
                                             dk.data(), dv.data()));
        float* gdq = k.Zeros<float>(nq);
        float* gdk = k.Zeros<float>(nkv);
        float* gdv = k.Zeros<float>(nkv);
        REQUIRE_OK(k.gpu().AttentionBackward(d, gq, gk, gv, k.Up(probs), gdoc, 0.2f, p, gkey, gdout,
                                             gdq, gdk, gdv));
        CHECK(RelErr(k.Down(gdq, nq), dq) < tol);
        CHECK(RelErr(k.Down(gdk, nkv), dk) < tol);
        CHECK(RelErr(k.Down(gdv, nkv), dv) < tol);
        if (precision == Precision::kBf16) continue;  // the fused kernel is fp32 only
        // Fused: the same o and gradients as the materialised CPU path (fp32 SIMT).
        float* lse = k.Zeros<float>(d.b * d.heads * d.s);
        float* delta = k.Zeros<float>(d.b * d.heads * d.s);
        REQUIRE_OK(k.gpu().FusedAttentionForward(d, gq, gk, gv, gdoc, 0.2f, p, gkey, go, lse));
        CHECK(RelErr(k.Down(go, nq), o) < 1e-5);
        REQUIRE_OK(k.gpu().FusedAttentionBackward(d, gq, gk, gv, go, lse, gdoc, 0.2f, p, gkey,
                                                  gdout, gdq, gdk, gdv, delta));
        CHECK(RelErr(k.Down(gdq, nq), dq) < 1e-5);
        CHECK(RelErr(k.Down(gdk, nkv), dk) < 1e-5);
        CHECK(RelErr(k.Down(gdv, nkv), dv) < 1e-5);
      }
    }
  }
}

TEST_CASE("CUDA RoPE and AdamW match the CPU backend") {
  auto gpu = GpuOrSkip(Precision::kFp32);
  if (!gpu) return;
  Both k(std::move(gpu), Precision::kFp32);
  const int64_t b = 2, s = 33, heads = 4, hd = 64, rotary = 32;
  const auto x = Random(b * heads * s * hd, 1);
  const auto positions = RandomInts(b * s, 2, 0, 4000);
  const int32_t* gpos = k.Up(positions);
  auto want = x;
  float* gx = k.Up(x);
  const kernels::RopeFrequencies plain{10000.0f};
  REQUIRE_OK(k.cpu().RopeForward(want.data(), positions.data(), b, s, heads, hd, rotary, plain));
  REQUIRE_OK(k.gpu().RopeForward(gx, gpos, b, s, heads, hd, rotary, plain));
  CHECK(RelErr(k.Down(gx, want.size()), want) < 1e-6);
  REQUIRE_OK(k.cpu().RopeBackward(want.data(), positions.data(), b, s, heads, hd, rotary, plain));
  REQUIRE_OK(k.gpu().RopeBackward(gx, gpos, b, s, heads, hd, rotary, plain));
  CHECK(RelErr(k.Down(gx, want.size()), want) < 1e-6);
  // Llama-3 scaling, interleaved pairs, position interpolation: the same host-side
  // inverse frequencies (kernels/rope_frequencies.h), so the same 1e-6 bound.
  kernels::RopeFrequencies scaled{500000.0f};
  scaled.llama3_scaling = true;
  scaled.seq_len_interpolation_factor = 4.0f;
  scaled.interleaved = true;
  REQUIRE_OK(k.cpu().RopeForward(want.data(), positions.data(), b, s, heads, hd, rotary, scaled));
  REQUIRE_OK(k.gpu().RopeForward(gx, gpos, b, s, heads, hd, rotary, scaled));
  CHECK(RelErr(k.Down(gx, want.size()), want) < 1e-6);
  REQUIRE_OK(k.cpu().RopeBackward(want.data(), positions.data(), b, s, heads, hd, rotary, scaled));
  REQUIRE_OK(k.gpu().RopeBackward(gx, gpos, b, s, heads, hd, rotary, scaled));
  CHECK(RelErr(k.Down(gx, want.size()), want) < 1e-6);

  const int64_t n = 10007;
  const auto grad = Random(n, 3);
  auto p = Random(n, 4), m = Random(n, 5, -0.1f, 0.1f), v = Random(n, 6, 0.0f, 0.01f);
  float* gp = k.Up(p);
  float* gm = k.Up(m);
  float* gv = k.Up(v);
  REQUIRE_OK(k.cpu().AdamWStep(p.data(), grad.data(), m.data(), v.data(), n, 3e-4f, 0.9f, 0.95f,
                               1e-8f, 0.1f, 5));
  REQUIRE_OK(k.gpu().AdamWStep(gp, k.Up(grad), gm, gv, n, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 5));
  CHECK(k.Down(gp, n) == p);
  CHECK(k.Down(gm, n) == m);
  CHECK(k.Down(gv, n) == v);
}

}  // namespace
}  // namespace mxmaca::layers::device
