// layers/stage_memory_tp_test.cc: StashBytesPerMicroBatchTp against what TP ranks'
// GptStages really stash (StashBytes after Forward, before Backward), for TP 2 and 4,
// with and without sequence parallelism, over norms, biases, SwiGLU, GQA, recomputation,
// stage positions, tied/untied heads and --reset-attention-mask. TP ranks run as threads
// over an InProcessHub (the layers' TP collectives block), as gpt_stage_tp_test does.
#include "layers/stage_memory_tp.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "layers/gpt_stage.h"
#include "layers/stage_memory.h"
#include "layers/tensor_parallel.h"
#include "layers/testing/gpt_test_configs.h"
#include "transport/inprocess_communicator.h"
#include "transport/rank_grid.h"

namespace mxmaca::layers {
namespace {

// Heads, groups, ffn, padded vocab and seq_length divisible by 4.
GptConfig Base() {
  return testing::Gpt2StyleConfig({4, 32, 40, 4, 12, 16, 90, 96}, /*seed=*/4321, /*dropout=*/0.1f);
}

GptConfig Modern() {
  GptConfig c = testing::LlamaStyle(Base());
  c.num_attention_heads = 8;
  c.num_query_groups = 4;
  c.kv_channels = 6;
  return c;
}

// Modern: RMSNorm, no biases, SwiGLU, GQA (8 heads, 4 groups), RoPE, untied, kv_channels
// != h / np.

struct Case {
  std::string name;
  GptConfig config;
  StageLayout layout;
  int64_t micro_batch_size;
  bool reset_attention_mask = false;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  const StageLayout whole{0, 4, true, true}, first{0, 2, true, false}, middle{1, 3, false, false},
      last{3, 4, false, true};
  cases.push_back({"LayerNorm, whole model", Base(), whole, 2});
  cases.push_back({"LayerNorm, first stage", Base(), first, 1});
  cases.push_back({"LayerNorm, middle stage", Base(), middle, 2});
  cases.push_back({"LayerNorm, last stage (tied copy)", Base(), last, 2});
  cases.push_back({"modern, whole model", Modern(), whole, 2});
  cases.push_back({"modern, middle stage", Modern(), middle, 1});
  cases.push_back({"modern, last stage", Modern(), last, 2});
  GptConfig uniform = Base();
  uniform.recompute_granularity = RecomputeGranularity::kFull;
  uniform.recompute_method = RecomputeMethod::kUniform;
  uniform.recompute_num_layers = 3;
  cases.push_back({"full uniform r=3", uniform, whole, 2});
  GptConfig block = Modern();
  block.recompute_granularity = RecomputeGranularity::kFull;
  block.recompute_method = RecomputeMethod::kBlock;
  block.recompute_num_layers = 1;
  cases.push_back({"full block r=1, middle", block, middle, 2});
  GptConfig selective = Modern();
  selective.recompute_granularity = RecomputeGranularity::kSelective;
  cases.push_back({"selective modern, whole model", selective, whole, 2});
  cases.push_back({"reset attention mask, first", Base(), first, 2, true});
  cases.push_back({"empty stage with both", Base(), StageLayout{0, 0, true, true}, 2});
  return cases;
}

struct Inputs {
  std::vector<int32_t> tokens, labels, doc_start;
  std::vector<float> mask, hidden;  // hidden: the full [b, s, h]
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

// RankStash: what one TP rank's stage held after two Forwards.
struct RankStash {
  std::string error;
  std::vector<int64_t> stash_bytes;  // per micro-batch
  int64_t live = 0;
};

// RunRank: TP rank `tp.rank` of the case: Create, Initialize, Forward micro-batches 7, 8.
void RunRank(const Case& k, const std::vector<Inputs>& inputs, const TensorParallelContext& tp,
             RankStash* out) {
  auto stage = GptStage::Create(k.config, k.layout, 16, &tp);
  if (!stage.ok()) {
    out->error = stage.status().ToString();
    return;
  }
  (*stage)->InitializeParameters();
  const int64_t b = k.micro_batch_size, s = k.config.seq_length, h = k.config.hidden_size;
  for (size_t m = 0; m < inputs.size(); ++m) {
    const Inputs& in = inputs[m];
    // The stage input's rows on this rank: [b, s/p, h] with SP.
    std::vector<float> hidden;
    const int64_t sl = tp.sp() ? s / tp.size : s, first = tp.sp() ? tp.rank * sl : 0;
    for (int64_t bi = 0; bi < b; ++bi) {
      const float* src = in.hidden.data() + (bi * s + first) * h;
      hidden.insert(hidden.end(), src, src + sl * h);
    }
    MicroBatchInput mb;
    mb.micro_batch_id = 7 + static_cast<int64_t>(m);
    mb.iteration = 3;
    mb.micro_batch_size = b;
    mb.seq_length = s;
    if (k.layout.has_embedding) {
      mb.tokens = in.tokens;
    } else {
      mb.hidden = hidden;
    }
    if (k.layout.has_loss_head) {
      mb.labels = in.labels;
      mb.loss_mask = in.mask;
    }
    if (k.reset_attention_mask) mb.doc_start = in.doc_start;
    StageOutput so;
    const absl::Status st = (*stage)->Forward(mb, &so);
    if (!st.ok()) {
      out->error = st.ToString();
      return;
    }
    absl::StatusOr<int64_t> bytes = (*stage)->StashBytes(mb.micro_batch_id);
    if (!bytes.ok()) {
      out->error = bytes.status().ToString();
      return;
    }
    out->stash_bytes.push_back(*bytes);
  }
  out->live = (*stage)->live_activation_bytes();
}

TEST_CASE("StashBytesPerMicroBatchTp equals a TP rank's GptStage::StashBytes", "[memory][tp]") {
  uint32_t seed = 1;
  for (const Case& k : Cases()) {
    // TP 1: the unsplit formula.
    CHECK(StashBytesPerMicroBatchTp(k.config, k.layout, k.micro_batch_size, 1, true,
                                    k.reset_attention_mask) ==
          StashBytesPerMicroBatch(k.config, k.layout, k.micro_batch_size, k.reset_attention_mask));
    const std::vector<Inputs> inputs = {MakeInputs(k.config, k.micro_batch_size, seed),
                                        MakeInputs(k.config, k.micro_batch_size, seed + 1)};
    seed += 2;
    for (int p : {2, 4}) {
      for (bool sp : {false, true}) {
        INFO(k.name << ", TP " << p << (sp ? " with SP" : ""));
        const int64_t want = StashBytesPerMicroBatchTp(k.config, k.layout, k.micro_batch_size, p,
                                                       sp, k.reset_attention_mask);
        transport::InProcessHub hub(p);
        auto grid = transport::RankGrid::Create(p, p, 1);
        REQUIRE(grid.ok());
        std::vector<TensorParallelContext> ctx(p);
        std::vector<RankStash> got(p);
        std::vector<std::thread> threads;
        for (int r = 0; r < p; ++r) {
          auto view = grid->ForRank(r);
          REQUIRE(view.ok());
          ctx[r] = TensorParallelContextFor(*view, hub.ForRank(r), sp);
          ctx[r].timeout = absl::Seconds(60);
        }
        for (int r = 0; r < p; ++r) {
          threads.emplace_back([&, r] { RunRank(k, inputs, ctx[r], &got[r]); });
        }
        for (std::thread& t : threads) t.join();
        for (int r = 0; r < p; ++r) {
          INFO("TP rank " << r);
          REQUIRE(got[r].error.empty());
          REQUIRE(got[r].stash_bytes.size() == 2);
          CHECK(got[r].stash_bytes[0] == want);
          CHECK(got[r].stash_bytes[1] == want);
          CHECK(got[r].live == 2 * want);
        }
        // SP and TP shrink the stash (a stage with layers; the empty stage holds only
        // full-[b, s] token-sized tensors and logits).
        if (k.layout.num_layers() > 0 &&
            k.config.recompute_granularity != RecomputeGranularity::kFull) {
          CHECK(want < StashBytesPerMicroBatch(k.config, k.layout, k.micro_batch_size,
                                               k.reset_attention_mask));
        }
      }
    }
  }
}

TEST_CASE("StashBytesPerMicroBatchTp on a hand-computed case", "[memory][tp]") {
  // The TP-1 hand case of stage_memory_test (L=2, h=8, f=16, np=ng=2, hn=4, s=4, b=2, T=8,
  // VP=32, LayerNorm, learned positions, GELU, one stage with everything: 8672 bytes) at
  // TP 2 (np/p = ng/p = 1, f/p = 8, VP/p = 16).
  // Without SP (Tl = T = 8), per layer in elements: input, residual2 2 T h = 128;
  //   ln1_out, ln2_out 2 T h = 128; mean+rstd x2 4 T = 32; q = b 1 s hn = 32; k, v = 64;
  //   probs = b 1 s s = 32; context = T 1 hn = 32; fc1_out, act_out = 2 T 8 = 128
  //   -> 576 elements = 2304 bytes; two layers 4608. Embedding: 2 T int32 = 64 bytes.
  //   Head: final_input + lnf_out 2 T h = 128, mean + rstd 2 T = 16, logits T 16 = 128,
  //   lse + loss_mask 16 -> 288 elements = 1152 bytes + labels 32. Total 5856.
  // With SP (Tl = 4): per layer input, residual2 = 64; stats 4 Tl = 16; the rest as above
  //   -> 496 elements = 1984 bytes; two layers 3968. Head: final_input Tl h = 32 + lnf_out
  //   64 + stats 2 Tl = 8 + 128 + 16 = 248 elements = 992 + 32. Total 3968 + 64 + 1024 = 5056.
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
  CHECK(StashBytesPerMicroBatchTp(c, whole, 2, 1, false) == 8672);
  CHECK(StashBytesPerMicroBatchTp(c, whole, 2, 2, false) == 5856);
  CHECK(StashBytesPerMicroBatchTp(c, whole, 2, 2, true) == 5056);
}

}  // namespace
}  // namespace mxmaca::layers
