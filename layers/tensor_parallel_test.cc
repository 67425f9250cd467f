// layers/tensor_parallel_test.cc: the pieces of tensor parallelism — the per-rank shards of
// every GPT tensor (reassembled they are the single-device tensors, bit for bit), shard
// boxes for checkpoints, the region mappings run on threads against plain loops, the
// blocking wait's timeout, the grad-norm counting rule and the configuration errors.
// The stage-level parity with the single device is gpt_stage_tp_test.cc.
#include "layers/tensor_parallel.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "layers/gpt_parameters.h"
#include "layers/gpt_stage.h"
#include "layers/testing/gpt_test_configs.h"
#include "transport/inprocess_communicator.h"

namespace mxmaca::layers {
namespace {

GptConfig GeluConfig() { return testing::Gpt2StyleConfig({2, 16, 32, 4, 8, 8, 50, 64}); }

GptConfig SwigluConfig() {
  GptConfig c = testing::LlamaStyle(GeluConfig());
  c.add_bias_linear = true;  // Llama's architecture with biases: the bias shards are tested too
  c.num_attention_heads = 8;
  c.num_query_groups = 4;
  c.kv_channels = 4;
  return c;
}

TensorParallelContext Context(transport::InProcessHub* hub, int r, int p, bool sp = false) {
  TensorParallelContext tp;
  tp.comm = hub->ForRank(r);
  tp.group.kind = transport::GroupKind::kTensorModelParallel;
  for (int i = 0; i < p; ++i) tp.group.ranks.push_back(i);
  tp.group.rank_in_group = r;
  tp.rank = r;
  tp.size = p;
  tp.sequence_parallel = sp;
  tp.timeout = absl::Seconds(30);
  return tp;
}

// OnThreads: f(rank) on p threads; returns each rank's status.
std::vector<absl::Status> OnThreads(int p, const std::function<absl::Status(int)>& f) {
  std::vector<absl::Status> status(p);
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) threads.emplace_back([&, r] { status[r] = f(r); });
  for (std::thread& t : threads) t.join();
  return status;
}

TEST_CASE("TP shards of every GPT tensor reassemble the single-device tensors") {
  for (const GptConfig& c : {GeluConfig(), SwigluConfig()}) {
    const StageLayout whole{0, c.num_layers, true, true};
    ParameterStore single;
    REQUIRE(RegisterGptParameters(c, whole, &single).ok());
    single.Finalize();
    single.Initialize(c.seed);
    for (int p : {2, 4}) {
      std::vector<std::unique_ptr<ParameterStore>> ranks;
      for (int r = 0; r < p; ++r) {
        ranks.push_back(std::make_unique<ParameterStore>());
        REQUIRE(RegisterGptParameters(c, whole, ranks.back().get(), r, p).ok());
        ranks.back()->Finalize();
        ranks.back()->Initialize(c.seed);
      }
      for (int i = 0; i < single.size(); ++i) {
        const ParameterInfo& full = single.info(i);
        INFO(full.spec.name << " p " << p);
        std::vector<float> assembled(full.numel, 0.0f);
        std::vector<int> hits(full.numel, 0);
        for (int r = 0; r < p; ++r) {
          const ParameterInfo& info = ranks[r]->info(i);
          REQUIRE(info.spec.name == full.spec.name);
          CHECK(info.spec.shape == full.spec.shape);
          for (int64_t e = 0; e < info.numel; ++e) {
            const int64_t g = info.FullIndex(e);
            REQUIRE(g >= 0);
            REQUIRE(g < full.numel);
            assembled[g] = ranks[r]->param(i)[e];
            ++hits[g];
          }
          if (!info.is_whole()) CHECK(info.numel * p == full.numel);
        }
        // Split tensors: each element on exactly one rank; replicated: on all of them.
        const int want_hits = ranks[0]->info(i).is_whole() ? p : 1;
        CHECK(std::count(hits.begin(), hits.end(), want_hits) == full.numel);
        CHECK(std::vector<float>(single.param(i), single.param(i) + full.numel) == assembled);
      }
    }
  }
}

TEST_CASE("Megatron's split: qkv by query groups, SwiGLU gate and up, vocab rows") {
  const GptConfig c = SwigluConfig();  // np 8, ng 4, hn 4: a group is (2 + 2) x 4 = 16 rows
  ParameterStore store;
  const int r = 1, p = 2;
  auto ids = RegisterGptParameters(c, {0, 1, true, true}, &store, r, p);
  REQUIRE(ids.ok());
  const ParameterInfo& qkv = store.info(ids->layers[0].qkv_weight);
  CHECK(qkv.shard_offset == std::vector<int64_t>{32, 0});  // groups 2 and 3
  CHECK(qkv.shard_shape == std::vector<int64_t>{32, 16});
  const ParameterInfo& fc1 = store.info(ids->layers[0].fc1_weight);
  CHECK(fc1.shard_chunks == 2);
  CHECK(fc1.shard_shape == std::vector<int64_t>{32, 16});  // 16 gate rows + 16 up rows
  CHECK(fc1.FullIndex(0) == 16 * 16);                      // gate row 16
  CHECK(fc1.FullIndex(16 * 16) == (32 + 16) * 16);         // up row 16 (full row 48)
  std::vector<ShardBox> boxes = ShardBoxes(fc1);
  REQUIRE(boxes.size() == 2);
  CHECK(boxes[0].offset == std::vector<int64_t>{16, 0});
  CHECK(boxes[1].offset == std::vector<int64_t>{48, 0});
  CHECK(boxes[1].shape == std::vector<int64_t>{16, 16});
  CHECK(boxes[1].local_offset == 16 * 16);
  const ParameterInfo& proj = store.info(ids->layers[0].proj_weight);
  CHECK(proj.shard_offset == std::vector<int64_t>{0, 16});  // columns np hn / 2 ..
  const ParameterInfo& fc2 = store.info(ids->layers[0].fc2_weight);
  CHECK(fc2.shard_offset == std::vector<int64_t>{0, 16});
  const ParameterInfo& out = store.info(ids->output_weight);
  CHECK(out.shard_offset == std::vector<int64_t>{32, 0});
  CHECK(store.info(ids->final_norm_weight).is_whole());
  // Every box element is where FullIndex says.
  for (const ParameterInfo* info : {&qkv, &fc1, &proj, &out}) {
    for (const ShardBox& box : ShardBoxes(*info)) {
      const int64_t rows = box.shape[0], cols = box.shape[1];
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          const int64_t full = (box.offset[0] + i) * info->spec.shape[1] + box.offset[1] + j;
          REQUIRE(info->FullIndex(box.local_offset + i * cols + j) == full);
        }
      }
    }
  }
}

