// layers/gpt_stage_test.cc: F/B/W bookkeeping of GptStage — separation, interleaving,
// recomputation, pipeline split, bf16, eval/inference paths and input errors. Correctness
// of the gradients against PyTorch is tests/parity/.
#include "layers/gpt_stage.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "layers/testing/gpt_test_configs.h"
#include "layers/testing/stage_batches.h"

namespace mxmaca::layers {
namespace {

GptConfig TinyConfig() { return testing::TinyGptConfig(); }

GptConfig RopeConfig() { return testing::TinyLlamaConfig(); }

// Batch: fresh random tokens/labels/mask with one document boundary per row (at 3 + 2r,
// positions restarting there).
using Batch = testing::StageBatch;

Batch MakeBatch(const GptConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  return testing::MakeStageBatch(rng, c.vocab_size, 2, c.seq_length,
                                 {testing::DocumentCuts::kFixed, 3, 2});
}

MicroBatchInput Input(const Batch& bt, int64_t mb, int64_t iteration = 1) {
  return testing::StageInput(bt, mb, iteration);
}

std::unique_ptr<GptStage> MakeStage(const GptConfig& c, StageLayout layout = {0, -1, true, true}) {
  if (layout.last_layer < 0) layout.last_layer = c.num_layers;
  auto stage = GptStage::Create(c, layout);
  REQUIRE(stage.ok());
  (*stage)->InitializeParameters();
  return std::move(*stage);
}

std::vector<float> Grads(GptStage& stage) {
  absl::Span<float> g = stage.parameters().grads_arena();
  return std::vector<float>(g.begin(), g.end());
}

using testing::BitEqual;

double MaxAbs(const std::vector<float>& a) {
  double m = 0;
  for (float x : a) m = std::max(m, std::abs(double(x)));
  return m;
}

// Runs F, B, W of each batch in sequence; returns the grads and sum of losses.
std::vector<float> Sequential(GptStage& stage, const std::vector<Batch>& batches,
                              double* loss = nullptr) {
  double total = 0;
  for (size_t m = 0; m < batches.size(); ++m) {
    StageOutput out;
    REQUIRE(stage.Forward(Input(batches[m], m), &out).ok());
    total += out.loss_sum;
    REQUIRE(stage.BackwardInput(m, {}, 1.0f / out.num_tokens, nullptr).ok());
    REQUIRE(stage.BackwardWeight(m).ok());
  }
  if (loss != nullptr) *loss = total;
  return Grads(stage);
}

TEST_CASE("Separate B and W give the same bits as the fused backward") {
  for (const GptConfig& c : {TinyConfig(), RopeConfig()}) {
    std::vector<Batch> batches = {MakeBatch(c, 1), MakeBatch(c, 2)};
    auto a = MakeStage(c);
    auto b = MakeStage(c);
    const std::vector<float> ga = Sequential(*a, batches);
    for (size_t m = 0; m < batches.size(); ++m) {
      StageOutput out;
      REQUIRE(b->Forward(Input(batches[m], m), &out).ok());
      REQUIRE(b->Backward(m, {}, 1.0f / out.num_tokens, nullptr).ok());
    }
    CHECK(MaxAbs(ga) > 0);
    CHECK(BitEqual(ga, Grads(*b)));
    CHECK(b->num_stashes() == 0);
    CHECK(b->live_activation_bytes() == 0);
  }
}

TEST_CASE("A MoE layer's stash counts in the stage's live and peak activation bytes") {
  GptConfig c = TinyConfig();
  auto moe = std::make_shared<moe::MoELayerConfig>();
  moe->router.hidden_size = c.hidden_size;
  moe->router.num_experts = 4;
  moe->router.topk = 2;
  moe->expert.hidden_size = c.hidden_size;
  moe->expert.ffn_hidden_size = 40;
  moe->num_layers = c.num_layers;
  c.moe = moe;
  c.moe_layers = {true, false, true};
  GptConfig dense = c;
  dense.moe = nullptr;
  dense.moe_layers.clear();
  const Batch bt = MakeBatch(c, 5);
  auto with_moe = MakeStage(c);
  auto without = MakeStage(dense);
  StageOutput out_moe, out_dense;
  REQUIRE(with_moe->Forward(Input(bt, 0), &out_moe).ok());
  REQUIRE(without->Forward(Input(bt, 0), &out_dense).ok());
  // A MoE layer keeps at least the permuted rows and the expert outputs, [T k, h] each
  // (T = 24 tokens, k = 2), where the dense MLP keeps fc1_out [T, f1] and act_out [T, f]:
  // with the MoE stash charged, the MoE stage holds more than the dense one by at least
  // 2 layers x (2 [T k, h] - ([T, f1] + [T, f])) floats.
  const int64_t t = bt.b * bt.s, h = c.hidden_size, f = c.ffn_hidden_size;
  const int64_t floor = 2 * (2 * t * 2 * h - 2 * t * f) * 4;
  CHECK(with_moe->live_activation_bytes() - without->live_activation_bytes() >= floor);
  REQUIRE(with_moe->BackwardInput(0, {}, 1.0f / out_moe.num_tokens, nullptr).ok());
  CHECK(with_moe->peak_activation_bytes() >= with_moe->live_activation_bytes());
  REQUIRE(with_moe->BackwardWeight(0).ok());
  CHECK(with_moe->live_activation_bytes() == 0);  // W released the MoE stash's charge too
}

TEST_CASE("Interleaved F/B/W accumulate bit-identically to sequential order") {
  const GptConfig c = RopeConfig();
  std::vector<Batch> batches = {MakeBatch(c, 11), MakeBatch(c, 12), MakeBatch(c, 13)};
  auto seq = MakeStage(c);
  const std::vector<float> want = Sequential(*seq, batches);

  auto st = MakeStage(c);
  std::vector<double> tokens(3);
  for (int m = 0; m < 3; ++m) {
    StageOutput out;
    REQUIRE(st->Forward(Input(batches[m], m), &out).ok());
    tokens[m] = out.num_tokens;
  }
  CHECK(st->num_stashes() == 3);
  for (int m : {1, 0, 2}) REQUIRE(st->BackwardInput(m, {}, 1.0f / tokens[m], nullptr).ok());
  // W out of order: 2 and 1 wait (pending) until 0 lands.
  REQUIRE(st->BackwardWeight(2).ok());
  REQUIRE(st->BackwardWeight(1).ok());
  CHECK(st->num_stashes() == 3);  // 1 and 2 hold pending gradients
  REQUIRE(st->BackwardWeight(0).ok());
  CHECK(st->num_stashes() == 0);
  CHECK(st->live_activation_bytes() == 0);
  CHECK(BitEqual(want, Grads(*st)));

  // Fused backward out of order (2, 0, 1), mixed with a separate B/W.
  auto fused = MakeStage(c);
  for (int m = 0; m < 3; ++m) {
    StageOutput out;
    REQUIRE(fused->Forward(Input(batches[m], m), &out).ok());
  }
  REQUIRE(fused->Backward(2, {}, 1.0f / tokens[2], nullptr).ok());
  REQUIRE(fused->BackwardInput(0, {}, 1.0f / tokens[0], nullptr).ok());
  REQUIRE(fused->Backward(1, {}, 1.0f / tokens[1], nullptr).ok());
  CHECK(fused->num_stashes() == 3);
  REQUIRE(fused->BackwardWeight(0).ok());
  CHECK(fused->num_stashes() == 0);
  CHECK(BitEqual(want, Grads(*fused)));
}

TEST_CASE("Any order of B and W calls accumulates the same bits (random schedules)") {
  GptConfig c = TinyConfig();
  c.num_layers = 2;
  std::vector<Batch> batches;
  for (uint32_t m = 0; m < 4; ++m) batches.push_back(MakeBatch(c, 100 + m));
  auto seq = MakeStage(c);
  const std::vector<float> want = Sequential(*seq, batches);
  std::mt19937 rng(9);
  for (int trial = 0; trial < 4; ++trial) {
    auto st = MakeStage(c);
    std::vector<double> tokens(4);
    for (int m = 0; m < 4; ++m) {
      StageOutput out;
      REQUIRE(st->Forward(Input(batches[m], m), &out).ok());
      tokens[m] = out.num_tokens;
    }
    // A random interleaving of the 8 ops B0..B3, W0..W3 with each W after its B.
    std::vector<int> b_done(4, 0), w_done(4, 0);
    int remaining = 8;
    while (remaining > 0) {
      const int m = static_cast<int>(rng() % 4);
      if (!b_done[m]) {
        REQUIRE(st->BackwardInput(m, {}, 1.0f / tokens[m], nullptr).ok());
        b_done[m] = 1;
        --remaining;
      } else if (!w_done[m]) {
        REQUIRE(st->BackwardWeight(m).ok());
        w_done[m] = 1;
        --remaining;
      }
    }
    CHECK(st->num_stashes() == 0);
    CHECK(BitEqual(want, Grads(*st)));
  }
}

TEST_CASE("Recomputation gives bit-identical gradients and lowers peak stash bytes") {
  GptConfig base = TinyConfig();
  base.num_layers = 4;
  std::vector<Batch> batches = {MakeBatch(base, 21), MakeBatch(base, 22), MakeBatch(base, 23),
                                MakeBatch(base, 24)};
  // Four micro-batches in flight (as the first stage of a 1F1B pipeline with 4 stages).
  auto run = [&](const GptConfig& c, int64_t* peak, double* loss) {
    auto st = MakeStage(c);
    std::vector<double> tokens;
    *loss = 0;
    for (size_t m = 0; m < batches.size(); ++m) {
      StageOutput out;
      REQUIRE(st->Forward(Input(batches[m], m), &out).ok());
      tokens.push_back(out.num_tokens);
      *loss += out.loss_sum;
    }
    for (size_t m = 0; m < batches.size(); ++m) {
      REQUIRE(st->Backward(m, {}, 1.0f / tokens[m], nullptr).ok());
    }
    *peak = st->peak_activation_bytes();
    return Grads(*st);
  };
  int64_t peak_none, peak;
  double loss_none, loss;
  const std::vector<float> want = run(base, &peak_none, &loss_none);
  struct Case {
    const char* name;
    RecomputeGranularity g;
    RecomputeMethod m;
    int64_t n;
  };
  for (const Case& k :
       {Case{"selective", RecomputeGranularity::kSelective, RecomputeMethod::kUniform, 1},
        Case{"full uniform 1", RecomputeGranularity::kFull, RecomputeMethod::kUniform, 1},
        Case{"full uniform 2", RecomputeGranularity::kFull, RecomputeMethod::kUniform, 2},
        Case{"full block 2", RecomputeGranularity::kFull, RecomputeMethod::kBlock, 2}}) {
    GptConfig c = base;
    c.recompute_granularity = k.g;
    c.recompute_method = k.m;
    c.recompute_num_layers = k.n;
    const std::vector<float> got = run(c, &peak, &loss);
    INFO(k.name << ": peak " << peak << " vs " << peak_none);
    std::printf("peak stash bytes, 4 micro-batches in flight: %-15s %8lld (none: %8lld, %.2fx)\n",
                k.name, static_cast<long long>(peak), static_cast<long long>(peak_none),
                double(peak) / double(peak_none));
    CHECK(loss == loss_none);
    CHECK(BitEqual(want, got));
    CHECK(peak < peak_none);
    if (k.g == RecomputeGranularity::kFull && k.m == RecomputeMethod::kUniform) {
      // Only chunk inputs, the head and small per-token tensors stay: well under half.
      CHECK(peak < peak_none / 2);
    }
  }
}

TEST_CASE("Two pipeline stages reproduce the single stage bit for bit") {
  GptConfig c = RopeConfig();  // untied: every tensor lives on exactly one stage
  std::vector<Batch> batches = {MakeBatch(c, 31), MakeBatch(c, 32)};
  auto single = MakeStage(c);
  double want_loss;
  Sequential(*single, batches, &want_loss);

  auto s0 = MakeStage(c, {0, 1, true, false});
  auto s1 = MakeStage(c, {1, 3, false, true});
  double loss = 0;
  for (size_t m = 0; m < batches.size(); ++m) {
    MicroBatchInput in = Input(batches[m], m);
    StageOutput o0, o1;
    REQUIRE(s0->Forward(in, &o0).ok());
    REQUIRE(o0.hidden.size() == size_t(batches[m].b * batches[m].s * c.hidden_size));
    in.hidden = o0.hidden;
    REQUIRE(s1->Forward(in, &o1).ok());
    loss += o1.loss_sum;
    std::vector<float> d;
    REQUIRE(s1->BackwardInput(m, {}, 1.0f / o1.num_tokens, &d).ok());
    REQUIRE(s1->BackwardWeight(m).ok());
    REQUIRE(s0->Backward(m, d, 0.0f, nullptr).ok());
  }
  CHECK(loss == want_loss);
  for (GptStage* part : {s0.get(), s1.get()}) {
    for (int i = 0; i < part->parameters().size(); ++i) {
      const ParameterInfo& info = part->parameters().info(i);
      const int j = *single->parameters().Index(info.spec.name);
      INFO(info.spec.name);
      CHECK(std::memcmp(part->parameters().grad(i), single->parameters().grad(j), info.numel * 4) ==
            0);
    }
  }
}

TEST_CASE(
    "Tied embeddings split over two stages: the two copies' gradients sum to the single stage's") {
  GptConfig c = TinyConfig();
  c.hidden_dropout = 0;
  c.attention_dropout = 0;
  const std::vector<Batch> batches = {MakeBatch(c, 35)};
  auto single = MakeStage(c);
  Sequential(*single, batches);
  auto s0 = MakeStage(c, {0, 2, true, false});
  auto s1 = MakeStage(c, {2, 3, false, true});
  const int w0 = *s0->parameters().Index("embedding.word_embeddings.weight");
  const int w1 = *s1->parameters().Index("embedding.word_embeddings.weight");
  CHECK(s1->parameters().info(w1).spec.tied);
  // Same initial values on both stages (a function of the name).
  CHECK(std::memcmp(s0->parameters().param(w0), s1->parameters().param(w1),
                    s0->parameters().info(w0).numel * 4) == 0);
  MicroBatchInput in = Input(batches[0], 0);
  StageOutput o0, o1;
  REQUIRE(s0->Forward(in, &o0).ok());
  in.hidden = o0.hidden;
  REQUIRE(s1->Forward(in, &o1).ok());
  std::vector<float> d;
  REQUIRE(s1->Backward(0, {}, 1.0f / o1.num_tokens, &d).ok());
  REQUIRE(s0->Backward(0, d, 0.0f, nullptr).ok());
  const int ws = *single->parameters().Index("embedding.word_embeddings.weight");
  const int64_t n = single->parameters().info(ws).numel;
  double num = 0, den = 0;
  for (int64_t e = 0; e < n; ++e) {
    const double sum = double(s0->parameters().grad(w0)[e]) + s1->parameters().grad(w1)[e];
    const double want = single->parameters().grad(ws)[e];
    num += (sum - want) * (sum - want);
    den += want * want;
  }
  // Only the order of fp32 additions differs (a row's output-layer part plus its
  // embedding contributions, grouped differently): a few ulps, norm-wise < 1e-6.
  CHECK(den > 0);
  CHECK(std::sqrt(num / den) < 1e-6);
}

TEST_CASE("Results do not depend on the thread count") {
  GptConfig c = RopeConfig();
  const std::vector<Batch> batches = {MakeBatch(c, 37), MakeBatch(c, 38)};
  auto one = MakeStage(c);
  double l1, l2;
  const std::vector<float> g1 = Sequential(*one, batches, &l1);
  c.num_threads = 2;
  auto two = MakeStage(c);
  const std::vector<float> g2 = Sequential(*two, batches, &l2);
  CHECK(l1 == l2);
  CHECK(BitEqual(g1, g2));
}

TEST_CASE("Uneven pipeline: embedding-only and head-only stages, no position embedding") {
  GptConfig c = TinyConfig();
  c.position_embedding_type = PositionEmbeddingType::kNone;
  c.untie_embeddings_and_output_weights = true;
  const std::vector<Batch> batches = {MakeBatch(c, 39)};
  auto single = MakeStage(c);
  double want;
  Sequential(*single, batches, &want);
  // Stage 0: embedding only; stage 1: all layers; stage 2: loss head only.
  auto s0 = MakeStage(c, {0, 0, true, false});
  auto s1 = MakeStage(c, {0, 3, false, false});
  auto s2 = MakeStage(c, {3, 3, false, true});
  CHECK(s0->parameters().size() == 1);  // word embeddings
  MicroBatchInput in = Input(batches[0], 0);
  StageOutput o0, o1, o2;
  REQUIRE(s0->Forward(in, &o0).ok());
  in.hidden = o0.hidden;
  REQUIRE(s1->Forward(in, &o1).ok());
  in.hidden = o1.hidden;
  REQUIRE(s2->Forward(in, &o2).ok());
  CHECK(o2.loss_sum == want);
  std::vector<float> d2, d1;
  REQUIRE(s2->Backward(0, {}, 1.0f / o2.num_tokens, &d2).ok());
  REQUIRE(s1->Backward(0, d2, 0.0f, &d1).ok());
  REQUIRE(s0->Backward(0, d1, 0.0f, nullptr).ok());
  for (GptStage* part : {s0.get(), s1.get(), s2.get()}) {
    for (int i = 0; i < part->parameters().size(); ++i) {
      const ParameterInfo& info = part->parameters().info(i);
      const int j = *single->parameters().Index(info.spec.name);
      INFO(info.spec.name);
      CHECK(std::memcmp(part->parameters().grad(i), single->parameters().grad(j), info.numel * 4) ==
            0);
    }
  }
}

TEST_CASE("Eval and inference paths agree with the training forward without dropout") {
  GptConfig c = TinyConfig();
  c.hidden_dropout = 0;
  c.attention_dropout = 0;
  const Batch bt = MakeBatch(c, 41);
  auto st = MakeStage(c);
  StageOutput train, eval, infer;
  REQUIRE(st->Forward(Input(bt, 0), &train).ok());
  const int64_t live = st->live_activation_bytes(), peak = st->peak_activation_bytes();
  REQUIRE(st->EvalForward(Input(bt, 5), &eval).ok());
  CHECK(eval.loss_sum == train.loss_sum);
  CHECK(st->num_stashes() == 1);
  CHECK(st->live_activation_bytes() == live);  // eval buffers are not training stash
  CHECK(st->peak_activation_bytes() == peak);
  MicroBatchInput in = Input(bt, 6);
  in.labels = {};
  REQUIRE(st->InferenceForward(in, &infer).ok());
  REQUIRE(infer.logits.size() == size_t(bt.b * c.padded_vocab_size));
  // The cross-entropy of the last position from the inference logits (fp64 logsumexp
  // over the real vocab) matches the training forward's per-token loss to fp32 rounding.
  for (int64_t r = 0; r < bt.b; ++r) {
    const float* z = infer.logits.data() + r * c.padded_vocab_size;
    double mx = -1e30, sum = 0;
    for (int64_t v = 0; v < c.vocab_size; ++v) mx = std::max(mx, double(z[v]));
    for (int64_t v = 0; v < c.vocab_size; ++v) sum += std::exp(z[v] - mx);
    const int64_t t = r * bt.s + bt.s - 1;
    const double ce = mx + std::log(sum) - z[bt.labels[t]];
    CHECK(std::abs(ce - train.token_losses[t]) < 1e-5 * std::max(1.0, ce));
  }
}

// Loss of one training micro-batch (dropout on, masks fixed by the key) at the stage's
// current parameters; the stash is released again.
double TrainLoss(GptStage& st, const Batch& bt) {
  StageOutput out;
  REQUIRE(st.Forward(Input(bt, 0), &out).ok());
  REQUIRE(st.Backward(0, {}, 0.0f, nullptr).ok());
  return out.loss_sum / out.num_tokens;
}

TEST_CASE("Gradients with dropout match a central finite difference along a random direction") {
  for (GptConfig c : {TinyConfig(), RopeConfig()}) {
    c.hidden_dropout = 0.2f;
    c.attention_dropout = 0.2f;
    const Batch bt = MakeBatch(c, 81);
    auto st = MakeStage(c);
    StageOutput out;
    REQUIRE(st->Forward(Input(bt, 0), &out).ok());
    REQUIRE(st->Backward(0, {}, static_cast<float>(1.0 / out.num_tokens), nullptr).ok());
    const std::vector<float> g = Grads(*st);
    absl::Span<float> p = st->parameters().params_arena();
    const std::vector<float> p0(p.begin(), p.end());
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    std::vector<float> v(p.size());
    double gv = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      // Aligned with the gradient's signs so that g.v = sum |g_i||n_i| is far above the
      // fp32 noise of the loss difference.
      v[i] = std::abs(normal(rng)) * (g[i] > 0 ? 1.0f : (g[i] < 0 ? -1.0f : 0.0f));
      gv += double(g[i]) * v[i];
    }
    // eps = 1e-4 moves every weight by ~1e-4 along the gradient signs (measured: the
    // O(eps^2) truncation is ~6% at eps = 1e-3, so ~0.06% here); fp32 rounding of the
    // loss (~5e-7 absolute) contributes ~2.5e-3 / |g.v| with |g.v| ~ 100. A mask differing
    // between F and B, or a missing 1/(1-p), changes g.v by O(p) = 20%. Tolerance 5e-3.
    const float eps = 1e-4f;
    for (size_t i = 0; i < v.size(); ++i) p[i] = p0[i] + eps * v[i];
    const double lp = TrainLoss(*st, bt);
    for (size_t i = 0; i < v.size(); ++i) p[i] = p0[i] - eps * v[i];
    const double lm = TrainLoss(*st, bt);
    const double fd = (lp - lm) / (2.0 * eps);
    INFO("swiglu " << c.swiglu << ": g.v " << gv << " finite difference " << fd);
    std::printf("dropout 0.2, %s: g.v %.6f, central difference %.6f, rel. diff %.2e\n",
                c.swiglu ? "rope/rmsnorm/swiglu" : "gpt-2 layout", gv, fd,
                std::abs(fd - gv) / std::abs(gv));
    CHECK(std::abs(fd - gv) < 5e-3 * std::abs(gv));
  }
}

TEST_CASE("Dropout is on in training, reproducible, and keyed by micro-batch id") {
  const GptConfig c = TinyConfig();
  const Batch bt = MakeBatch(c, 51);
  auto st = MakeStage(c);
  StageOutput a, b, d, e;
  REQUIRE(st->Forward(Input(bt, 0), &a).ok());
  REQUIRE(st->Forward(Input(bt, 1), &b).ok());
  REQUIRE(st->EvalForward(Input(bt, 2), &e).ok());
  auto st2 = MakeStage(c);
  REQUIRE(st2->Forward(Input(bt, 0), &d).ok());
  CHECK(a.loss_sum == d.loss_sum);
  CHECK(a.loss_sum != b.loss_sum);
  CHECK(a.loss_sum != e.loss_sum);
}

TEST_CASE("bf16 GEMMs run and stay close to fp32") {
  GptConfig c = RopeConfig();
  c.hidden_dropout = 0;
  c.attention_dropout = 0;
  std::vector<Batch> batches = {MakeBatch(c, 61)};
  auto f32 = MakeStage(c);
  double loss32, loss16;
  const std::vector<float> g32 = Sequential(*f32, batches, &loss32);
  c.precision = kernels::Precision::kBf16;
  auto bf = MakeStage(c);
  const std::vector<float> g16 = Sequential(*bf, batches, &loss16);
  // bf16 keeps 8 significant bits: each GEMM input is rounded by up to 2^-9 ~ 2e-3
  // relative. Gradients (products of a few rounded GEMMs) move by that order norm-wise
  // (measured 2.8e-3); the summed loss averages the independent roundings (measured
  // 1.5e-5). Bounds 2e-2 (gradients, ~7x margin) and 1e-3 (loss: the 2^-9 single-rounding
  // scale, in case roundings correlate on other inputs); a broken bf16 path (wrong layout,
  // truncation to zero) misses them by orders of magnitude.
  CHECK(std::abs(loss16 - loss32) < 1e-3 * std::abs(loss32));
  CHECK(loss16 != loss32);
  double num = 0, den = 0;
  for (size_t i = 0; i < g32.size(); ++i) {
    num += (double(g16[i]) - g32[i]) * (double(g16[i]) - g32[i]);
    den += double(g32[i]) * g32[i];
  }
  INFO("relative grad error " << std::sqrt(num / den));
  std::printf("bf16 vs fp32: loss %.6f vs %.6f (rel %.2e), gradients rel. norm-wise %.2e\n", loss16,
              loss32, std::abs(loss16 - loss32) / std::abs(loss32), std::sqrt(num / den));
  CHECK(std::sqrt(num / den) < 2e-2);
}

TEST_CASE("Bad inputs and out-of-order calls are errors, not crashes") {
  const GptConfig c = TinyConfig();
  Batch bt = MakeBatch(c, 71);
  auto st = MakeStage(c);
  StageOutput out;
  Batch bad = bt;
  bad.tokens[5] = static_cast<int32_t>(c.vocab_size);
  absl::Status s = st->Forward(Input(bad, 0), &out);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message().find("tokens[5]") != std::string::npos);
  bad = bt;
  bad.labels.pop_back();
  CHECK(st->Forward(Input(bad, 0), &out).code() == absl::StatusCode::kInvalidArgument);
  bad = bt;
  bad.doc_start[1] = 2;
  CHECK(st->Forward(Input(bad, 0), &out).code() == absl::StatusCode::kInvalidArgument);
  CHECK(st->num_stashes() == 0);
  CHECK(st->BackwardInput(0, {}, 1.0f, nullptr).code() == absl::StatusCode::kNotFound);
  REQUIRE(st->Forward(Input(bt, 0), &out).ok());
  CHECK(st->Forward(Input(bt, 0), &out).code() == absl::StatusCode::kAlreadyExists);
  CHECK(st->BackwardWeight(0).code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(st->BackwardInput(0, {}, 1.0f, nullptr).ok());
  CHECK(st->BackwardInput(0, {}, 1.0f, nullptr).code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(st->BackwardWeight(0).ok());
  CHECK(st->BackwardWeight(0).code() == absl::StatusCode::kNotFound);
  // A middle stage needs hidden of the right size.
  auto mid = MakeStage(c, {1, 2, false, false});
  MicroBatchInput in = Input(bt, 0);
  in.hidden = std::vector<float>(7);
  CHECK(mid->Forward(in, &out).code() == absl::StatusCode::kInvalidArgument);
  GptConfig wrong = c;
  wrong.num_query_groups = 3;
  CHECK(GptStage::Create(wrong, {0, 3, true, true}).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mxmaca::layers
