// layers/stage_memory_test.cc: StashBytesPerMicroBatch against what GptStage really
// stashes (StashBytes after Forward, before Backward) over norms, biases, SwiGLU, GQA,
// recomputation, stage positions and tied/untied heads; CountStageParameters against the
// ParameterStore; EstimateStageMemory / FormatStageMemory arithmetic.
#include "layers/stage_memory.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "layers/gpt_stage.h"
#include "layers/testing/gpt_test_configs.h"

namespace mxmaca::layers {
namespace {

GptConfig Base() {
  return testing::Gpt2StyleConfig({5, 32, 40, 4, 12, 16, 90, 96}, /*seed=*/4321, /*dropout=*/0.1f);
}

GptConfig Modern() {
  GptConfig c = testing::LlamaStyle(Base());
  c.num_query_groups = 2;
  c.kv_channels = 6;
  return c;
}

// Modern: RMSNorm, no biases, SwiGLU, GQA, RoPE, untied, kv_channels != h / np.

struct Case {
  std::string name;
  GptConfig config;
  StageLayout layout;
  int64_t micro_batch_size;
  bool reset_attention_mask = false;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  const StageLayout whole{0, 5, true, true}, first{0, 2, true, false}, middle{2, 4, false, false},
      last{4, 5, false, true};
  cases.push_back({"LayerNorm, whole model", Base(), whole, 2});
  cases.push_back({"LayerNorm, first stage", Base(), first, 3});
  cases.push_back({"LayerNorm, middle stage", Base(), middle, 2});
  cases.push_back({"LayerNorm, last stage (tied copy)", Base(), last, 1});
  GptConfig no_dropout = Base();
  no_dropout.hidden_dropout = 0.0f;
  no_dropout.attention_dropout = 0.0f;
  cases.push_back({"no dropout, whole model", no_dropout, whole, 2});
  GptConfig gelu_tanh = Base();
  gelu_tanh.gelu_tanh_approximation = true;
  gelu_tanh.untie_embeddings_and_output_weights = true;
  cases.push_back({"untied, tanh GELU, last stage", gelu_tanh, last, 2});
  cases.push_back({"modern, whole model", Modern(), whole, 2});
  cases.push_back({"modern, first stage", Modern(), first, 2});
  cases.push_back({"modern, middle stage", Modern(), middle, 3});
  cases.push_back({"modern, last stage", Modern(), last, 2});
  GptConfig ln_gqa_nobias = Base();
  ln_gqa_nobias.num_query_groups = 1;
  ln_gqa_nobias.add_bias_linear = false;
  ln_gqa_nobias.position_embedding_type = PositionEmbeddingType::kNone;
  cases.push_back({"LayerNorm, MQA, no bias, no positions, first", ln_gqa_nobias, first, 2});
  for (int64_t r : {1, 2, 3, 9}) {
    GptConfig uniform = Base();
    uniform.recompute_granularity = RecomputeGranularity::kFull;
    uniform.recompute_method = RecomputeMethod::kUniform;
    uniform.recompute_num_layers = r;
    cases.push_back({"full uniform r=" + std::to_string(r), uniform, whole, 2});
    GptConfig block = Modern();
    block.recompute_granularity = RecomputeGranularity::kFull;
    block.recompute_method = RecomputeMethod::kBlock;
    block.recompute_num_layers = r;
    cases.push_back({"full block r=" + std::to_string(r) + ", stage [1, 4)", block,
                     StageLayout{1, 4, false, false}, 2});
  }
  GptConfig selective = Base();
  selective.recompute_granularity = RecomputeGranularity::kSelective;
  cases.push_back({"selective, last stage", selective, last, 2});
  cases.push_back({"selective, whole model", selective, whole, 1});
  GptConfig selective_modern = Modern();
  selective_modern.recompute_granularity = RecomputeGranularity::kSelective;
  cases.push_back({"selective modern, first stage", selective_modern, first, 2});
  cases.push_back({"reset attention mask, whole model", Base(), whole, 2, true});
  cases.push_back({"reset attention mask, middle", Modern(), middle, 2, true});
  // Empty stages (Megatron's layouts allow them).
  cases.push_back({"empty stage with the embedding", Base(), StageLayout{0, 0, true, false}, 2});
  cases.push_back({"empty stage with the loss head", Modern(), StageLayout{5, 5, false, true}, 2});
  cases.push_back({"empty stage with both", Base(), StageLayout{0, 0, true, true}, 2});
  GptConfig bf16 = Modern();
  bf16.precision = kernels::Precision::kBf16;
  cases.push_back({"bf16 GEMMs, whole model (stash stays fp32)", bf16, whole, 2});
  // The chunked loss head (T = 24 > 10 tokens per chunk): no logits in the stash.
  GptConfig chunked = Modern();
  chunked.loss_chunk_tokens = 10;
  chunked.loss_chunk_min_logits_bytes = 0;
  cases.push_back({"chunked loss head, whole model", chunked, whole, 2});
  return cases;
}

// Inputs: fresh random tokens, labels, mask, hidden and one document break per row.
struct Inputs {
  std::vector<int32_t> tokens, labels, doc_start;
  std::vector<float> mask, hidden;
};

Inputs MakeInputs(const GptConfig& c, int64_t b, uint32_t seed) {
  Inputs in;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(c.vocab_size) - 1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t s = c.seq_length, t = b * s;
  for (int64_t i = 0; i < t; ++i) {
    in.tokens.push_back(tok(rng));
    in.labels.push_back(tok(rng));
    in.mask.push_back(rng() % 4 == 0 ? 0.0f : 1.0f);
    const int64_t cut = 1 + (i / s) % (s - 1);
    in.doc_start.push_back(i % s >= cut ? static_cast<int32_t>(cut) : 0);
  }
  for (int64_t i = 0; i < t * c.hidden_size; ++i) in.hidden.push_back(normal(rng));
  return in;
}

MicroBatchInput Input(const Case& k, const Inputs& in, int64_t id) {
  MicroBatchInput m;
  m.micro_batch_id = id;
  m.iteration = 3;
  m.micro_batch_size = k.micro_batch_size;
  m.seq_length = k.config.seq_length;
  if (k.layout.has_embedding) {
    m.tokens = in.tokens;
  } else {
    m.hidden = in.hidden;
  }
  if (k.layout.has_loss_head) {
    m.labels = in.labels;
    m.loss_mask = in.mask;
  }
  if (k.reset_attention_mask) m.doc_start = in.doc_start;
  return m;
}

TEST_CASE("StashBytesPerMicroBatch equals GptStage::StashBytes after Forward", "[memory]") {
  uint32_t seed = 1;
  for (const Case& k : Cases()) {
    INFO(k.name);
    absl::StatusOr<std::unique_ptr<GptStage>> stage = GptStage::Create(k.config, k.layout);
    INFO(stage.status().ToString());
    REQUIRE(stage.ok());
    (*stage)->InitializeParameters();
    const int64_t want =
        StashBytesPerMicroBatch(k.config, k.layout, k.micro_batch_size, k.reset_attention_mask);
    // Two micro-batches in flight: each stash alone equals the formula, and together
    // they are all the stage holds.
    for (int64_t id : {7, 8}) {
      const Inputs in = MakeInputs(k.config, k.micro_batch_size, seed++);
      StageOutput out;
      const absl::Status st = (*stage)->Forward(Input(k, in, id), &out);
      INFO(st.ToString());
      REQUIRE(st.ok());
      absl::StatusOr<int64_t> got = (*stage)->StashBytes(id);
      REQUIRE(got.ok());
      CHECK(*got == want);
    }
    CHECK((*stage)->live_activation_bytes() == 2 * want);
    // CountStageParameters against the registered tensors.
    CHECK(CountStageParameters(k.config, k.layout) == (*stage)->parameters().num_elements());
  }
}

TEST_CASE("StashBytesPerMicroBatch on a hand-computed case", "[memory]") {
  // L=2, h=8, f=16, np=ng=2, hn=4, s=4, b=2 (T=8), VP=32, LayerNorm, learned positions,
  // GELU, no recomputation, one stage with everything. Elements per layer:
  //   4 T h = 256; LayerNorm mean+rstd x2 = 4 T = 32; q = b np s hn = 64; k, v = 128;
  //   probs = b np s s = 64; context = T np hn = 64; fc1_out, act_out = 2 T f = 256
  //   -> 864 elements = 3456 bytes; two layers 6912 bytes.
  // Embedding: tokens + positions = 2 T int32 = 64 bytes.
  // Head: final_input + lnf_out 2 T h = 128, mean + rstd 2 T = 16, logits T VP = 256,
  //   lse + loss_mask 2 T = 16 -> 416 elements = 1664 bytes, + labels T int32 = 32 bytes.
  // Total 6912 + 64 + 1696 = 8672 bytes.
  GptConfig c;
  c.num_layers = 2;
  c.hidden_size = 8;
  c.ffn_hidden_size = 16;
  c.num_attention_heads = 2;
  c.seq_length = 4;
  c.max_position_embeddings = 4;
  c.vocab_size = 30;
  c.padded_vocab_size = 32;
  const StageLayout whole{0, 2, true, true};
  CHECK(StashBytesPerMicroBatch(c, whole, 2) == 8672);
  // The same through GptStage.
  Case k{"hand", c, whole, 2};
  auto stage = GptStage::Create(c, whole);
  REQUIRE(stage.ok());
  (*stage)->InitializeParameters();
  const Inputs in = MakeInputs(c, 2, 99);
  StageOutput out;
  REQUIRE((*stage)->Forward(Input(k, in, 0), &out).ok());
  CHECK(*(*stage)->StashBytes(0) == 8672);
}

TEST_CASE("EstimateStageMemory arithmetic", "[memory]") {
  const GptConfig c = Base();
  const StageLayout middle{2, 4, false, false};
  const int64_t stash = StashBytesPerMicroBatch(c, middle, 2);
  REQUIRE(stash > 0);
  // 1001 parameters: 4004 bytes each for parameters and gradients; AdamW's two fp32 states:
  // 8008 bytes, or with the distributed optimizer over dp=4, ceil(1001 / 4) = 251
  // parameters' worth = 2008 bytes.
  const StageMemoryEstimate plain = EstimateStageMemory(c, middle, 1001, 2, 3, 4, false);
  CHECK(plain.parameter_bytes == 4004);
  CHECK(plain.gradient_bytes == 4004);
  CHECK(plain.optimizer_bytes == 8008);
  CHECK(plain.activation_bytes == 3 * stash);
  CHECK(plain.stashed_microbatches == 3);
  CHECK(plain.total() == 4004 + 4004 + 8008 + 3 * stash);
  const StageMemoryEstimate dist = EstimateStageMemory(c, middle, 1001, 2, 3, 4, true);
  CHECK(dist.optimizer_bytes == 2008);
  CHECK(dist.parameter_bytes == 4004);
  // dp = 1 with the distributed optimizer: nothing to shard.
  CHECK(EstimateStageMemory(c, middle, 1001, 2, 3, 1, true).optimizer_bytes == 8008);
  // A rank's chunks add up.
  const StageMemoryEstimate sum = plain + dist;
  CHECK(sum.optimizer_bytes == 8008 + 2008);
  CHECK(sum.stashed_microbatches == 6);
  CHECK(sum.total() == plain.total() + dist.total());
}

TEST_CASE("FormatStageMemory prints MB of 2^20 bytes on one line", "[memory]") {
  StageMemoryEstimate e;
  e.parameter_bytes = 3 << 20;         // 3.00 MB
  e.gradient_bytes = 3 << 20;          // 3.00 MB
  e.optimizer_bytes = 3 << 19;         // 1.50 MB
  e.activation_bytes = (5 << 20) / 4;  // 1.25 MB
  e.stashed_microbatches = 4;
  const std::string line = FormatStageMemory(2, 2, e);
  CHECK(line ==
        "pipeline rank 2 (2 chunks): parameters 3.00 MB, gradients 3.00 MB, optimizer 1.50 MB, "
        "activations 1.25 MB (4 micro-batches stashed), total 8.75 MB");
  CHECK(line.find('\n') == std::string::npos);
  e.stashed_microbatches = 1;
  CHECK(FormatStageMemory(0, 1, e).find("pipeline rank 0 (1 chunk): ") == 0);
  CHECK(FormatStageMemory(0, 1, e).find("(1 micro-batch stashed)") != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::layers
