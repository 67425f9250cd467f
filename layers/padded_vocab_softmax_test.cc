// layers/padded_vocab_softmax_test.cc: GptConfig::softmax_over_padded_vocab (the flag
// --softmax-over-padded-vocab): Megatron's cross-entropy over all V_pad columns, against
// the masked default.
//
// Checked:
//   - TP 1, one stage: with the option every token's eval loss equals an fp64 logsumexp over
//     all V_pad logits minus the label's logit, the logits taken from the stage itself
//     (InferenceForward on each prefix: the last position's [b, V_pad] logits); without it,
//     the fp64 logsumexp over the V real logits. The padded output rows are scaled up so the
//     two differ by far more than the tolerance. The weight gradient of the padded output
//     rows matches a central finite difference of the loss with the option and is exactly 0
//     without it.
//   - TP 2 (ranks as threads, as in gpt_stage_tp_test.cc): with the option the TP-2 losses and
//     gradients equal TP 1's for the same padded size (V_pad of TP 2), and differ from TP 1's
//     own (smaller) padding, i.e. the loss depends on TP as in Megatron; without the option
//     the TP-2 loss equals TP 1's with TP 1's own padding (TP-independent).
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
#include "transport/rank_grid.h"

namespace mxmaca::layers {
namespace {

// V = 70 with --make-vocab-size-divisible-by 16: V_pad 80 at TP 1, 96 at TP 2
// (api/args PaddedVocabSize: a multiple of 16 x TP).
constexpr int64_t kVocab = 70, kPaddedTp1 = 80, kPaddedTp2 = 96;

GptConfig Config(int64_t padded, bool softmax_over_padded_vocab, float dropout) {
  GptConfig c = testing::Gpt2StyleConfig({2, 32, 64, 4, 8, 8, kVocab, padded}, /*seed=*/2024, dropout);
  c.softmax_over_padded_vocab = softmax_over_padded_vocab;
  return c;
}

using Batch = testing::StageBatch;

Batch MakeBatch(uint32_t seed) {
  std::mt19937 rng(seed);
  return testing::MakeStageBatch(rng, kVocab, 2, 8);
}

MicroBatchInput Input(const Batch& bt, int64_t micro_batch_id) {
  return testing::StageInput(bt, micro_batch_id);
}

// ScalePaddedRows: multiplies the output layer's rows >= V (this shard's part of them) by
// `factor`. Initial logits are ~0.02 sqrt(h) ~ 0.1; scaled by 40 the padded ones reach ~5,
// so the padding holds a large share of every softmax when it is included.
void ScalePaddedRows(GptStage& stage, float factor) {
  ParameterStore& store = stage.parameters();
  const int id = stage.parameter_ids().output_weight;
  const ParameterInfo& info = store.info(id);
  const int64_t h = stage.config().hidden_size;
  for (int64_t e = 0; e < info.numel; ++e) {
    if (info.FullIndex(e) / h >= kVocab) store.param(id)[e] *= factor;
  }
}

// MakeStage: the whole model on one stage (TP rank `tp`, or none), initialised, padded
// output rows scaled. Returns errors instead of asserting: TP ranks call it on threads,
// where Catch2's assertions must not run.
absl::StatusOr<std::unique_ptr<GptStage>> MakeStage(const GptConfig& c,
                                                    const TensorParallelContext* tp) {
  auto stage = GptStage::Create(c, StageLayout{0, c.num_layers, true, true}, 16, tp);
  if (!stage.ok()) return stage.status();
  (*stage)->InitializeParameters();
  ScalePaddedRows(**stage, 40.0f);
  return stage;
}

// Fp64TokenLoss: logsumexp over the first `cols` of `logits` minus logits[label], in fp64.
double Fp64TokenLoss(const float* logits, int64_t cols, int32_t label) {
  double m = -INFINITY, sum = 0;
  for (int64_t c = 0; c < cols; ++c) m = std::max(m, double(logits[c]));
  for (int64_t c = 0; c < cols; ++c) sum += std::exp(double(logits[c]) - m);
  return m + std::log(sum) - double(logits[label]);
}

TEST_CASE("softmax_over_padded_vocab: TP 1 losses are the fp64 softmax over V_pad logits",
          "[gpt_stage][padded_vocab]") {
  const Batch bt = MakeBatch(7);
  for (const bool padded : {true, false}) {
    INFO((padded ? "softmax over V_pad" : "masked padding (default)"));
    const GptConfig c = Config(kPaddedTp1, padded, 0.0f);
    auto made = MakeStage(c, nullptr);
    REQUIRE(made.ok());
    std::unique_ptr<GptStage> stage = std::move(*made);
    StageOutput eval;
    REQUIRE(stage->EvalForward(Input(bt, 0), &eval).ok());
    // Position k's logits: InferenceForward on the prefix of length k + 1 (causal, so the
    // same function of tokens [0, k]; positions default to 0..k).
    double worst = 0, min_gap = INFINITY;
    for (int64_t k = 0; k < bt.s; ++k) {
      Batch prefix;
      prefix.s = k + 1;
      for (int64_t bi = 0; bi < bt.b; ++bi) {
        prefix.tokens.insert(prefix.tokens.end(), bt.tokens.begin() + bi * bt.s,
                             bt.tokens.begin() + bi * bt.s + k + 1);
      }
      MicroBatchInput in = Input(prefix, 1);
      in.labels = {};
      in.loss_mask = {};
      StageOutput out;
      REQUIRE(stage->InferenceForward(in, &out).ok());
      REQUIRE(static_cast<int64_t>(out.logits.size()) == bt.b * kPaddedTp1);
      for (int64_t bi = 0; bi < bt.b; ++bi) {
        const float* row = out.logits.data() + bi * kPaddedTp1;
        const int32_t label = bt.labels[bi * bt.s + k];
        const double want = Fp64TokenLoss(row, padded ? kPaddedTp1 : kVocab, label);
        worst = std::max(worst, std::abs(eval.token_losses[bi * bt.s + k] - want));
        // How far the other choice is: the padding's share of the softmax.
        const double other = Fp64TokenLoss(row, padded ? kVocab : kPaddedTp1, label);
        min_gap = std::min(min_gap, std::abs(other - want));
      }
    }
    // The eval pass computes all b s rows at once, the prefix passes fewer: the GEMMs and
    // attention may block differently, moving logits of magnitude <~ 10 by a few ulp
    // (1e-6) per layer; the loss (lse - logit) moves by at most twice that. 1e-4 leaves a
    // wide margin and is still >1000x below the padding's effect (min_gap, >= 0.1 here).
    UNSCOPED_INFO("worst |loss - fp64| " << worst << ", smallest padded-vs-masked gap "
                                         << min_gap);
    CHECK(worst < 1e-4);
    CHECK(min_gap > 0.1);
  }
}

TEST_CASE("softmax_over_padded_vocab: padded output rows get the softmax gradient",
          "[gpt_stage][padded_vocab]") {
  const Batch bt = MakeBatch(8);
  for (const bool padded : {true, false}) {
    INFO((padded ? "softmax over V_pad" : "masked padding (default)"));
    const GptConfig c = Config(kPaddedTp1, padded, 0.0f);  // no dropout: eval == train
    auto made = MakeStage(c, nullptr);
    REQUIRE(made.ok());
    std::unique_ptr<GptStage> stage = std::move(*made);
    StageOutput out;
    REQUIRE(stage->Forward(Input(bt, 0), &out).ok());
    std::vector<float> d_input;
    REQUIRE(stage->Backward(0, {}, 1.0f, &d_input).ok());  // d(loss_sum)
    ParameterStore& store = stage->parameters();
    const int id = stage->parameter_ids().output_weight;
    const int64_t h = c.hidden_size, first = kVocab * h, last = kPaddedTp1 * h;
    // Directional derivative of loss_sum along a random direction D on the padded rows.
    std::mt19937 rng(9);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> dir(last - first);
    double analytic = 0, grad_abs = 0;
    for (int64_t e = first; e < last; ++e) {
      dir[e - first] = normal(rng);
      analytic += double(store.grad(id)[e]) * dir[e - first];
      grad_abs += std::abs(store.grad(id)[e]);
    }
    if (!padded) {
      CHECK(grad_abs == 0.0);  // masked columns: exactly zero gradient
      continue;
    }
    const std::vector<float> saved(store.param(id) + first, store.param(id) + last);
    auto loss_at = [&](float step) {
      for (int64_t e = first; e < last; ++e) {
        store.param(id)[e] = saved[e - first] + step * dir[e - first];
      }
      StageOutput ev;
      REQUIRE(stage->EvalForward(Input(bt, 0), &ev).ok());
      return ev.loss_sum;
    };
    // Step 1e-2 along D (|D| ~1 per element, padded weights ~0.8): central-difference
    // truncation O(step^2), measured 6e-5 relative; the fp32 token losses (~16 x ~5 nats,
    // ~3e-7 each) put ~5e-6 on the loss sum, /2e-2 = 2.5e-4 absolute on a derivative of
    // ~36 (~1e-5 relative). 1e-3 relative leaves >10x margin; a missing or wrong padded
    // gradient is off by O(1).
    const double numeric = (loss_at(1e-2f) - loss_at(-1e-2f)) / 2e-2;
    loss_at(0.0f);
    UNSCOPED_INFO("analytic " << analytic << " numeric " << numeric);
    CHECK(std::abs(analytic) > 1.0);
    CHECK(std::abs(analytic - numeric) <= 1e-3 * std::abs(numeric));
  }
}

// ---- TP 2 against TP 1 -----------------------------------------------------------------

struct RunResult {
  std::string error;
  std::vector<float> token_losses, eval_losses;
  std::unique_ptr<GptStage> stage;  // parameters and gradients
};

// Run: Forward, Backward (1 / tokens) and EvalForward of one micro-batch.
void Run(const GptConfig& c, const Batch& bt, const TensorParallelContext* tp, RunResult* res) {
  auto made = MakeStage(c, tp);
  if (!made.ok()) {
    res->error = made.status().ToString();
    return;
  }
  res->stage = std::move(*made);
  StageOutput out, eval;
  absl::Status s = res->stage->Forward(Input(bt, 0), &out);
  std::vector<float> d_input;
  if (s.ok()) {
    s = res->stage->Backward(0, {}, static_cast<float>(1.0 / out.num_tokens), &d_input);
  }
  if (s.ok()) s = res->stage->EvalForward(Input(bt, 0), &eval);
  if (!s.ok()) {
    res->error = s.ToString();
    return;
  }
  res->token_losses = out.token_losses;
  res->eval_losses = eval.token_losses;
}

std::vector<RunResult> RunTp2(const GptConfig& c, const Batch& bt) {
  constexpr int kP = 2;
  transport::InProcessHub hub(kP);
  std::vector<RunResult> results(kP);
  std::vector<TensorParallelContext> ctx(kP);
  auto grid = transport::RankGrid::Create(kP, kP, 1);
  REQUIRE(grid.ok());
  for (int r = 0; r < kP; ++r) {
    auto view = grid->ForRank(r);
    REQUIRE(view.ok());
    ctx[r] = TensorParallelContextFor(*view, hub.ForRank(r), false);
    ctx[r].timeout = absl::Seconds(60);
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < kP; ++r) {
    threads.emplace_back([&, r] { Run(c, bt, &ctx[r], &results[r]); });
  }
  for (std::thread& t : threads) t.join();
  for (const RunResult& r : results) REQUIRE(r.error.empty());
  return results;
}

// MaxAbsDiff: max |a - b| over equal-sized vectors (infinity on a size mismatch).
double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - b[i]));
  return worst;
}

