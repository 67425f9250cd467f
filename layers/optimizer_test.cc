// Tests AdamWOptimizer (decay groups, step counting) against an fp64 evaluation of
// torch.optim.AdamW's update written out here, and grad clipping against its formula.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "layers/grad_clip.h"
#include "layers/optimizer.h"

namespace mxmaca::layers {
namespace {

TEST_CASE("AdamW follows torch's update and skips decay where asked") {
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int n = 257;
  std::vector<float> w(n), b(n), gw(n), gb(n);
  for (auto* v : {&w, &b, &gw, &gb}) for (float& x : *v) x = nd(rng);
  std::vector<double> rw(w.begin(), w.end()), rb(b.begin(), b.end());
  std::vector<double> mw(n, 0), vw(n, 0), mb(n, 0), vb(n, 0);
  AdamWOptimizer opt(AdamWOptions{0.9f, 0.95f, 1e-8f},
                     {{"w", w.data(), gw.data(), n, true}, {"b", b.data(), gb.data(), n, false}});
  kernels::ExecContext ctx;
  const double lr = 1e-2, wd = 0.1;
  for (int t = 1; t <= 5; ++t) {
    opt.Step(ctx, lr, wd);
    auto ref = [&](std::vector<double>& p, std::vector<double>& m, std::vector<double>& v,
                   const std::vector<float>& g, double decay) {
      for (int i = 0; i < n; ++i) {
        p[i] *= 1 - lr * decay;
        m[i] = 0.9 * m[i] + 0.1 * g[i];
        v[i] = 0.95 * v[i] + 0.05 * double(g[i]) * g[i];
        const double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(0.95, t)) + 1e-8;
        p[i] -= lr / (1 - std::pow(0.9, t)) * m[i] / denom;
      }
    };
    ref(rw, mw, vw, gw, wd);
    ref(rb, mb, vb, gb, 0.0);
  }
  CHECK(opt.step() == 5);
  // fp32 state vs fp64: each update moves a weight by ~lr; relative error of the update
  // is a few ulps of fp32 (2^-24 ~ 6e-8) per operation; 5 steps -> absolute error well
  // under 1e-6 on weights of order 1.
  for (int i = 0; i < n; ++i) {
    CHECK(std::abs(w[i] - rw[i]) < 1e-6);
    CHECK(std::abs(b[i] - rb[i]) < 1e-6);
  }
}

TEST_CASE("the decoupled group (embedding, output layer) steps with its own lr") {
  // Megatron's param groups: is_embedding_or_output_parameter weights get max_lr/min_lr of
  // --decoupled-lr; everything else the main lr. One AdamW step from zero moments moves a
  // weight by lr * g / (|g| + eps) after the decay p *= 1 - lr * wd (torch's AdamW).
  CHECK(IsEmbeddingOrOutputParameter("embedding.word_embeddings.weight"));
  CHECK(IsEmbeddingOrOutputParameter("output_layer.weight"));
  CHECK(!IsEmbeddingOrOutputParameter("embedding.position_embeddings.weight"));
  CHECK(!IsEmbeddingOrOutputParameter("decoder.final_layernorm.weight"));
  CHECK(!IsEmbeddingOrOutputParameter("decoder.layers.0.mlp.linear_fc1.weight"));
  std::vector<float> e = {1.0f, -2.0f}, o = {0.5f, 0.25f}, h = {3.0f, -1.0f};
  const std::vector<float> ge = {0.5f, -4.0f}, go = {-1.0f, 2.0f}, gh = {2.0f, 0.125f};
  OptimizerTensor te{"embedding.word_embeddings.weight", e.data(), ge.data(), 2, true};
  te.is_decoupled_lr = true;
  OptimizerTensor to{"output_layer.weight", o.data(), go.data(), 2, true};
  to.is_decoupled_lr = true;
  OptimizerTensor th{"decoder.layers.0.mlp.linear_fc1.weight", h.data(), gh.data(), 2, true};
  AdamWOptimizer opt(AdamWOptions{}, {te, to, th});
  const double lr = 1e-3, dlr = 5e-2, wd = 0.1;
  const std::vector<float> e0 = e, o0 = o, h0 = h;
  opt.Step(kernels::ExecContext{}, lr, dlr, wd);
  auto expect = [](float p, float g, double rate, double decay) {
    return p * (1 - rate * decay) - rate * g / (std::abs(g) + 1e-8);
  };
  for (int i = 0; i < 2; ++i) {
    CHECK(e[i] == Approx(expect(e0[i], ge[i], dlr, wd)).margin(1e-6));
    CHECK(o[i] == Approx(expect(o0[i], go[i], dlr, wd)).margin(1e-6));
    CHECK(h[i] == Approx(expect(h0[i], gh[i], lr, wd)).margin(1e-6));
  }
}

TEST_CASE("grad norm and clipping follow Megatron's clip_grad_by_total_norm") {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> a(1000), c(37);
  for (float& x : a) x = nd(rng);
  for (float& x : c) x = nd(rng);
  double ref = 0;
  for (float x : a) ref += double(x) * x;
  for (float x : c) ref += double(x) * x;
  std::vector<GradSpan> spans = {{a.data(), 1000}, {c.data(), 37}};
  kernels::ExecContext ctx;
  const double sq = GradNormSquared(ctx, spans);
  CHECK(sq == Approx(ref).epsilon(1e-12));
  const double norm = std::sqrt(sq);
  const float a0 = a[0];
  const double coeff = ClipGradsByTotalNorm(ctx, spans, norm, 1.0);
  CHECK(coeff == Approx(1.0 / (norm + 1e-6)));
  CHECK(a[0] == static_cast<float>(a0 * static_cast<float>(coeff)));
  CHECK(std::sqrt(GradNormSquared(ctx, spans)) == Approx(1.0).epsilon(1e-5));
  // Below the threshold nothing changes.
  CHECK(ClipGradsByTotalNorm(ctx, spans, 0.5, 1.0) == 1.0);
  CHECK(ClipGradsByTotalNorm(ctx, spans, NAN, 1.0) == 1.0);
}

}  // namespace
}  // namespace mxmaca::layers
