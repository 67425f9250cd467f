// GptDataConfigFromArgs: Megatron's sample-count formulas on parsed flags. The expected
// counts are worked out by hand from training.py's formulas in each comment.
#include "api/data_config/gpt_data_config.h"

#include <catch2/catch.hpp>

namespace mxmaca::api {
namespace {

MegatronArgs Parse(const std::vector<std::string>& argv) {
  auto args = ParseMegatronArgs(argv);
  if (!args.ok()) FAIL(args.status().ToString());
  return *args;
}

TEST_CASE("GptDataConfigFromArgs applies Megatron's sample counts") {
  auto config = GptDataConfigFromArgs(
      Parse({"--data-path", "0.7", "a", "0.3", "b", "--seq-length", "128", "--train-iters", "250",
             "--global-batch-size", "16", "--eval-iters", "3", "--eval-interval", "100", "--seed",
             "77", "--data-cache-path", "/tmp/c"}));
  REQUIRE(config.ok());
  CHECK(config->blend->prefixes == std::vector<std::string>{"a", "b"});
  CHECK(*config->blend->weights == std::vector<double>{0.7, 0.3});
  CHECK(config->split == "969, 30, 1");
  CHECK(config->seed == 77u);
  CHECK(config->seq_length == 128);
  CHECK(*config->num_samples[0] == 250 * 16);
  CHECK(*config->num_samples[1] == (250 / 100 + 1) * 3 * 16);  // 144
  CHECK(*config->num_samples[2] == 3 * 16);
  CHECK(config->cache_path == "/tmp/c");
  CHECK(!config->mock);

  // --train-samples: train_iters = 1000 // 8 = 125 for the validation count.
  auto by_samples = GptDataConfigFromArgs(
      Parse({"--mock-data", "--seq-length", "64", "--train-samples", "1000", "--global-batch-size",
             "8", "--eval-iters", "0", "--eval-interval", "50", "--split", "1,1,0"}));
  REQUIRE(by_samples.ok());
  CHECK(by_samples->mock);
  CHECK(*by_samples->num_samples[0] == 1000);
  CHECK(*by_samples->num_samples[1] == 0);
  CHECK(*by_samples->num_samples[2] == 0);
  CHECK(by_samples->split == "1,1,0");

  auto per_split = GptDataConfigFromArgs(
      Parse({"--train-data-path", "t1", "t2", "--valid-data-path", "v", "--seq-length", "8",
             "--train-iters", "10", "--micro-batch-size", "2"}));
  REQUIRE(per_split.ok());
  CHECK(!per_split->blend.has_value());
  CHECK(per_split->blend_per_split[0]->prefixes == std::vector<std::string>{"t1", "t2"});
  CHECK(per_split->blend_per_split[1]->prefixes == std::vector<std::string>{"v"});
  CHECK(!per_split->blend_per_split[2].has_value());
  CHECK(*per_split->num_samples[0] == 20);  // micro batch 2 x dp 1
}

TEST_CASE("GptDataConfigFromArgs rejects incomplete flags") {
  CHECK(!GptDataConfigFromArgs(Parse({"--train-iters", "10", "--global-batch-size", "2"})).ok());
  CHECK(!GptDataConfigFromArgs(Parse({"--seq-length", "8", "--global-batch-size", "2"})).ok());
  CHECK(!GptDataConfigFromArgs(Parse({"--seq-length", "8", "--train-iters", "3"})).ok());
  CHECK(!GptDataConfigFromArgs(Parse({"--seq-length", "8", "--train-iters", "3",
                                      "--global-batch-size", "2", "--seed", "-1"}))
             .ok());
  CHECK(!GptDataConfigFromArgs(Parse({"--train-data-path", "t", "--split", "1,1,1", "--seq-length",
                                      "8", "--train-iters", "3", "--global-batch-size", "2"}))
             .ok());
  CHECK(!GptDataConfigFromArgs(Parse({"--data-path", "a", "--mock-data", "--seq-length", "8",
                                      "--train-iters", "3", "--global-batch-size", "2"}))
             .ok());
}

}  // namespace
}  // namespace mxmaca::api
