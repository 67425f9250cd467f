// tests/integration/context_parallel_stage_test.cc: a whole GPT (embedding, layers, loss
// head) on CP in {2, 4} ranks — one GptStage per CP rank, each on its own thread, the
// ring over an in-process hub — against the same GPT on one rank, on fresh random
// batches with document boundaries (--reset-attention-mask / --reset-position-ids data)
// and hidden dropout 0.1:
// the loss each CP rank reports and the per-tensor gradients summed over the CP ranks
// (what the runtime's data-parallel x context-parallel reduction computes) equal the
// single-rank ones. Also a batch whose loss mask is zero on one CP rank's whole part:
// that rank contributes (0, 0) and the loss is finite and equal to CP = 1's.
//
// Tolerances (fp32): CP changes summation orders only — the attention's softmax is an
// online sum over K/V blocks in ring order instead of one pass over the row, and each
// weight gradient is a sum over CP ranks of partial sums over their tokens (at most
// b s = 32 terms here) instead of one sum — each ~ k 2^-24 relative (k <= 32: ~2e-6)
// per value, which the loss (a mean) does not amplify: 1e-5 relative on the loss. The
// gradients pass through 2 layers of backward (products of such values), so norm-wise per
// tensor they agree to ~1e-6; 1e-4 leaves margin, while a wrong chunk, position or a
// lost or doubled contribution is an O(1) error.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "data/gpt_batch.h"
#include "layers/context_parallel/cp_batch.h"
#include "layers/context_parallel/cp_context.h"
#include "layers/context_parallel/cp_layout.h"
#include "layers/gpt_stage.h"
#include "layers/testing/gpt_test_configs.h"
#include "transport/inprocess_communicator.h"
#include "transport/rank_grid.h"

