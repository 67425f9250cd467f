// tests/bench/kernel_bench.cc: CPU kernel throughput (bazel run //tests/bench:kernel_bench).
//
// 1. GEMM GFLOP/s at 2048^3 and at the GPT benchmark shapes (hidden 256, 2048 tokens,
//    vocab 50304), 1 and 2 threads, fp32 and bf16, next to a baseline measured in the same
//    run: oneDNN's own dnnl_sgemm threaded by OpenMP (not thread-count deterministic).
// 2. Per-kernel time for the benchmark model config (6 layers, hidden 256, 8 heads,
//    seq 256, micro-batch 8 -> 2048 tokens, FFN 1024, padded vocab 50304) and the
//    resulting estimate of one micro-batch's forward + backward.
// Each number is the minimum over a few repetitions (the machine is shared).
// Flags: --quick (one repetition; skips 2048^3 and the bf16 vocab shapes), --gemm or
// --kernels (one part only), --threads=1|2 (one thread count for part 2).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "dnnl.hpp"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"

namespace mxmaca::kernels::cpu {
namespace {

int g_reps = 3;

double TimeMin(const std::function<void()>& f, int reps = -1) {
  if (reps < 0) reps = g_reps;
  f();  // warm-up (primitive creation, page faults)
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  return best;
}

// N(0, stddev^2) values. Weights use Megatron's init std 0.02 so that activations and
// logits keep realistic magnitudes (huge logits would spend the time in denormal paths).
std::vector<float> Random(int64_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

struct GemmShape {
  const char* name;
  bool ta, tb;
  int64_t m, n, k;
};

void BenchGemm(bool quick) {
  std::vector<GemmShape> shapes = {
      {"qkv fwd   [2048,256]x[768,256]^T", false, true, 2048, 768, 256},
      {"proj fwd  [2048,256]x[256,256]^T", false, true, 2048, 256, 256},
      {"fc1 fwd   [2048,256]x[1024,256]^T", false, true, 2048, 1024, 256},
      {"fc2 fwd   [2048,1024]x[256,1024]^T", false, true, 2048, 256, 1024},
      {"fc1 dX    [2048,1024]x[1024,256]", false, false, 2048, 256, 1024},
      {"fc1 dW    [2048,1024]^T x[2048,256]", true, false, 1024, 256, 2048},
      {"logits    [2048,256]x[50304,256]^T", false, true, 2048, 50304, 256},
      {"logits dX [2048,50304]x[50304,256]", false, false, 2048, 256, 50304},
      {"logits dW [2048,50304]^T x[2048,256]", true, false, 50304, 256, 2048},
  };
  if (!quick) shapes.insert(shapes.begin(), {"square    2048^3", false, false, 2048, 2048, 2048});
  std::printf("\n== GEMM GFLOP/s (ours: fixed tiling, single-threaded oneDNN per tile; "
              "baseline: dnnl_sgemm with OpenMP threads) ==\n");
  std::printf("%-38s %9s %9s %9s %9s %9s %9s %7s\n", "shape", "base f32/1", "f32/1",
              "base f32/2", "f32/2", "bf16/1", "bf16/2", "2t/base");
  for (const GemmShape& s : shapes) {
    const int64_t a_rows = s.ta ? s.k : s.m, a_cols = s.ta ? s.m : s.k;
    const int64_t b_rows = s.tb ? s.n : s.k, b_cols = s.tb ? s.k : s.n;
    const std::vector<float> a = Random(a_rows * a_cols, 1), b = Random(b_rows * b_cols, 2);
    std::vector<float> c(s.m * s.n);
    const double flop = 2.0 * s.m * s.n * s.k;
    auto ours = [&](int threads, Precision p) {
      ExecContext ctx;
      ctx.num_threads = threads;
      ctx.precision = p;
      return flop / 1e9 / TimeMin([&] {
               Gemm(ctx, s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), a_cols, b.data(), b_cols,
                    0.0f, c.data(), s.n);
             });
    };
    auto base = [&](int threads) {
      omp_set_num_threads(threads);
      const double g = flop / 1e9 / TimeMin([&] {
                         dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f,
                                    a.data(), a_cols, b.data(), b_cols, 0.0f, c.data(), s.n);
                       });
      omp_set_num_threads(1);
      return g;
    };
    const bool big = s.m * s.n * s.k > int64_t{4} << 30;
    const double b1 = base(1), o1 = ours(1, Precision::kFp32);
    const double b2 = base(2), o2 = ours(2, Precision::kFp32);
    const double h1 = (quick && big) ? 0 : ours(1, Precision::kBf16);
    const double h2 = (quick && big) ? 0 : ours(2, Precision::kBf16);
    std::printf("%-38s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %7.2f\n", s.name, b1, o1, b2, o2,
                h1, h2, o2 / b2);
    std::fflush(stdout);
  }
}

// Benchmark model config.
constexpr int64_t kB = 8, kS = 256, kH = 256, kHeads = 8, kD = kH / kHeads, kF = 4 * kH,
                  kT = kB * kS, kVocab = 50304, kLayers = 6;

void BenchKernels(int threads) {
  ExecContext ctx;
  ctx.num_threads = threads;
  std::printf("\n== per-kernel time, benchmark config (%d thread%s), ms ==\n", threads,
              threads > 1 ? "s" : "");
  const AttentionShape sh{kB, kS, kHeads, kHeads, kD};
  std::vector<float> x = Random(kT * kH, 3), y(kT * kH), dy = Random(kT * kH, 4),
                     dx(kT * kH), gamma(kH, 1.0f), beta(kH, 0.0f), mean(kT), rstd(kT),
                     dg(kH), db(kH);
  std::vector<float> qkv = Random(kT * 3 * kH, 5), q(kT * kH), k(kT * kH), v(kT * kH),
                     o(kT * kH), probs(kB * kHeads * kS * kS), dq(kT * kH), dk(kT * kH),
                     dv(kT * kH), dqkv(kT * 3 * kH);
  std::vector<float> h4 = Random(kT * kF, 6), g4(kT * kF), dh4(kT * kF);
  std::vector<float> w_qkv = Random(3 * kH * kH, 7, 0.02f), w_fc1 = Random(kF * kH, 8, 0.02f),
                     w_fc2 = Random(kH * kF, 9, 0.02f), w_proj = Random(kH * kH, 10, 0.02f),
                     dw(kF * kH), bias(kF, 0.1f);
  std::vector<int32_t> ids(kT), targets(kT), pos(kT);
  for (int64_t i = 0; i < kT; ++i) {
    ids[i] = static_cast<int32_t>((i * 7919) % 50257);
    targets[i] = static_cast<int32_t>((i * 104729) % 50257);
    pos[i] = static_cast<int32_t>(i % kS);
  }
  std::vector<float> table = Random(kVocab * kH, 11, 0.02f), dtable(kVocab * kH, 0.0f);
  std::vector<float> logits = Random(kT * kVocab, 12, 2.0f), loss(kT), lse(kT), dloss(kT, 1.0f / kT);
  const int64_t n_params = kLayers * (12 * kH * kH + 13 * kH) + kVocab * kH + kS * kH;
  std::vector<float> params = Random(n_params, 13), grads = Random(n_params, 14),
                     m(n_params, 0.0f), vv(n_params, 0.0f);

  struct Row {
    std::string name;
    double ms;
    int per_layer;  // calls per layer per micro-batch (0: once per micro-batch)
  };
  std::vector<Row> rows;
  auto add = [&](const std::string& name, int per_layer, const std::function<void()>& f) {
    const double ms = 1e3 * TimeMin(f);
    rows.push_back({name, ms, per_layer});
    std::printf("  %-44s %9.3f\n", name.c_str(), ms);
    std::fflush(stdout);
  };
  auto gemm = [&](bool ta, bool tb, int64_t mm, int64_t nn, int64_t kk, const float* a,
                  const float* b, float* c, float beta_) {
    Gemm(ctx, ta, tb, mm, nn, kk, 1.0f, a, ta ? mm : kk, b, tb ? kk : nn, beta_, c, nn);
  };
  // Per layer, forward.
  add("LayerNormForward [2048,256]", 2, [&] {
    LayerNormForward(ctx, x.data(), gamma.data(), beta.data(), 1e-5f, kT, kH, y.data(),
                     mean.data(), rstd.data());
  });
  add("Gemm qkv fwd", 1, [&] { gemm(false, true, kT, 3 * kH, kH, x.data(), w_qkv.data(), qkv.data(), 0); });
  add("AddBias [2048,1024]", 4, [&] { AddBias(ctx, h4.data(), bias.data(), kT, kF); });
  add("SplitQkv", 1, [&] { SplitQkv(ctx, sh, qkv.data(), q.data(), k.data(), v.data()); });
  add("AttentionForward (no dropout)", 1, [&] {
    AttentionForward(ctx, sh, q.data(), k.data(), v.data(), nullptr, 1.0f / std::sqrt(float(kD)),
                     0.0f, RngKey{1, 2}, probs.data(), o.data());
  });
  add("AttentionForward (dropout 0.1)", 0, [&] {
    AttentionForward(ctx, sh, q.data(), k.data(), v.data(), nullptr, 1.0f / std::sqrt(float(kD)),
                     0.1f, RngKey{1, 2}, probs.data(), o.data());
  });
  add("HeadsToTokens", 1, [&] { HeadsToTokens(ctx, sh, o.data(), y.data()); });
  add("Gemm proj fwd", 1, [&] { gemm(false, true, kT, kH, kH, y.data(), w_proj.data(), x.data(), 0); });
  add("DropoutForward [2048,256] p=0.1", 2, [&] {
    DropoutForward(ctx, y.data(), dx.data(), kT * kH, 0.1f, RngKey{1, 3}, 0);
  });
  add("Add [2048,256]", 2, [&] { Add(ctx, x.data(), y.data(), dx.data(), kT * kH); });
  add("Gemm fc1 fwd", 1, [&] { gemm(false, true, kT, kF, kH, x.data(), w_fc1.data(), h4.data(), 0); });
  add("GeluForward [2048,1024]", 1, [&] { GeluForward(ctx, h4.data(), g4.data(), kT * kF); });
  add("GeluTanhForward [2048,1024] (Megatron default)", 0,
      [&] { GeluTanhForward(ctx, h4.data(), g4.data(), kT * kF); });
  add("Gemm fc2 fwd", 1, [&] { gemm(false, true, kT, kH, kF, g4.data(), w_fc2.data(), y.data(), 0); });
  // Per layer, backward.
  add("Gemm fc2 dX", 1, [&] { gemm(false, false, kT, kF, kH, dy.data(), w_fc2.data(), dh4.data(), 0); });
  add("Gemm fc2 dW", 1, [&] { gemm(true, false, kH, kF, kT, dy.data(), g4.data(), dw.data(), 1); });
  add("BiasGrad [2048,1024]", 2, [&] { BiasGrad(ctx, dh4.data(), kT, kF, bias.data()); });
  add("GeluBackward [2048,1024]", 1, [&] { GeluBackward(ctx, h4.data(), dh4.data(), g4.data(), kT * kF); });
  add("GeluTanhBackward [2048,1024]", 0,
      [&] { GeluTanhBackward(ctx, h4.data(), dh4.data(), g4.data(), kT * kF); });
  add("Gemm fc1 dX", 1, [&] { gemm(false, false, kT, kH, kF, g4.data(), w_fc1.data(), dx.data(), 0); });
  add("Gemm fc1 dW", 1, [&] { gemm(true, false, kF, kH, kT, g4.data(), x.data(), dw.data(), 1); });
  add("LayerNormBackwardInput", 2, [&] {
    LayerNormBackwardInput(ctx, dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), kT,
                           kH, dx.data());
  });
  add("LayerNormBackwardWeight", 2, [&] {
    LayerNormBackwardWeight(ctx, dy.data(), x.data(), mean.data(), rstd.data(), kT, kH,
                            dg.data(), db.data());
  });
  add("Gemm proj dX", 1, [&] { gemm(false, false, kT, kH, kH, dy.data(), w_proj.data(), y.data(), 0); });
  add("Gemm proj dW", 1, [&] { gemm(true, false, kH, kH, kT, dy.data(), o.data(), dw.data(), 1); });
  add("TokensToHeads", 1, [&] { TokensToHeads(ctx, sh, y.data(), o.data()); });
  add("AttentionBackward (no dropout)", 1, [&] {
    AttentionBackward(ctx, sh, q.data(), k.data(), v.data(), probs.data(), nullptr,
                      1.0f / std::sqrt(float(kD)), 0.0f, RngKey{1, 2}, o.data(), dq.data(),
                      dk.data(), dv.data());
  });
  add("AttentionBackward (dropout 0.1)", 0, [&] {
    AttentionBackward(ctx, sh, q.data(), k.data(), v.data(), probs.data(), nullptr,
                      1.0f / std::sqrt(float(kD)), 0.1f, RngKey{1, 2}, o.data(), dq.data(),
                      dk.data(), dv.data());
  });
  add("MergeQkvGrad", 1, [&] { MergeQkvGrad(ctx, sh, dq.data(), dk.data(), dv.data(), dqkv.data()); });
  add("Gemm qkv dX", 1, [&] { gemm(false, false, kT, kH, 3 * kH, dqkv.data(), w_qkv.data(), dx.data(), 0); });
  add("Gemm qkv dW", 1, [&] { gemm(true, false, 3 * kH, kH, kT, dqkv.data(), x.data(), w_qkv.data(), 1); });
  add("RopeForward q [8,8,256,32] (not in GPT-2 config)", 0, [&] {
    RopeForward(ctx, q.data(), pos.data(), kB, kS, kHeads, kD, kD, 10000.0f);
  });
  // Once per micro-batch.
  add("EmbeddingForward + position", 0, [&] {
    EmbeddingForward(ctx, ids.data(), kT, table.data(), kH, x.data(), false);
    EmbeddingForward(ctx, pos.data(), kT, table.data(), kH, x.data(), true);
  });
  add("EmbeddingBackward", 0, [&] { EmbeddingBackward(ctx, ids.data(), kT, dy.data(), kH, dtable.data()); });
  add("Gemm logits fwd", 0, [&] { gemm(false, true, kT, kVocab, kH, x.data(), table.data(), logits.data(), 0); });
  add("CrossEntropyForward [2048,50304]", 0, [&] {
    CrossEntropyForward(ctx, logits.data(), targets.data(), kT, kVocab, 50257, loss.data(), lse.data());
  });
  add("CrossEntropyBackward (in place)", 0, [&] {
    CrossEntropyBackward(ctx, logits.data(), targets.data(), lse.data(), dloss.data(), kT, kVocab,
                         50257, logits.data());
  });
  add("Gemm logits dX", 0, [&] { gemm(false, false, kT, kH, kVocab, logits.data(), table.data(), x.data(), 0); });
  add("Gemm logits dW", 0, [&] { gemm(true, false, kVocab, kH, kT, logits.data(), x.data(), dtable.data(), 1); });
  add("AdamWStep (all params, once per step)", 0, [&] {
    AdamWStep(ctx, params.data(), grads.data(), m.data(), vv.data(), n_params, 1e-4f, 0.9f,
              0.95f, 1e-8f, 0.1f, 1);
  });
  add("SumSquares (all grads, once per step)", 0, [&] { (void)SumSquares(ctx, grads.data(), n_params); });

