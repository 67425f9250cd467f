// api/train/checkpoint_args_test.cc: the model stored in a checkpoint's args reads back
// layout-free — an expert-parallel run's checkpoint (written by a process whose world size
// came from the launcher's environment, not from its command line) still gives its MoE model.
#include "api/train/checkpoint_args.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "api/train/train_setup.h"
#include "layers/moe/moe_layer.h"

namespace mxmaca::api {
namespace {

TEST_CASE("ModelConfigFromCheckpointArgs: an EP 2 run's MoE model, without its world size") {
  // As `mxmaca launch --nproc-per-node 2 -- train ...` stores it: no --world-size in argv.
  const std::vector<std::string> argv = {
      "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4",
      "--seq-length", "16", "--max-position-embeddings", "16", "--micro-batch-size", "1",
      "--global-batch-size", "2", "--tokenizer-type", "NullTokenizer", "--vocab-size", "100",
      "--num-experts", "4", "--moe-router-topk", "2", "--expert-model-parallel-size", "2",
      "--moe-ffn-hidden-size", "48", "--train-iters", "1", "--lr", "1e-3"};
  std::vector<std::string> with_world = argv;
  with_world.insert(with_world.end(), {"--world-size", "2"});
  absl::StatusOr<MegatronArgs> a = ParseMegatronArgs(with_world);
  REQUIRE(a.ok());
  layers::GptConfig model;
  model.num_layers = 2;
  model.hidden_size = 32;
  model.num_attention_heads = 4;
  model.ffn_hidden_size = 128;
  model.vocab_size = 100;
  model.padded_vocab_size = 128;
  model.seq_length = 16;
  model.max_position_embeddings = 16;
  const nlohmann::json stored = CheckpointArgsJson(argv, *a, model);
  absl::StatusOr<layers::GptConfig> back = ModelConfigFromCheckpointArgs(stored);
  INFO(back.status().message());
  REQUIRE(back.ok());
  REQUIRE(back->moe != nullptr);
  CHECK(back->moe->router.num_experts == 4);
  CHECK(back->moe->router.topk == 2);
  CHECK(back->moe->expert.ffn_hidden_size == 48);
  // The stored model is layout-free: experts are whole logical tensors (EP 1).
  CHECK(back->moe->expert_model_parallel_size == 1);
  CHECK(back->hidden_size == 32);
}

}  // namespace
}  // namespace mxmaca::api
