// layers/gpt_stage_tp_test.cc: tensor (and sequence) parallel GptStage against the
// single-device GptStage. TP ranks run as plain threads (one std::thread per rank) over an
// InProcessHub; every rank runs the same F/B/W sequence on the same micro-batches.
//
// Checked, for TP 2 and 4, with and without sequence parallelism, over LayerNorm + GELU +
// learned positions (tied embeddings, biases, a vocab shard of padding only at TP 4) and
// RMSNorm + SwiGLU + RoPE + GQA (untied, no biases), dropout on, whole model and first /
// middle / last pipeline stages:
//   - token losses, stage outputs and input gradients equal the single-device values
//     within kTol (below); losses are the same bits on every TP rank;
//   - every gradient shard equals the matching slice of the single-device gradient within
//     kTol; gradients of replicated tensors are bit-identical across TP ranks;
//   - inference logits (vocab shards gathered) and eval losses likewise.
//
// Tolerance. TP changes only summation order: the row-parallel linears (and the
// column-parallel input gradients, the output layer's input gradient and the vocab-parallel
// softmax sums) add p partial sums of k/p terms each instead of one k-term sum; with SP the
// norm weight gradients add p partial row sums. Each such dot product then differs by at
// most ~k u sum|terms| (u = 2^-24 ~ 6e-8, k <= 64 here: ~4e-6 relative to the magnitude of
// the terms), typically ~sqrt(k) u. Three layers of forward and backward compound a few
// dozen of these, so we allow kTol = 2e-5 of each tensor's largest magnitude per element
// (max |a - b| <= kTol * max |b|). Measured here: at most 6e-7 (a pre_mlp_layernorm weight
// gradient under SP), so kTol leaves a 30x margin while a wrong slice, a missing
// all-reduce or a wrong dropout mask gives O(1e-2..1) (checked by breaking each once).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include "layers/gpt_stage.h"
#include "layers/tensor_parallel.h"
#include "layers/testing/gpt_test_configs.h"
#include "layers/testing/stage_batches.h"
#include "transport/inprocess_communicator.h"