TEST_CASE("RegisterShard refuses shards that do not fit") {
  ParameterStore store;
  const ParameterSpec spec{"w", {8, 4}};
  CHECK(store.RegisterShard(spec, {0}, {8, 4}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(store.RegisterShard(spec, {6, 0}, {4, 4}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(store.RegisterShard(spec, {0, 0}, {3, 4}, 2).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(store.RegisterShard(spec, {3, 0}, {4, 4}, 2).status().code() ==
        absl::StatusCode::kInvalidArgument);  // 2 rows per chunk from row 3 pass row 4
  CHECK(store.RegisterShard(spec, {2, 0}, {4, 4}, 2).ok());
}

TEST_CASE("Sequence and tensor region mappings match plain loops") {
  const int64_t b = 3, s = 8, w = 5;
  for (int p : {2, 4}) {
    INFO("p " << p);
    const int64_t sl = s / p;
    std::mt19937 rng(p);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    // full[r]: rank r's [b, s, w] partial sums; local[r]: rank r's [b, s/p, w] rows.
    std::vector<std::vector<float>> full(p, std::vector<float>(b * s * w)),
        local(p, std::vector<float>(b * sl * w));
    for (int r = 0; r < p; ++r) {
      for (float& x : full[r]) x = u(rng);
      for (float& x : local[r]) x = u(rng);
    }
    transport::InProcessHub hub(p);
    std::vector<std::vector<float>> gathered(p, std::vector<float>(b * s * w)),
        scattered(p, std::vector<float>(b * sl * w)), sliced(p, std::vector<float>(b * sl * w)),
        columns(p, std::vector<float>(b * sl * w * p)), reduced = full;
    auto status = OnThreads(p, [&](int r) -> absl::Status {
      const TensorParallelContext tp = Context(&hub, r, p, true);
      absl::Status st =
          GatherFromSequenceParallelRegion(tp, local[r].data(), b, s, w, gathered[r].data());
      if (!st.ok()) return st;
      st = ReduceScatterToSequenceParallelRegion(tp, full[r].data(), b, s, w, scattered[r].data());
      if (!st.ok()) return st;
      REQUIRE(ScatterToSequenceParallelRegion(tp, full[0].data(), b, s, w, sliced[r].data()).ok());
      st = GatherFromTensorParallelRegion(tp, local[r].data(), b * sl, w, columns[r].data());
      if (!st.ok()) return st;
      return ReduceFromTensorParallelRegion(tp, reduced[r].data(), b * s * w);
    });
    for (int r = 0; r < p; ++r) {
      REQUIRE(status[r].ok());
      for (int64_t bi = 0; bi < b; ++bi) {
        for (int64_t si = 0; si < s; ++si) {
          for (int64_t c = 0; c < w; ++c) {
            const int owner = static_cast<int>(si / sl);
            const int64_t li = (bi * sl + si % sl) * w + c, gi = (bi * s + si) * w + c;
            CHECK(gathered[r][gi] == local[owner][li]);
            float sum = full[0][gi];  // rank order, fp32: the backend's documented order
            for (int q = 1; q < p; ++q) sum += full[q][gi];
            CHECK(reduced[r][gi] == sum);
            if (owner == r) {
              CHECK(scattered[r][li] == sum);
              CHECK(sliced[r][li] == full[0][gi]);
            }
          }
        }
      }
      for (int64_t i = 0; i < b * sl; ++i) {
        for (int q = 0; q < p; ++q) {
          for (int64_t c = 0; c < w; ++c) {
            CHECK(columns[r][(i * p + q) * w + c] == local[q][i * w + c]);
          }
        }
      }
    }
  }
}

TEST_CASE("A TP collective whose peer never posts times out with a report") {
  transport::InProcessHub hub(2);
  TensorParallelContext tp = Context(&hub, 0, 2);
  tp.timeout = absl::Milliseconds(50);
  std::vector<float> x(7, 1.0f);
  const absl::Status st = AllReduceSum(tp, x.data(), 7);
  CHECK(st.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(st.message().find("all_reduce of 7 elements on tensor_model_parallel#0") !=
        absl::string_view::npos);
}

TEST_CASE("Replicated tensors count toward the grad norm on TP rank 0 only") {
  const GptConfig c = GeluConfig();
  for (int r = 0; r < 2; ++r) {
    ParameterStore store;
    auto ids = RegisterGptParameters(c, {0, 1, true, true}, &store, r, 2);
    REQUIRE(ids.ok());
    const LayerParameterIds& l = ids->layers[0];
    for (int id : {l.qkv_weight, l.qkv_bias, l.proj_weight, l.fc1_weight, l.fc1_bias, l.fc2_weight,
                   ids->word_embeddings}) {
      CHECK(CountsTowardGradNorm(store.info(id), r));
    }
    for (int id : {l.input_norm_weight, l.input_norm_bias, l.proj_bias, l.fc2_bias,
                   ids->position_embeddings, ids->final_norm_weight}) {
      CHECK(CountsTowardGradNorm(store.info(id), r) == (r == 0));
    }
  }
}

TEST_CASE("Configs that do not split over TP are refused with the flag named") {
  auto create_error = [](const GptConfig& c, int p, bool sp) -> std::string {
    transport::InProcessHub hub(p);
    const TensorParallelContext tp = Context(&hub, 0, p, sp);
    auto stage = GptStage::Create(c, {0, c.num_layers, true, true}, 16, &tp);
    return stage.ok() ? "" : std::string(stage.status().message());
  };
  GptConfig c = GeluConfig();
  CHECK(create_error(c, 2, true).empty());
  CHECK(create_error(c, 3, false) ==
        "--num-attention-heads 4 is not divisible by --tensor-model-parallel-size 3");
  c = SwigluConfig();
  c.num_query_groups = 2;
  CHECK(create_error(c, 4, false) ==
        "--num-query-groups (query groups) 2 is not divisible by --tensor-model-parallel-size 4");
  c = GeluConfig();
  c.ffn_hidden_size = 30;
  CHECK(create_error(c, 4, false) ==
        "--ffn-hidden-size 30 is not divisible by --tensor-model-parallel-size 4");
  c = GeluConfig();
  c.padded_vocab_size = 62;
  CHECK(create_error(c, 4, false) ==
        "padded vocabulary size 62 is not divisible by --tensor-model-parallel-size 4");
  c = GeluConfig();
  c.seq_length = 6;
  c.max_position_embeddings = 6;
  CHECK(create_error(c, 4, false).empty());  // the sequence is split only under SP
  CHECK(create_error(c, 4, true) ==
        "--seq-length (with --sequence-parallel) 6 is not divisible by "
        "--tensor-model-parallel-size 4");
  // A context without a communicator, or whose group disagrees.
  TensorParallelContext tp;
  tp.size = 2;
  CHECK(GptStage::Create(GeluConfig(), {0, 2, true, true}, 16, &tp).status().code() ==
        absl::StatusCode::kInvalidArgument);
  transport::InProcessHub hub(2);
  tp = Context(&hub, 1, 2);
  tp.group.rank_in_group = 0;
  CHECK(ValidateTensorParallelContext(tp).code() == absl::StatusCode::kInvalidArgument);
  // TP 1 needs no communicator: the single-device path.
  TensorParallelContext one;
  CHECK(GptStage::Create(GeluConfig(), {0, 2, true, true}, 16, &one).ok());
}

}  // namespace
}  // namespace mxmaca::layers
