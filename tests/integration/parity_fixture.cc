// tests/integration/parity_fixture.cc: see parity_fixture.h.
#include "tests/integration/parity_fixture.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <random>

#include "actors/checkpoint/checkpoint_reader.h"
#include "api/args/megatron_args.h"
#include "api/train/train_command.h"
#include "api/train/train_setup.h"
#include "layers/gpt_stage.h"
#include "tests/integration/tiny_corpus.h"

namespace mxmaca::testing {

ParityCorpus::ParityCorpus(const std::string& name) {
  dir_ = TempDir(name);
  prefix_ = dir_ + "/tiny";
  MakeTinyCorpus(prefix_, 400, 29);
  name_ = name;
  // MXMACA_TEST_SEED=<n> replays a run whose seed the log named.
  const char* fixed = std::getenv("MXMACA_TEST_SEED");
  if (fixed != nullptr) {
    seed_ = std::atoi(fixed);
    std::cerr << "ParityCorpus " << name_ << ": --seed " << seed_ << " (MXMACA_TEST_SEED)"
              << std::endl;
  } else {
    Redraw();
  }
}

void ParityCorpus::Redraw() {
  std::mt19937 rng(std::random_device{}());
  seed_ = 1 + static_cast<int>(rng() % 100000);
  std::cerr << "ParityCorpus " << name_ << ": --seed " << seed_ << " (MXMACA_TEST_SEED=" << seed_
            << " replays it)" << std::endl;
}

std::vector<std::string> ParityCorpus::CommonArgs(int64_t vocab_size) const {
  return {"--seed", std::to_string(seed_), "--data-path", prefix_, "--split", "90,10,0",
          "--data-cache-path", dir_ + "/cache", "--tokenizer-type", "NullTokenizer",
          "--vocab-size", std::to_string(vocab_size), "--log-interval", "1", "--num-threads",
          "2"};
}

Run ParityCorpus::Train(const std::string& label, std::vector<std::string> args,
                        int iterations) {
  // The run's final weights are read from its --save directory (one is added if absent).
  std::string save;
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--save") save = args[i + 1];
  }
  if (save.empty()) {
    save = dir_ + "/ckpt_" + std::to_string(count_++);
    args.insert(args.end(), {"--save", save, "--save-interval", "100000"});
  }
  std::string log;
  auto s = api::Train(args, [&](const std::string& line) { log += line + "\n"; });
  INFO(label << "\n" << log);
  REQUIRE(s.ok());
  INFO(s->error);
  REQUIRE(s->ok);
  REQUIRE(s->train_losses.size() == static_cast<size_t>(iterations));
  Run run{label, *s, {}, log};
  auto reader = actors::checkpoint::CheckpointReader::Open(save);
  REQUIRE(reader.ok());
  for (const std::string& name : reader->TensorNames()) {
    if (name.rfind("model/", 0) != 0) continue;
    auto shape = reader->FullShape(name);
    REQUIRE(shape.ok());
    int64_t n = 1;
    for (int64_t d : *shape) n *= d;
    std::vector<float> w(static_cast<size_t>(n));
    const std::vector<int64_t> zero(shape->size(), 0);
    REQUIRE(reader->ReadSlice(name, zero, *shape, w.data()).ok());
    run.weights[name.substr(6)] = std::move(w);
  }
  return run;
}

Weights ParityCorpus::InitialWeights(const std::vector<std::string>& args,
                                     int64_t vocab_size) const {
  auto parsed = api::ParseMegatronArgs(args);
  REQUIRE(parsed.ok());
  parsed->world_size_flag.reset();
  parsed->pipeline_model_parallel_size = 1;
  parsed->tensor_model_parallel_size = 1;
  parsed->sequence_parallel = false;
  parsed->num_layers_per_virtual_pipeline_stage.reset();
  REQUIRE(api::ValidateAndDeriveArgs(&*parsed, 1).ok());
  auto config = api::GptConfigFromArgs(*parsed, vocab_size + 1);
  REQUIRE(config.ok());
  layers::StageLayout all;
  all.last_layer = config->num_layers;
  auto stage = layers::GptStage::Create(*config, all);
  REQUIRE(stage.ok());
  (*stage)->InitializeParameters();
  Weights w;
  const layers::ParameterStore& store = (*stage)->parameters();
  for (int i = 0; i < store.size(); ++i) {
    const float* p = store.param(i);
    w[store.info(i).spec.name] = std::vector<float>(p, p + store.info(i).numel);
  }
  return w;
}

void CheckBitIdentical(const Run& ref, const Run& run) {
  INFO(run.label << " vs " << ref.label);
  CHECK(run.summary.train_losses == ref.summary.train_losses);
  CHECK(run.summary.valid_losses == ref.summary.valid_losses);
  // The reported grad norm is the one number that is not bit-identical across PP: it is a
  // sum of fp64 partials grouped by stage (and by DP shard), so the grouping follows the
  // layout (fp64 rounding: ~1e-16 relative). The clip factor applied is a float of it,
  // which that cannot change except at a rounding tie — the weights are compared bit for
  // bit.
  REQUIRE(run.summary.grad_norms.size() == ref.summary.grad_norms.size());
  for (size_t i = 0; i < ref.summary.grad_norms.size(); ++i) {
    CHECK(std::fabs(run.summary.grad_norms[i] - ref.summary.grad_norms[i]) <=
          1e-12 * ref.summary.grad_norms[i]);
  }
  REQUIRE(run.weights.size() == ref.weights.size());
  for (const auto& [name, w] : ref.weights) {
    INFO(name);
    auto it = run.weights.find(name);
    REQUIRE(it != run.weights.end());
    CHECK(it->second == w);
  }
}

void CheckClose(const Run& ref, const Run& run, const Weights& w0, double loss_rtol,
                double weight_rtol) {
  INFO(run.label << " vs " << ref.label);
  REQUIRE(run.summary.train_losses.size() == ref.summary.train_losses.size());
  for (size_t i = 0; i < ref.summary.train_losses.size(); ++i) {
    INFO("step " << i + 1);
    const double a = ref.summary.train_losses[i], b = run.summary.train_losses[i];
    CHECK(std::fabs(a - b) <= loss_rtol * std::fabs(a));
  }
  REQUIRE(run.weights.size() == ref.weights.size());
  for (const auto& [name, w] : ref.weights) {
    INFO(name);
    const std::vector<float>& v = run.weights.at(name);
    const std::vector<float>& init = w0.at(name);
    const size_t n = std::min({w.size(), v.size(), init.size()});
    double diff = 0.0, change = 0.0;
    for (size_t k = 0; k < n; ++k) {
      const double dw_ref = double(w[k]) - init[k], dw = double(v[k]) - init[k];
      diff += (dw - dw_ref) * (dw - dw_ref);
      change += dw_ref * dw_ref;
    }
    REQUIRE(change > 0.0);  // every tensor trained
    CHECK(std::sqrt(diff) <= weight_rtol * std::sqrt(change));
  }
}

}  // namespace mxmaca::testing