  // Estimate of one micro-batch forward + backward: exact GELU, no dropout, no RoPE.
  double per_layer = 0, once = 0;
  for (const Row& r : rows) {
    if (r.name.find("dropout 0.1") != std::string::npos || r.name.find("Rope") == 0 ||
        r.name.find("GeluTanh") == 0) {
      continue;  // alternatives, listed for reference
    }
    if (r.per_layer > 0) per_layer += r.per_layer * r.ms;
    else if (r.name.find("once per step") == std::string::npos) once += r.ms;
  }
  std::printf("  => per layer F+B %.1f ms; %lld layers + embedding/logits/loss %.1f ms: "
              "%.1f ms per micro-batch (%.0f tokens/s)\n",
              per_layer, static_cast<long long>(kLayers), once, kLayers * per_layer + once,
              kT / ((kLayers * per_layer + once) / 1e3));
}

}  // namespace
}  // namespace mxmaca::kernels::cpu

int main(int argc, char** argv) {
  bool quick = false, gemm_only = false, kernels_only = false;
  int threads = 0;  // 0: both 1 and 2
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--gemm") == 0) gemm_only = true;
    if (std::strcmp(argv[i], "--kernels") == 0) kernels_only = true;
    if (std::strncmp(argv[i], "--threads=", 10) == 0) threads = std::atoi(argv[i] + 10);
  }
  if (quick) mxmaca::kernels::cpu::g_reps = 1;
  if (!kernels_only) mxmaca::kernels::cpu::BenchGemm(quick);
  if (!gemm_only) {
    if (threads != 2) mxmaca::kernels::cpu::BenchKernels(1);
    if (threads != 1) mxmaca::kernels::cpu::BenchKernels(2);
  }
  return 0;
}