namespace mxmaca::layers {
namespace {

constexpr double kTol = 2e-5;

GptConfig GeluConfig() {
  // V 70 of V_pad 96: at TP 4 rank 3 holds rows 72..95, padding only.
  return testing::Gpt2StyleConfig({3, 32, 64, 4, 8, 8, 70, 96}, /*seed=*/4321, /*dropout=*/0.1f);
}

GptConfig SwigluConfig() {
  GptConfig c = testing::LlamaStyle(GeluConfig());
  c.num_attention_heads = 8;
  c.num_query_groups = 4;  // GQA, divisible by TP 2 and 4
  c.kv_channels = 8;
  c.vocab_size = 90;
  return c;
}

// Batch: one micro-batch's inputs, plus random hidden / output gradient for stages
// without the embedding / loss head.
struct Batch : testing::StageBatch {
  std::vector<float> hidden, d_output;
};

Batch MakeBatch(const GptConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  Batch bt;
  static_cast<testing::StageBatch&>(bt) = testing::MakeStageBatch(
      rng, c.vocab_size, 2, c.seq_length, {testing::DocumentCuts::kFixed, 2, 3});
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < bt.b * bt.s * c.hidden_size; ++i) {
    bt.hidden.push_back(normal(rng));
    bt.d_output.push_back(1e-2f * normal(rng));
  }
  return bt;
}

// SeqSlice: rank r's rows [b, s/p, w] of a full [b, s, w] (the whole tensor when !sp).
std::vector<float> SeqSlice(const std::vector<float>& full, int64_t b, int64_t s, int64_t w, int r,
                            int p, bool sp) {
  if (!sp || full.empty()) return full;
  const int64_t sl = s / p;
  std::vector<float> out;
  for (int64_t bi = 0; bi < b; ++bi) {
    const float* src = full.data() + (bi * s + r * sl) * w;
    out.insert(out.end(), src, src + sl * w);
  }
  return out;
}

// RankResult: what one rank (or the single device) produced.
struct RankResult {
  std::string error;
  std::vector<std::vector<float>> token_losses, hidden, d_input;  // per micro-batch
  std::vector<float> logits, eval_losses;                         // inference / eval, mb 0
  std::unique_ptr<GptStage> stage;                                // params and grads
};

// Run: Create + Initialize, then F0 F1 B1 B0 W1 W0 (W out of order: pending gradients),
// then an eval and an inference forward of batch 0. `mutate` may edit the parameters after
// initialisation.
void Run(const GptConfig& c, const StageLayout& layout, const std::vector<Batch>& batches,
         const TensorParallelContext* tp, RankResult* res,
         const std::function<void(GptStage&)>& mutate = nullptr) {
  auto created = GptStage::Create(c, layout, 16, tp);
  if (!created.ok()) {
    res->error = created.status().ToString();
    return;
  }
  res->stage = std::move(*created);
  GptStage& st = *res->stage;
  st.InitializeParameters();
  if (mutate) mutate(st);
  const int r = tp != nullptr ? tp->rank : 0, p = tp != nullptr ? tp->size : 1;
  const bool sp = tp != nullptr && tp->sp();
  const int64_t h = c.hidden_size;
  std::vector<std::vector<float>> hidden_in(batches.size()), d_out(batches.size());
  auto input = [&](size_t m) {
    const Batch& bt = batches[m];
    MicroBatchInput in;
    in.micro_batch_id = static_cast<int64_t>(m);
    in.iteration = 3;
    in.micro_batch_size = bt.b;
    in.seq_length = bt.s;
    in.tokens = bt.tokens;
    in.position_ids = bt.positions;
    in.doc_start = bt.doc_start;
    in.labels = bt.labels;
    in.loss_mask = bt.mask;
    in.hidden = hidden_in[m];
    return in;
  };
  auto fail = [&](const absl::Status& s, const char* what) {
    if (s.ok()) return false;
    res->error = std::string(what) + ": " + s.ToString();
    return true;
  };
  std::vector<double> tokens(batches.size(), 1.0);
  for (size_t m = 0; m < batches.size(); ++m) {
    hidden_in[m] = SeqSlice(batches[m].hidden, batches[m].b, batches[m].s, h, r, p, sp);
    d_out[m] = SeqSlice(batches[m].d_output, batches[m].b, batches[m].s, h, r, p, sp);
    StageOutput out;
    if (fail(st.Forward(input(m), &out), "Forward")) return;
    res->token_losses.push_back(out.token_losses);
    res->hidden.push_back(out.hidden);
    if (layout.has_loss_head) tokens[m] = out.num_tokens;
  }
  res->d_input.resize(batches.size());
  for (size_t m = batches.size(); m-- > 0;) {
    const float scale = static_cast<float>(1.0 / tokens[m]);
    if (fail(st.BackwardInput(m, d_out[m], scale, &res->d_input[m]), "BackwardInput")) return;
  }
  for (size_t m = batches.size(); m-- > 0;) {
    if (fail(st.BackwardWeight(m), "BackwardWeight")) return;
  }
  StageOutput eval, inference;
  if (fail(st.EvalForward(input(0), &eval), "EvalForward")) return;
  res->eval_losses = eval.token_losses;
  if (fail(st.InferenceForward(input(0), &inference), "InferenceForward")) return;
  res->logits = inference.logits;
}

// RunTp: the TP ranks of one stage on threads.
std::vector<RankResult> RunTp(const GptConfig& c, const StageLayout& layout,
                              const std::vector<Batch>& batches, int p, bool sp,
                              const std::function<void(GptStage&)>& mutate = nullptr) {
  transport::InProcessHub hub(p);
  std::vector<RankResult> results(p);
  std::vector<TensorParallelContext> ctx(p);
  std::vector<std::thread> threads;
  // The TP group of a (tp = p) rank grid, as the runtime builds it.
  auto grid = transport::RankGrid::Create(p, p, 1);
  REQUIRE(grid.ok());
  for (int r = 0; r < p; ++r) {
    auto view = grid->ForRank(r);
    REQUIRE(view.ok());
    ctx[r] = TensorParallelContextFor(*view, hub.ForRank(r), sp);
    ctx[r].timeout = absl::Seconds(60);
    threads.emplace_back([&, r] { Run(c, layout, batches, &ctx[r], &results[r], mutate); });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

// Close: max |a - b| <= kTol * max |b| (and equal sizes); prints the worst element.
bool Close(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  if (a.size() != b.size()) {
    UNSCOPED_INFO(what << ": size " << a.size() << " vs " << b.size());
    return false;
  }
  double scale = 0, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < b.size(); ++i) scale = std::max(scale, std::abs(double(b[i])));
  for (size_t i = 0; i < b.size(); ++i) {
    const double d = std::abs(double(a[i]) - double(b[i]));
    if (d > worst) worst = d, at = i;
  }
  if (worst <= kTol * scale) return true;
  UNSCOPED_INFO(what << ": element " << at << " " << a[at] << " vs " << b[at] << " (max |ref| "
                     << scale << ")");
  return false;
}

// ExpectedShard: the slice of the single-device tensor `full` (of `info`'s full shape)
// that `info`'s shard holds.
std::vector<float> ExpectedShard(const ParameterInfo& info, const float* full) {
  std::vector<float> out(info.numel);
  for (int64_t e = 0; e < info.numel; ++e) out[e] = full[info.FullIndex(e)];
  return out;
}

// CompareWithSingle: everything each TP rank produced against the single device.
// `mutate` edits the parameters of every run (single and TP) after initialisation.
void CompareWithSingle(const GptConfig& c, const StageLayout& layout,
                       const std::vector<Batch>& batches, int p, bool sp,
                       const std::function<void(GptStage&)>& mutate = nullptr) {
  RankResult single;
  Run(c, layout, batches, nullptr, &single, mutate);
  REQUIRE(single.error.empty());
  std::vector<RankResult> ranks = RunTp(c, layout, batches, p, sp, mutate);
  const int64_t h = c.hidden_size;
  for (int r = 0; r < p; ++r) {
    INFO("TP rank " << r << " of " << p << (sp ? " with SP" : ""));
    REQUIRE(ranks[r].error.empty());
    const ParameterStore& got = ranks[r].stage->parameters();
    const ParameterStore& want = single.stage->parameters();
    REQUIRE(got.size() == want.size());
    for (size_t m = 0; m < batches.size(); ++m) {
      const Batch& bt = batches[m];
      CHECK(Close(ranks[r].token_losses[m], single.token_losses[m], "token losses"));
      CHECK(ranks[r].token_losses[m] == ranks[0].token_losses[m]);
      CHECK(Close(ranks[r].hidden[m], SeqSlice(single.hidden[m], bt.b, bt.s, h, r, p, sp),
                  "stage output"));
      CHECK(Close(ranks[r].d_input[m], SeqSlice(single.d_input[m], bt.b, bt.s, h, r, p, sp),
                  "input gradient"));
    }
    CHECK(Close(ranks[r].eval_losses, single.eval_losses, "eval losses"));
    CHECK(Close(ranks[r].logits, single.logits, "inference logits"));
    for (int i = 0; i < got.size(); ++i) {
      const ParameterInfo& info = got.info(i);
      REQUIRE(info.spec.name == want.info(i).spec.name);
      INFO(info.spec.name);
      // Initial values: the slice of the single-device tensor, bit for bit.
      CHECK(ExpectedShard(info, want.param(i)) ==
            std::vector<float>(got.param(i), got.param(i) + info.numel));
      const std::vector<float> g(got.grad(i), got.grad(i) + info.numel);
      CHECK(Close(g, ExpectedShard(info, want.grad(i)), "gradient " + info.spec.name));
      if (info.is_whole()) {
        // Replicated: the same bits on every rank.
        const ParameterStore& rank0 = ranks[0].stage->parameters();
        CHECK(std::memcmp(got.grad(i), rank0.grad(i), info.numel * sizeof(float)) == 0);
      }
    }
  }
  // Grad norm: squares of the tensors CountsTowardGradNorm keeps, summed over the TP ranks,
  // give the single-device sum (each element within kTol of its tensor's max; 1e-4
  // relative on the fp64 sum of squares is 2.5x the 2 kTol an element can move it).
  double single_sq = 0, tp_sq = 0;
  const ParameterStore& want = single.stage->parameters();
  for (int i = 0; i < want.size(); ++i) {
    for (int64_t e = 0; e < want.info(i).numel; ++e)
      single_sq += double(want.grad(i)[e]) * want.grad(i)[e];
  }
  for (int r = 0; r < p; ++r) {
    const ParameterStore& got = ranks[r].stage->parameters();
    for (int i = 0; i < got.size(); ++i) {
      if (!CountsTowardGradNorm(got.info(i), r)) continue;
      for (int64_t e = 0; e < got.info(i).numel; ++e)
        tp_sq += double(got.grad(i)[e]) * got.grad(i)[e];
    }
  }
  CHECK(single_sq > 0);
  CHECK(std::abs(tp_sq - single_sq) <= 1e-4 * single_sq);
}

std::vector<Batch> Batches(const GptConfig& c) { return {MakeBatch(c, 5), MakeBatch(c, 6)}; }

TEST_CASE("TP stage matches single device: LayerNorm, GELU, learned positions, tied") {
  const GptConfig c = GeluConfig();
  const auto batches = Batches(c);
  const StageLayout whole{0, c.num_layers, true, true};
  for (int p : {2, 4}) {
    for (bool sp : {false, true}) {
      INFO("p " << p << " sp " << sp);
      CompareWithSingle(c, whole, batches, p, sp);
    }
  }
}

TEST_CASE("TP stage matches single device: RMSNorm, SwiGLU, RoPE, GQA, untied") {
  const GptConfig c = SwigluConfig();
  const auto batches = Batches(c);
  const StageLayout whole{0, c.num_layers, true, true};
  for (int p : {2, 4}) {
    for (bool sp : {false, true}) {
      INFO("p " << p << " sp " << sp);
      CompareWithSingle(c, whole, batches, p, sp);
    }
  }
}

// SetByFullIndex: every tensor whose name ends in `suffix` gets value(full element index)
// at each of its (shard's) elements, so single-device and TP runs hold the same values.
std::function<void(GptStage&)> SetByFullIndex(const std::string& suffix,
                                              std::function<float(int64_t)> value) {
  return [suffix, value](GptStage& st) {
    ParameterStore& store = st.parameters();
    for (int i = 0; i < store.size(); ++i) {
      const ParameterInfo& info = store.info(i);
      const std::string& n = info.spec.name;
      if (n.size() < suffix.size() || n.compare(n.size() - suffix.size(), suffix.size(), suffix))
        continue;
      for (int64_t e = 0; e < info.numel; ++e) store.param(i)[e] = value(info.FullIndex(e));
    }
  };
}

TEST_CASE("TP stage matches single device: --add-qkv-bias without other biases (Qwen2)") {
  GptConfig c = SwigluConfig();
  c.add_qkv_bias = true;  // add_bias_linear stays false
  const auto batches = Batches(c);
  // Non-zero biases (they start at 0), different per row, so a wrong row split of the
  // column-parallel bias (rows grouped per query group, like the weight) changes q, k, v.
  const auto bias = SetByFullIndex("self_attention.linear_qkv.bias",
                                   [](int64_t e) { return 0.05f * std::sin(0.7f * e + 0.3f); });
  for (int p : {2, 4}) {
    for (bool sp : {false, true}) {
      INFO("p " << p << " sp " << sp);
      CompareWithSingle(c, {0, c.num_layers, true, true}, batches, p, sp, bias);
    }
  }
  auto created = GptStage::Create(c, {0, c.num_layers, true, true});
  REQUIRE(created.ok());
  const ParameterStore& store = (*created)->parameters();
  int qkv_biases = 0, other_biases = 0;
  for (int i = 0; i < store.size(); ++i) {
    const std::string& n = store.info(i).spec.name;
    if (n.find("linear_qkv.bias") != std::string::npos) {
      ++qkv_biases;
      CHECK(store.info(i).spec.shape == std::vector<int64_t>{c.qkv_size()});
    } else if (n.find("linear") != std::string::npos && n.find(".bias") != std::string::npos) {
      ++other_biases;
    }
  }
  CHECK(qkv_biases == c.num_layers);
  CHECK(other_biases == 0);
}

TEST_CASE("TP stage matches single device: --apply-layernorm-1p, LayerNorm and RMSNorm") {
  // Non-zero stored weights (they start at 0), so 1 + w differs per element.
  const auto norms = SetByFullIndex("layernorm.weight",
                                    [](int64_t e) { return 0.2f * std::sin(1.3f * e + 0.1f); });
  for (GptConfig c : {GeluConfig(), SwigluConfig()}) {
    c.apply_layernorm_1p = true;
    const auto batches = Batches(c);
    for (int p : {2, 4}) {
      for (bool sp : {false, true}) {
        INFO("p " << p << " sp " << sp << " swiglu " << c.swiglu);
        CompareWithSingle(c, {0, c.num_layers, true, true}, batches, p, sp, norms);
      }
    }
    auto created = GptStage::Create(c, {0, c.num_layers, true, true});
    REQUIRE(created.ok());
    (*created)->InitializeParameters();
    const ParameterStore& store = (*created)->parameters();
    int zero_norms = 0;
    for (int i = 0; i < store.size(); ++i) {
      if (store.info(i).spec.name.find("layernorm.weight") == std::string::npos) continue;
      const float* w = store.param(i);
      CHECK(std::all_of(w, w + store.info(i).numel, [](float x) { return x == 0.0f; }));
      ++zero_norms;
    }
    CHECK(zero_norms == 2 * c.num_layers + 1);
  }
}

TEST_CASE("TP stage matches single device: --rotary-interleaved") {
  GptConfig c = SwigluConfig();
  c.rotary_interleaved = true;
  const auto batches = Batches(c);
  for (int p : {2, 4}) {
    for (bool sp : {false, true}) {
      INFO("p " << p << " sp " << sp);
      CompareWithSingle(c, {0, c.num_layers, true, true}, batches, p, sp);
    }
  }
}

TEST_CASE("TP stage matches single device: --qk-layernorm, LayerNorm and RMSNorm") {
  // Non-trivial norm weights and biases (they start at 1 / 0): per-element values, so a
  // missing TP sum of the replicated q/k norm gradients or a wrong head shows.
  const auto weights = SetByFullIndex("k_layernorm.weight",
                                      [](int64_t e) { return 1.0f + 0.3f * std::sin(0.9f * e); });
  const auto qw = SetByFullIndex("q_layernorm.weight",
                                 [](int64_t e) { return 1.0f + 0.3f * std::cos(1.1f * e); });
  const auto qb = SetByFullIndex("q_layernorm.bias",
                                 [](int64_t e) { return 0.1f * std::sin(0.5f * e + 1.0f); });
  const auto kb = SetByFullIndex("k_layernorm.bias",
                                 [](int64_t e) { return 0.1f * std::cos(0.6f * e); });
  const std::function<void(GptStage&)> mutate = [&](GptStage& st) {
    weights(st);
    qw(st);
    qb(st);
    kb(st);
  };
  GptConfig ln = GeluConfig();
  ln.position_embedding_type = PositionEmbeddingType::kRope;
  for (GptConfig c : {ln, SwigluConfig()}) {
    c.qk_layernorm = true;
    const auto batches = Batches(c);
    for (int p : {2, 4}) {
      for (bool sp : {false, true}) {
        INFO("p " << p << " sp " << sp << " swiglu " << c.swiglu);
        CompareWithSingle(c, {0, c.num_layers, true, true}, batches, p, sp, mutate);
      }
    }
    auto created = GptStage::Create(c, {0, c.num_layers, true, true});
    REQUIRE(created.ok());
    const ParameterStore& store = (*created)->parameters();
    int qk = 0;
    for (int i = 0; i < store.size(); ++i) {
      const ParameterInfo& info = store.info(i);
      if (info.spec.name.find("self_attention.q_layernorm") == std::string::npos &&
          info.spec.name.find("self_attention.k_layernorm") == std::string::npos)
        continue;
      ++qk;
      CHECK(info.spec.shape == std::vector<int64_t>{c.head_dim()});
    }
    CHECK(qk == c.num_layers * (c.normalization == Normalization::kLayerNorm ? 4 : 2));
  }
  // Recomputation recomputes the norms too.
  GptConfig c = SwigluConfig();
  c.qk_layernorm = true;
  c.recompute_granularity = RecomputeGranularity::kFull;
  c.recompute_num_layers = 2;
  CompareWithSingle(c, {0, c.num_layers, true, true}, Batches(c), 2, true, mutate);
  c.recompute_granularity = RecomputeGranularity::kSelective;
  CompareWithSingle(c, {0, c.num_layers, true, true}, Batches(c), 2, false, mutate);
}

TEST_CASE("TP pipeline stages (first / middle / last) match their single-device stages") {
  for (const GptConfig& c : {GeluConfig(), SwigluConfig()}) {
    const auto batches = Batches(c);
    for (const StageLayout& layout :
         {StageLayout{0, 1, true, false}, StageLayout{1, 2, false, false},
          StageLayout{2, 3, false, true}}) {
      for (bool sp : {false, true}) {
        INFO("layers [" << layout.first_layer << ", " << layout.last_layer << ") sp " << sp
                        << " swiglu " << c.swiglu);
        CompareWithSingle(c, layout, batches, 2, sp);
      }
    }
  }
}

TEST_CASE("TP with full and selective recomputation matches single device") {
  GptConfig c = GeluConfig();
  const auto batches = Batches(c);
  c.recompute_granularity = RecomputeGranularity::kFull;
  c.recompute_num_layers = 2;
  CompareWithSingle(c, {0, c.num_layers, true, true}, batches, 2, true);
  c.recompute_granularity = RecomputeGranularity::kSelective;
  CompareWithSingle(c, {0, c.num_layers, true, true}, batches, 2, false);
}

TEST_CASE("Huge values in the padded output-layer rows change nothing under TP") {
  // Untied: output_layer.weight's rows >= V are padding (the last TP rank's shard). Their
  // logits never enter the softmax and get zero gradient, so losses and every gradient
  // outside those rows are the same bits.
  const GptConfig c = SwigluConfig();  // V 90, VP 96: rank 1 of 2 holds rows 48..95
  const auto batches = Batches(c);
  const StageLayout whole{0, c.num_layers, true, true};
  for (bool sp : {false, true}) {
    std::vector<RankResult> plain = RunTp(c, whole, batches, 2, sp);
    std::vector<RankResult> huge = RunTp(c, whole, batches, 2, sp, [&](GptStage& st) {
      const int id = st.parameter_ids().output_weight;
      const ParameterInfo& info = st.parameters().info(id);
      float* w = st.parameters().param(id);
      for (int64_t row = 0; row < info.shard_shape[0]; ++row) {
        if (info.shard_offset[0] + row < c.vocab_size) continue;
        for (int64_t k = 0; k < c.hidden_size; ++k) w[row * c.hidden_size + k] = 3e4f;
      }
    });
    for (int r = 0; r < 2; ++r) {
      REQUIRE(plain[r].error.empty());
      REQUIRE(huge[r].error.empty());
      CHECK(plain[r].token_losses == huge[r].token_losses);
      CHECK(plain[r].eval_losses == huge[r].eval_losses);
      const ParameterStore& a = plain[r].stage->parameters();
      const ParameterStore& b = huge[r].stage->parameters();
      for (int i = 0; i < a.size(); ++i) {
        INFO(a.info(i).spec.name << " rank " << r);
        CHECK(std::memcmp(a.grad(i), b.grad(i), a.info(i).numel * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("TP input errors are clear") {
  const GptConfig c = GeluConfig();
  const auto batches = Batches(c);
  // Sequence 6 with SP at TP 4: every rank refuses the micro-batch before communicating.
  std::vector<Batch> odd = batches;
  for (Batch& bt : odd) {
    bt.s = 6;
    bt.tokens.resize(bt.b * 6);
    bt.labels.resize(bt.b * 6);
    bt.mask.resize(bt.b * 6);
    bt.positions.assign(bt.b * 6, 0);
    bt.doc_start.assign(bt.b * 6, 0);
  }
  std::vector<RankResult> ranks = RunTp(c, {0, c.num_layers, true, true}, odd, 4, true);
  for (const RankResult& r : ranks) {
    CHECK(r.error.find("seq_length 6 is not divisible by --tensor-model-parallel-size 4") !=
          std::string::npos);
  }
}

}  // namespace
}  // namespace mxmaca::layers