namespace mxmaca::layers {
namespace {

constexpr int64_t kB = 2, kS = 16;

GptConfig Gpt2Like() {
  GptConfig c = testing::Gpt2StyleConfig({2, 32, 48, 4, kS, kS, 90, 96});
  c.hidden_dropout = 0.1f;  // masks keyed by unsharded positions: the same on any CP layout
  c.attention_dropout = 0.0f;
  return c;
}

GptConfig LlamaLike() {
  GptConfig c = testing::LlamaStyle(Gpt2Like());
  c.num_query_groups = 2;
  return c;
}

// RandomBatch: b samples of s + 1 random tokens with some end-of-document tokens, built
// as the data actor builds them (Megatron's get_batch with the reset flags).
data::GptMicroBatch RandomBatch(const GptConfig& c, std::mt19937& rng) {
  const int32_t eod = static_cast<int32_t>(c.vocab_size) - 1;
  std::uniform_int_distribution<int32_t> tok(0, eod - 1);
  std::vector<int32_t> samples(static_cast<size_t>(kB * (kS + 1)));
  for (int32_t& t : samples) t = (rng() % 7 == 0) ? eod : tok(rng);
  return data::BuildGptMicroBatch(samples, kB, kS, eod, /*eod_mask_loss=*/true,
                                  /*reset_position_ids=*/true, /*reset_attention_mask=*/true);
}

MicroBatchInput InputOf(const data::GptMicroBatch& mb) {
  MicroBatchInput in;
  in.micro_batch_id = 0;
  in.iteration = 1;
  in.micro_batch_size = mb.b;
  in.seq_length = mb.s;
  in.tokens = mb.tokens;
  in.position_ids = mb.position_ids;
  in.doc_start = mb.doc_start;
  in.labels = mb.labels;
  in.loss_mask = mb.loss_mask;
  return in;
}

struct Result {
  double loss_sum = 0.0, tokens = 0.0;
  std::vector<std::vector<float>> grads;  // per tensor (summed over CP ranks)
};

// RunStage: F, B (dL/d(masked loss sum) = 1 / max(1, tokens)) and W of one micro-batch.
absl::Status RunStage(GptStage& stage, const data::GptMicroBatch& mb, double global_tokens,
                      StageOutput* out) {
  absl::Status s = stage.Forward(InputOf(mb), out);
  if (!s.ok()) return s;
  std::vector<float> d_input;
  s = stage.BackwardInput(0, {}, static_cast<float>(1.0 / std::max(1.0, global_tokens)),
                          &d_input);
  if (!s.ok()) return s;
  return stage.BackwardWeight(0);
}

Result Single(const GptConfig& c, const data::GptMicroBatch& mb, double tokens) {
  auto stage = GptStage::Create(c, StageLayout{0, c.num_layers, true, true});
  REQUIRE(stage.ok());
  (*stage)->InitializeParameters();
  StageOutput out;
  const absl::Status s = RunStage(**stage, mb, tokens, &out);
  INFO(s.message());
  REQUIRE(s.ok());
  Result r{out.loss_sum, out.num_tokens, {}};
  const ParameterStore& store = (*stage)->parameters();
  for (int i = 0; i < store.size(); ++i) {
    r.grads.emplace_back(store.grad(i), store.grad(i) + store.info(i).numel);
  }
  return r;
}

Result ContextParallel(const GptConfig& c, int cp, const data::GptMicroBatch& mb,
                       double tokens) {
  transport::InProcessHub hub(cp);
  auto grid = transport::RankGrid::Create(cp, /*tp=*/1, /*pp=*/1, cp);
  REQUIRE(grid.ok());
  auto layout = cp::MakeCpLayout(kS, cp);
  REQUIRE(layout.ok());
  std::vector<std::unique_ptr<GptStage>> stages;
  std::vector<data::GptMicroBatch> slices;
  for (int r = 0; r < cp; ++r) {
    auto view = grid->ForRank(r);
    REQUIRE(view.ok());
    const cp::ContextParallelContext ctx = cp::ContextParallelContextFor(*view, hub.ForRank(r));
    auto stage = GptStage::Create(c, StageLayout{0, c.num_layers, true, true}, 16, nullptr,
                                nullptr, &ctx);
    INFO(stage.status().message());
    REQUIRE(stage.ok());
    (*stage)->InitializeParameters();
    stages.push_back(std::move(*stage));
    auto slice = cp::SliceMicroBatchForCpRank(*layout, r, mb);
    REQUIRE(slice.ok());
    slices.push_back(std::move(*slice));
  }
  std::vector<StageOutput> outs(cp);
  std::vector<absl::Status> status(cp);
  std::vector<std::thread> threads;
  for (int r = 0; r < cp; ++r) {
    threads.emplace_back([&, r] { status[r] = RunStage(*stages[r], slices[r], tokens, &outs[r]); });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < cp; ++r) {
    INFO("CP rank " << r << ": " << status[r].message());
    REQUIRE(status[r].ok());
    // Every CP rank reports the CP-summed loss.
    CHECK(outs[r].loss_sum == outs[0].loss_sum);
    CHECK(outs[r].num_tokens == outs[0].num_tokens);
  }
  Result res{outs[0].loss_sum, outs[0].num_tokens, {}};
  const ParameterStore& s0 = stages[0]->parameters();
  for (int i = 0; i < s0.size(); ++i) {
    std::vector<float> sum(static_cast<size_t>(s0.info(i).numel), 0.0f);
    for (int r = 0; r < cp; ++r) {
      const float* g = stages[r]->parameters().grad(i);
      for (size_t k = 0; k < sum.size(); ++k) sum[k] += g[k];
    }
    res.grads.push_back(std::move(sum));
  }
  return res;
}

void CheckSame(const Result& ref, const Result& got) {
  CHECK(got.tokens == ref.tokens);
  REQUIRE(std::isfinite(got.loss_sum));
  const double loss_ref = ref.loss_sum / std::max(1.0, ref.tokens);
  const double loss = got.loss_sum / std::max(1.0, got.tokens);
  CHECK(std::fabs(loss - loss_ref) <= 1e-5 * std::fabs(loss_ref));
  REQUIRE(got.grads.size() == ref.grads.size());
  for (size_t i = 0; i < ref.grads.size(); ++i) {
    INFO("tensor " << i);
    double diff = 0.0, norm = 0.0;
    for (size_t k = 0; k < ref.grads[i].size(); ++k) {
      const double d = double(got.grads[i][k]) - ref.grads[i][k];
      diff += d * d;
      norm += double(ref.grads[i][k]) * ref.grads[i][k];
    }
    CHECK(std::sqrt(diff) <= 1e-4 * std::sqrt(norm) + 1e-12);
  }
}

TEST_CASE("a GPT on CP {2,4} ranks: the loss and the CP-summed gradients of one rank") {
  std::mt19937 rng(std::random_device{}());
  for (const GptConfig& base : {LlamaLike(), Gpt2Like()}) {
    GptConfig c = base;
    c.seed = 1 + rng() % 100000;
    const data::GptMicroBatch mb = RandomBatch(c, rng);
    double tokens = 0.0;
    for (float m : mb.loss_mask) tokens += m;
    const Result ref = Single(c, mb, tokens);
    REQUIRE(ref.loss_sum > 0.0);
    for (int cp : {2, 4}) {
      INFO((c.swiglu ? "llama-like" : "gpt2-like") << ", CP " << cp);
      CheckSame(ref, ContextParallel(c, cp, mb, tokens));
    }
  }
}

TEST_CASE("a CP rank whose tokens are all masked contributes zero, not NaN") {
  std::mt19937 rng(std::random_device{}());
  GptConfig c = LlamaLike();
  c.seed = 1 + rng() % 100000;
  for (int cp : {2, 4}) {
    INFO("CP " << cp);
    data::GptMicroBatch mb = RandomBatch(c, rng);
    // Zero the loss mask on CP rank 1's two chunks (of every row).
    auto layout = cp::MakeCpLayout(kS, cp);
    REQUIRE(layout.ok());
    for (int64_t bi = 0; bi < kB; ++bi) {
      for (int64_t t = 0; t < layout->LocalSeq(); ++t) {
        mb.loss_mask[static_cast<size_t>(bi * kS + layout->GlobalPosition(1, t))] = 0.0f;
      }
    }
    auto slice = cp::SliceMicroBatchForCpRank(*layout, 1, mb);
    REQUIRE(slice.ok());
    for (float m : slice->loss_mask) REQUIRE(m == 0.0f);
    double tokens = 0.0;
    for (float m : mb.loss_mask) tokens += m;
    REQUIRE(tokens > 0.0);
    const Result ref = Single(c, mb, tokens);
    CheckSame(ref, ContextParallel(c, cp, mb, tokens));
  }
}

TEST_CASE("GptStage rejects a CP split that does not fit, naming the flags") {
  GptConfig c = LlamaLike();
  transport::InProcessHub hub(3);
  auto grid = transport::RankGrid::Create(3, 1, 1, 3);
  REQUIRE(grid.ok());
  auto view = grid->ForRank(0);
  REQUIRE(view.ok());
  const cp::ContextParallelContext ctx = cp::ContextParallelContextFor(*view, hub.ForRank(0));
  auto stage = GptStage::Create(c, StageLayout{0, c.num_layers, true, true}, 16, nullptr,
                                nullptr, &ctx);
  REQUIRE_FALSE(stage.ok());
  CHECK(std::string(stage.status().message()).find("--context-parallel-size 3") !=
        std::string::npos);
  c.seq_length = 12;
  c.max_position_embeddings = 12;
  c.attention_dropout = 0.1f;
  stage = GptStage::Create(c, StageLayout{0, c.num_layers, true, true}, 16, nullptr, nullptr,
                           &ctx);
  REQUIRE_FALSE(stage.ok());
  CHECK(std::string(stage.status().message()).find("--attention-dropout 0") !=
        std::string::npos);
}

}  // namespace
}  // namespace mxmaca::layers