double MaxAbs(const std::vector<float>& a) {
  double m = 0;
  for (float x : a) m = std::max(m, double(std::abs(x)));
  return m;
}

// Tolerance as in gpt_stage_tp_test.cc: TP only changes the order of fp32 sums (row-parallel
// partial sums, the vocab-parallel softmax sums over 2 shards): each element within 2e-5
// of its tensor's largest magnitude (measured there: <= 6e-7).
constexpr double kTol = 2e-5;

// GradientsMatch: every gradient shard of the TP rank equals the slice of the TP-1 gradient.
void CheckGradientsMatch(const GptStage& tp_rank, const GptStage& single) {
  const ParameterStore& got = tp_rank.parameters();
  const ParameterStore& want = single.parameters();
  REQUIRE(got.size() == want.size());
  for (int i = 0; i < got.size(); ++i) {
    const ParameterInfo& info = got.info(i);
    INFO(info.spec.name);
    std::vector<float> g(got.grad(i), got.grad(i) + info.numel), slice(info.numel);
    for (int64_t e = 0; e < info.numel; ++e) slice[e] = want.grad(i)[info.FullIndex(e)];
    CHECK(MaxAbsDiff(g, slice) <= kTol * MaxAbs(slice));
  }
}

TEST_CASE("softmax_over_padded_vocab: TP 2 equals TP 1 at TP 2's padded size",
          "[gpt_stage][padded_vocab][tensor_parallel]") {
  const Batch bt = MakeBatch(10);
  // With the option: the loss is a function of V_pad.
  const GptConfig padded96 = Config(kPaddedTp2, true, 0.1f);
  std::vector<RunResult> tp2 = RunTp2(padded96, bt);
  RunResult tp1_same, tp1_own;
  Run(padded96, bt, nullptr, &tp1_same);
  Run(Config(kPaddedTp1, true, 0.1f), bt, nullptr, &tp1_own);
  REQUIRE(tp1_same.error.empty());
  REQUIRE(tp1_own.error.empty());
  for (int r = 0; r < 2; ++r) {
    INFO("TP rank " << r);
    CHECK(tp2[r].token_losses == tp2[0].token_losses);  // same bits on every TP rank
    CHECK(MaxAbsDiff(tp2[r].token_losses, tp1_same.token_losses) <=
          kTol * MaxAbs(tp1_same.token_losses));
    CHECK(MaxAbsDiff(tp2[r].eval_losses, tp1_same.eval_losses) <=
          kTol * MaxAbs(tp1_same.eval_losses));
    CheckGradientsMatch(*tp2[r].stage, *tp1_same.stage);
  }
  // ... and not of TP 1's own padding: 16 more padded columns of logits ~5 add a visible
  // share to every softmax (>= 1e-2 nats per token here, vs kTol * ~10 = 2e-4).
  for (size_t i = 0; i < tp1_own.token_losses.size(); ++i) {
    CHECK(tp2[0].token_losses[i] - tp1_own.token_losses[i] > 1e-2);
  }

  // Default (masked): TP 2 with V_pad 96 equals TP 1 with its own V_pad 80.
  std::vector<RunResult> masked_tp2 = RunTp2(Config(kPaddedTp2, false, 0.1f), bt);
  RunResult masked_tp1;
  Run(Config(kPaddedTp1, false, 0.1f), bt, nullptr, &masked_tp1);
  REQUIRE(masked_tp1.error.empty());
  for (int r = 0; r < 2; ++r) {
    INFO("masked, TP rank " << r);
    CHECK(MaxAbsDiff(masked_tp2[r].token_losses, masked_tp1.token_losses) <=
          kTol * MaxAbs(masked_tp1.token_losses));
    CHECK(MaxAbsDiff(masked_tp2[r].eval_losses, masked_tp1.eval_losses) <=
          kTol * MaxAbs(masked_tp1.eval_losses));
  }
  // The option changes the loss where the default does not see the padding at all.
  for (size_t i = 0; i < masked_tp1.token_losses.size(); ++i) {
    CHECK(tp1_own.token_losses[i] - masked_tp1.token_losses[i] > 1e-2);
  }
}

}  // namespace
}  // namespace mxmaca::layers
