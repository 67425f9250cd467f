// tests/gpu/gpu_check_perf.cc: throughput of the kernels/cuda ops at GPT-sized shapes,
// against peaks measured in the same run: the cuBLASLt bf16 GEMM (bf16 in/out, fp32
// accumulation, 8192^3) for compute-bound ops, and a device-to-device cudaMemcpy (bytes
// read + written) for memory-bound ones. Times are medians of 7 runs after 2 warm-ups
// (CUDA events). Attention FLOPs count the causal half only (what a fused kernel would
// need: 2 S^2 D per head forward, 5 S^2 D backward... see the line printed), so a
// GEMM-based kernel that computes the full square shows at most ~50% of its GEMM rate.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/fused_attention.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"
#include "tests/gpu/check_util.h"

namespace mxmaca::gpu_check {
namespace {

namespace kc = ::mxmaca::kernels::cuda;
using kernels::ExecContext;
using kernels::Precision;

// Fills a device buffer with a deterministic non-trivial pattern (no host round trip).
template <typename T>
void Fill(Dev<T>& d, std::mt19937_64& rng, float stddev = 1.0f) {
  const size_t chunk = 1 << 22;
  std::vector<float> h = Normal(rng, chunk, stddev);
  std::vector<T> ht(h.begin(), h.end());
  for (size_t off = 0; off < d.size(); off += chunk) {
    const size_t n = std::min(chunk, d.size() - off);
    CU(cudaMemcpy(d.get() + off, ht.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
}

void Compute(const char* name, const std::string& shape, double ms, double flops, double peak_tflops) {
  const double tflops = flops / (ms * 1e-3) / 1e12;
  std::printf("%-38s %-30s %9.3f ms %9.1f TFLOP/s  %5.1f%% of bf16 peak\n", name, shape.c_str(), ms,
              tflops, 100.0 * tflops / peak_tflops);
  std::fflush(stdout);
}

void Memory(const char* name, const std::string& shape, double ms, double bytes, double peak_gbs) {
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  std::printf("%-38s %-30s %9.3f ms %9.1f GB/s     %5.1f%% of copy bandwidth\n", name, shape.c_str(), ms,
              gbs, 100.0 * gbs / peak_gbs);
  std::fflush(stdout);
}

}  // namespace

void RunPerfSections(bool quick) {
  std::mt19937_64 rng(7);
  std::unique_ptr<kc::GemmHandle> gemm;
  CK(kc::GemmHandle::Create(32 << 20, &gemm));
  ExecContext ctx, ctx16;
  ctx16.precision = Precision::kBf16;
  const int64_t big = quick ? 4096 : 8192;

  // Each section runs on its own: a failed call ends only its section.
  auto Section = [](auto&& f) {
    ClearStaleError();
    try {
      f();
    } catch (const std::exception& e) {  // CheckError, or std::bad_alloc and the like
      ClearStaleError();
      std::printf("SECTION STOPPED: %s\n", e.what());
      std::fflush(stdout);
    }
  };
  // Peaks (if their measurement fails, the H200 datasheet's dense bf16 and HBM figures).
  double peak_tflops = 989.0, peak_gbs = 4800.0;
  Section([&] {
    Dev<__nv_bfloat16> a(big * big), b(big * big), c(big * big);
    Fill(a, rng);
    Fill(b, rng);
    const double ms = TimeMs([&] {
      CK(kc::GemmBf16Out(ctx, *gemm, false, false, big, big, big, 1.0f, a.get(), big, b.get(), big, 0.0f, c.get(), big));
    });
    peak_tflops = 2.0 * big * big * big / (ms * 1e-3) / 1e12;
    std::printf("PEAK cuBLASLt bf16 GEMM %lldx%lldx%lld (bf16 in/out): %.3f ms = %.1f TFLOP/s\n",
                (long long)big, (long long)big, (long long)big, ms, peak_tflops);
    const size_t bytes = size_t{1} << 31;
    Dev<char> x(bytes), y(bytes);
    const double cms = TimeMs([&] { CU(cudaMemcpyAsync(y.get(), x.get(), bytes, cudaMemcpyDeviceToDevice)); });
    peak_gbs = 2.0 * bytes / (cms * 1e-3) / 1e9;
    std::printf("PEAK device-to-device copy 2 GiB: %.3f ms = %.1f GB/s (read + write)\n\n", cms, peak_gbs);
  });

  // GEMMs at a GPT MLP shape: tokens T = 8192, hidden H = 4096, 4H = 16384.
  Section([&] {
    const int64_t t = big, h = big / 2, f = 2 * big;
    const std::string shape = std::to_string(t) + "x" + std::to_string(f) + "x" + std::to_string(h);
    Dev<float> a(t * h), w(h * f), c(t * f);
    Fill(a, rng);
    Fill(w, rng, 0.02f);
    const double flops = 2.0 * t * h * f;
    Compute("Gemm fp32 (no TF32)", shape, TimeMs([&] {
              CK(kc::Gemm(ctx, *gemm, false, false, t, f, h, 1.0f, a.get(), h, w.get(), f, 0.0f, c.get(), f));
            }), flops, peak_tflops);
    Section([&] {
      Compute("Gemm bf16fast (fp32 pointers)", shape, TimeMs([&] {
                CK(kc::Gemm(ctx16, *gemm, false, false, t, f, h, 1.0f, a.get(), h, w.get(), f, 0.0f, c.get(), f));
              }), flops, peak_tflops);
    });
    Dev<__nv_bfloat16> a16(t * h), w16(h * f);
    CK(kc::ConvertToBf16(ctx, a.get(), a16.get(), t * h));
    CK(kc::ConvertToBf16(ctx, w.get(), w16.get(), h * f));
    Compute("GemmBf16 (bf16 in, fp32 out)", shape, TimeMs([&] {
              CK(kc::GemmBf16(ctx, *gemm, false, false, t, f, h, 1.0f, a16.get(), h, w16.get(), f, 0.0f, c.get(), f));
            }), flops, peak_tflops);
    Compute("GemmBf16 dgrad (NT)", shape, TimeMs([&] {
              CK(kc::GemmBf16(ctx, *gemm, false, true, t, h, f, 1.0f, a16.get(), f, w16.get(), f, 0.0f, c.get(), h));
            }), flops, peak_tflops);
    Memory("ConvertToBf16", std::to_string(t * h), TimeMs([&] {
             CK(kc::ConvertToBf16(ctx, a.get(), a16.get(), t * h));
           }), 6.0 * t * h, peak_gbs);
  });

  // Memory-bound kernels at T = 8192 tokens, H = 4096 (MLP width 16384).
  Section([&] {
    const int64_t t = big, h = 4096, f = 16384, n = t * f;
    Dev<float> x(n), y(n), dy(n), bias(f), gamma(h), beta(h), mean(t), rstd(t), dg(f);
    Fill(x, rng);
    Fill(dy, rng);
    Fill(bias, rng);
    Fill(gamma, rng);
    Fill(beta, rng);
    const std::string sf = std::to_string(t) + "x" + std::to_string(f);
    const std::string sh = std::to_string(t) + "x" + std::to_string(h);
    Memory("AddBias", sf, TimeMs([&] { CK(kc::AddBias(ctx, y.get(), bias.get(), t, f)); }), 8.0 * n, peak_gbs);
    Memory("BiasGrad", sf, TimeMs([&] { CK(kc::BiasGrad(ctx, dy.get(), t, f, dg.get())); }), 4.0 * n, peak_gbs);
    Memory("GeluForward", sf, TimeMs([&] { CK(kc::GeluForward(ctx, x.get(), y.get(), n)); }), 8.0 * n, peak_gbs);
    Memory("GeluBackward", sf, TimeMs([&] { CK(kc::GeluBackward(ctx, x.get(), dy.get(), y.get(), n)); }), 12.0 * n, peak_gbs);
    Memory("GeluTanhForward", sf, TimeMs([&] { CK(kc::GeluTanhForward(ctx, x.get(), y.get(), n)); }), 8.0 * n, peak_gbs);
    Memory("SwigluForward", sf, TimeMs([&] { CK(kc::SwigluForward(ctx, x.get(), y.get(), t, f / 2)); }), 6.0 * n, peak_gbs);
    Memory("SwigluBackward", sf, TimeMs([&] { CK(kc::SwigluBackward(ctx, x.get(), dy.get(), y.get(), t, f / 2)); }), 14.0 * n, peak_gbs);
    const kernels::RngKey key{1, 2};
    Memory("DropoutForward p=0.1", sf, TimeMs([&] { CK(kc::DropoutForward(ctx, x.get(), y.get(), n, 0.1f, key, 0)); }), 8.0 * n, peak_gbs);
    Dev<double> partials(kc::kSumSquaresPartials), ss(1);
    Memory("SumSquares", sf, TimeMs([&] { CK(kc::SumSquares(ctx, x.get(), n, partials.get(), ss.get())); }), 4.0 * n, peak_gbs);
    const int64_t nh = t * h;
    Memory("LayerNormForward", sh, TimeMs([&] {
             CK(kc::LayerNormForward(ctx, x.get(), gamma.get(), beta.get(), 1e-5f, t, h, y.get(), mean.get(), rstd.get()));
           }), 8.0 * nh, peak_gbs);
    Memory("LayerNormBackwardInput", sh, TimeMs([&] {
             CK(kc::LayerNormBackwardInput(ctx, dy.get(), x.get(), gamma.get(), mean.get(), rstd.get(), t, h, y.get()));
           }), 12.0 * nh, peak_gbs);
    Memory("LayerNormBackwardWeight", sh, TimeMs([&] {
             CK(kc::LayerNormBackwardWeight(ctx, dy.get(), x.get(), mean.get(), rstd.get(), t, h, dg.get(), dg.get() + h));
           }), 8.0 * nh, peak_gbs);
    Memory("RmsNormForward", sh, TimeMs([&] {
             CK(kc::RmsNormForward(ctx, x.get(), gamma.get(), 1e-5f, t, h, y.get(), rstd.get()));
           }), 8.0 * nh, peak_gbs);
    Memory("RmsNormBackwardInput", sh, TimeMs([&] {
             CK(kc::RmsNormBackwardInput(ctx, dy.get(), x.get(), gamma.get(), rstd.get(), t, h, y.get()));
           }), 12.0 * nh, peak_gbs);
    // RoPE on q [B = 4, NH = 32, S = 2048, D = 128] (in place: read + write).
    {
      const int64_t rb = 4, rh = 32, rs = 2048, rd = 128;
      std::vector<int32_t> hp(rb * rs);
      for (int64_t i = 0; i < rb * rs; ++i) hp[i] = static_cast<int32_t>(i % rs);
      Dev<int32_t> rpos(hp);
      Memory("RopeForward", "B4 NH32 S2048 D128", TimeMs([&] {
               CK(kc::RopeForward(ctx, x.get(), rpos.get(), rb, rs, rh, rd, rd, 10000.0f));
             }), 8.0 * rb * rh * rs * rd, peak_gbs);
    }
    // Embedding at vocab 50304.
    const int64_t v = 50304;
    Dev<float> table(v * h), dtable(v * h);
    Fill(table, rng);
    std::vector<int32_t> hid = Ints(rng, t, 0, static_cast<int32_t>(v - 1));
    Dev<int32_t> ids(hid);
    Memory("EmbeddingForward", sh, TimeMs([&] {
             CK(kc::EmbeddingForward(ctx, ids.get(), t, table.get(), h, y.get(), false));
           }), 8.0 * nh, peak_gbs);
    Memory("EmbeddingBackward (token-ordered)", sh, TimeMs([&] {
             CK(kc::EmbeddingBackward(ctx, ids.get(), t, dy.get(), h, dtable.get()));
           }, 1, 3), 12.0 * nh, peak_gbs);
    // AdamW over 256 M parameters: reads p, g, m, v; writes p, m, v.
    const int64_t np = quick ? (int64_t{1} << 26) : (int64_t{1} << 28);
    Dev<float> p(np), g(np), m(np), vv(np);
    Fill(p, rng, 0.02f);
    Fill(g, rng, 0.01f);
    CU(cudaMemset(m.get(), 0, np * 4));
    CU(cudaMemset(vv.get(), 0, np * 4));
    int64_t step = 1;
    Memory("AdamWStep", std::to_string(np), TimeMs([&] {
             CK(kc::AdamWStep(ctx, p.get(), g.get(), m.get(), vv.get(), np, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, step++));
           }), 28.0 * np, peak_gbs);
  });

  // Vocab cross-entropy: T = 8192 tokens x 50304 logits (1.6 GB fp32).
  Section([&] {
    const int64_t t = big, vp = 50304, v = 50257;
    Dev<float> logits(t * vp), loss(t), lse(t), dloss(t);
    Fill(logits, rng, 2.0f);
    Fill(dloss, rng);
    std::vector<int32_t> ht = Ints(rng, t, 0, static_cast<int32_t>(v - 1));
    Dev<int32_t> targets(ht);
    const std::string s = std::to_string(t) + "x" + std::to_string(vp);
    Memory("CrossEntropyForward", s, TimeMs([&] {
             CK(kc::CrossEntropyForward(ctx, logits.get(), targets.get(), t, vp, v, loss.get(), lse.get()));
           }), 4.0 * t * vp, peak_gbs);
    Memory("CrossEntropyBackward (in place)", s, TimeMs([&] {
             CK(kc::CrossEntropyBackward(ctx, logits.get(), targets.get(), lse.get(), dloss.get(), t, vp, v, logits.get()));
           }), 8.0 * t * vp, peak_gbs);
  });

  // Causal attention, GPT-3-XL-like: B = 4, NH = 32, NG = 8 (GQA), S = 2048, D = 128.
  Section([&] {
    const int64_t b = 4, nh = 32, ng = 8, s = quick ? 1024 : 2048, d = 128;
    const kc::AttentionShape sh{b, s, nh, ng, d};
    Dev<float> q(b * nh * s * d), k(b * ng * s * d), vv(b * ng * s * d), o(b * nh * s * d), dout(b * nh * s * d),
        probs(b * nh * s * s), scratch(b * nh * s * s), dq(b * nh * s * d), dk(b * ng * s * d), dv(b * ng * s * d);
    Fill(q, rng);
    Fill(k, rng);
    Fill(vv, rng);
    Fill(dout, rng);
    const std::string shape = "B4 NH32 NG8 S" + std::to_string(s) + " D128";
    const double causal_fwd = 2.0 * b * nh * s * s * d;  // 2 GEMMs x 2 S^2 D / 2 (causal half)
    const float scale = 0.08838834764831845f;
    for (int bf = 0; bf < 2; ++bf) Section([&] {
      const ExecContext& c = bf ? ctx16 : ctx;
      const std::string fwd = std::string("AttentionForward ") + (bf ? "bf16fast" : "fp32");
      const std::string bwd = std::string("AttentionBackward ") + (bf ? "bf16fast" : "fp32");
      Compute(fwd.c_str(), shape, TimeMs([&] {
                CK(kc::AttentionForward(c, *gemm, sh, q.get(), k.get(), vv.get(), nullptr, scale, 0.0f, {}, probs.get(),
                                        o.get(), scratch.get()));
              }, 1, 5), causal_fwd, peak_tflops);
      Compute(bwd.c_str(), shape, TimeMs([&] {
                CK(kc::AttentionBackward(c, *gemm, sh, q.get(), k.get(), vv.get(), probs.get(), nullptr, scale, 0.0f, {},
                                         dout.get(), dq.get(), dk.get(), dv.get(), scratch.get()));
              }, 1, 5), 2.0 * causal_fwd, peak_tflops);
    });
    // The fused kernel at the same shape (fp32 SIMT; O(S) memory).
    Dev<float> lse(b * nh * s), delta(b * nh * s);
    Compute("FusedAttentionForward fp32", shape, TimeMs([&] {
              CK(kc::FusedAttentionForward(ctx, sh, q.get(), k.get(), vv.get(), nullptr, scale, 0.0f, {}, o.get(),
                                           lse.get()));
            }, 1, 5), causal_fwd, peak_tflops);
    Compute("FusedAttentionBackward fp32", shape, TimeMs([&] {
              CK(kc::FusedAttentionBackward(ctx, sh, q.get(), k.get(), vv.get(), o.get(), lse.get(), nullptr, scale,
                                            0.0f, {}, dout.get(), dq.get(), dk.get(), dv.get(), delta.get()));
            }, 1, 5), 2.0 * causal_fwd, peak_tflops);
    std::printf("(attention FLOPs: causal half only, forward 4 B NH S^2 D / 2, backward twice that)\n");
  });
}

void RunPerf(bool quick) {
  try {
    RunPerfSections(quick);
  } catch (const std::exception& e) {
    ClearStaleError();
    std::printf("PERF STOPPED: %s\n", e.what());
  }
}

}  // namespace mxmaca::gpu_check
