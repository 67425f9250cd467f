// Tests of GptDataset / BlendedDataset / BuildGptDatasets against the numpy port of
// Megatron-Core's algorithm in tests/gpt_dataset_reference/gpt_reference.py (parity:
// indices and sample tokens must be identical), plus the index cache and input errors.
#include "data/gpt_dataset.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/blended_dataset.h"
#include "data/gpt_dataset_builder.h"
#include "data/gpt_dataset_test_util.h"

namespace mxmaca::data {
namespace {

using nlohmann::json;

constexpr char kScript[] = "data/tests/gpt_dataset_reference/gpt_reference.py";

// SyntheticSource: token(seq, pos) = synthetic_token() of gpt_reference.py.
class SyntheticSource : public TokenSource {
 public:
  SyntheticSource(std::vector<int32_t> sizes, int id) : sizes_(std::move(sizes)), id_(id) {}
  absl::Span<const int32_t> sequence_lengths() const override { return sizes_; }
  absl::Status GetInto(int64_t seq, int64_t offset, absl::Span<int32_t> out) const override {
    if (seq < 0 || seq >= static_cast<int64_t>(sizes_.size()) || offset < 0 ||
        offset + static_cast<int64_t>(out.size()) > sizes_[seq]) {
      return absl::OutOfRangeError("synthetic range");
    }
    for (size_t p = 0; p < out.size(); ++p) {
      out[p] = static_cast<int32_t>(
          (id_ * 7777LL + seq * 1000003LL + (offset + static_cast<int64_t>(p)) * 7919LL) % 50257);
    }
    return absl::OkStatus();
  }
  std::string path_prefix() const override { return absl::StrCat("syn", id_); }

 private:
  std::vector<int32_t> sizes_;
  int id_;
};

std::vector<int32_t> RandomSizes(std::mt19937_64& gen, int n, int max_len) {
  std::vector<int32_t> sizes(n);
  for (auto& s : sizes) {
    // Mostly positive lengths, a few empty sequences (Megatron tolerates them).
    s = (gen() % 23 == 0) ? 0 : 1 + static_cast<int32_t>(gen() % max_len);
  }
  return sizes;
}

json SizesJson(const std::array<std::optional<int64_t>, kNumSplits>& sizes) {
  json out = json::array();
  for (const auto& s : sizes) {
    if (s.has_value()) {
      out.push_back(*s);
    } else {
      out.push_back(nullptr);
    }
  }
  return out;
}

// CompareSplit: one split of the C++ build against the reference's entry.
void CompareSplit(const SampleDataset* ds, const json& want, int split) {
  INFO("split " << split);
  if (want.is_null()) {
    REQUIRE(ds == nullptr);
    return;
  }
  REQUIRE(ds != nullptr);
  REQUIRE(ds->size() == want["size"].get<int64_t>());
  if (want.contains("document_index")) {
    const auto* gpt = dynamic_cast<const GptDataset*>(ds);
    REQUIRE(gpt != nullptr);
    REQUIRE(gpt->indices().document_index == want["document_index"].get<std::vector<int32_t>>());
    REQUIRE(gpt->indices().sample_index == want["sample_index"].get<std::vector<int64_t>>());
    REQUIRE(gpt->indices().shuffle_index == want["shuffle_index"].get<std::vector<int64_t>>());
    REQUIRE(gpt->indices().num_epochs == want["num_epochs"].get<int64_t>());
    REQUIRE(gpt->indices().separate_final_epoch == want["separate_final_epoch"].get<bool>());
  } else {
    const auto* blend = dynamic_cast<const BlendedDataset*>(ds);
    REQUIRE(blend != nullptr);
    std::vector<int64_t> index(blend->indices().dataset_index.begin(),
                               blend->indices().dataset_index.end());
    REQUIRE(index == want["dataset_index"].get<std::vector<int64_t>>());
    REQUIRE(blend->indices().dataset_sample_index ==
            want["dataset_sample_index"].get<std::vector<int64_t>>());
  }
  const json& samples = want["samples"];
  std::vector<int32_t> got(ds->sample_length());
  for (size_t i = 0; i < samples.size(); ++i) {
    INFO("sample " << i);
    REQUIRE(ds->GetSample(static_cast<int64_t>(i), absl::MakeSpan(got)).ok());
    REQUIRE(got == samples[i].get<std::vector<int32_t>>());
  }
}

// Sources: the synthetic datasets by prefix "syn<k>", for GptDataConfig::open_source.
struct Sources {
  std::vector<std::vector<int32_t>> sizes;
  json Json(int k) const { return {{"sizes", sizes[k]}, {"id", k}}; }
  std::function<absl::StatusOr<std::shared_ptr<const TokenSource>>(const std::string&)> Opener()
      const {
    auto copy = sizes;
    return [copy](const std::string& prefix) -> absl::StatusOr<std::shared_ptr<const TokenSource>> {
      const int k = std::stoi(prefix.substr(3));
      return std::shared_ptr<const TokenSource>(std::make_shared<SyntheticSource>(copy[k], k));
    };
  }
};

// RunParity: builds `config` here and `reference_config` in Python and compares every
// split; returns the reference's result (for coverage checks).
json RunParity(const GptDataConfig& config, const json& reference_config) {
  INFO("config " << reference_config.dump().substr(0, 400));
  auto want = testing::RunPythonJson(kScript, reference_config);
  REQUIRE(want.ok());
  auto got = BuildGptDatasets(config);
  if (!got.ok()) FAIL(got.status().ToString());
  CompareSplit(got->train.get(), (*want)[0], 0);
  CompareSplit(got->valid.get(), (*want)[1], 1);
  CompareSplit(got->test.get(), (*want)[2], 2);
  return *want;
}

TEST_CASE("GPTDataset indices and samples match Megatron's algorithm") {
  std::mt19937_64 gen(5150);
  // Every non-empty split gets at least a few sequences: Megatron loops forever on a
  // split without tokens (_get_num_epochs), so the reference cannot run one.
  const std::vector<std::string> splits = {"949,45,6", "98,2,0", "1,1,1",        "80 10 10",
                                           "100",      "7,0,3",  "0.5,0.25,0.25"};
  const std::vector<int32_t> seq_lengths = {2, 3, 16, 64, 100};
  // Sample requests as multiples of one epoch: under one epoch, just over one (final
  // epoch shuffled separately), nearly two (not separate), many, and zero.
  const std::vector<double> epochs = {0.5, 1.1, 1.9, 7.3, 0.0};
  int one_epoch = 0, two_separate = 0, two_joint = 0, many = 0;
  for (int trial = 0; trial < 14; ++trial) {
    Sources sources;
    sources.sizes.push_back(RandomSizes(gen, 1000 + gen() % 500, 1 + gen() % 60));
    GptDataConfig config;
    config.blend = GptDataBlend{{"syn0"}, std::nullopt};
    config.split = splits[trial % splits.size()];
    config.seed = static_cast<uint32_t>(gen());
    config.seq_length = seq_lengths[trial % seq_lengths.size()];
    config.cache_path = "none";
    config.open_source = sources.Opener();
    int64_t tokens = 0;
    for (int32_t s : sources.sizes[0]) tokens += s;
    const int64_t per_epoch = tokens / config.seq_length;
    for (int i = 0; i < kNumSplits; ++i) {
      const double e = epochs[(trial + i) % epochs.size()];
      config.num_samples[i] = static_cast<int64_t>(e * per_epoch);
    }
    if (trial == 3) config.num_samples[2] = std::nullopt;
    json ref = {{"mode", "build"},
                {"seq_length", config.seq_length},
                {"seed", config.seed},
                {"sizes", SizesJson(config.num_samples)},
                {"blend", {{"datasets", {sources.Json(0)}}, {"weights", nullptr}}},
                {"split", config.split},
                {"max_samples", {400, 200, 200}}};
    const json result = RunParity(config, ref);
    for (const json& split : result) {
      if (split.is_null()) continue;
      const int64_t e = split["num_epochs"];
      const bool separate = split["separate_final_epoch"];
      if (e == 1) ++one_epoch;
      if (e == 2) ++(separate ? two_separate : two_joint);
      if (e > 4) ++many;
    }
  }
  // The cases above must have exercised each epoch regime.
  CHECK(one_epoch > 0);
  CHECK(two_separate > 0);
  CHECK(two_joint > 0);
  CHECK(many > 0);
}

TEST_CASE("Blended datasets match Megatron's builder, with and without weights") {
  std::mt19937_64 gen(777);
  for (int trial = 0; trial < 8; ++trial) {
    Sources sources;
    const int k = 2 + trial % 3;
    for (int d = 0; d < k; ++d) sources.sizes.push_back(RandomSizes(gen, 30 + gen() % 150, 200));
    GptDataConfig config;
    GptDataBlend blend;
    json datasets = json::array();
    json weights = json::array();
    std::vector<double> w;
    for (int d = 0; d < k; ++d) {
      blend.prefixes.push_back(absl::StrCat("syn", d));
      datasets.push_back(sources.Json(d));
      w.push_back(0.05 + (gen() % 1000) / 100.0);
      weights.push_back(w.back());
    }
    const bool weighted = trial % 4 != 3;
    if (weighted) blend.weights = w;
    config.blend = blend;
    config.split = trial % 2 ? "90,7,3" : "1,1,1";
    config.seed = static_cast<uint32_t>(gen());
    config.seq_length = 8 + static_cast<int32_t>(gen() % 50);
    config.cache_path = "none";
    config.open_source = sources.Opener();
    config.num_samples = {int64_t(50 + gen() % 3000), int64_t(gen() % 300), int64_t(gen() % 100)};
    json ref = {{"mode", "build"},
                {"seq_length", config.seq_length},
                {"seed", config.seed},
                {"sizes", SizesJson(config.num_samples)},
                {"blend", {{"datasets", datasets}, {"weights", weighted ? weights : json()}}},
                {"split", config.split},
                {"max_samples", {300, 100, 100}}};
    RunParity(config, ref);
  }
}

TEST_CASE("Per-split data paths match Megatron's builder") {
  std::mt19937_64 gen(4242);
  for (int trial = 0; trial < 4; ++trial) {
    Sources sources;
    for (int d = 0; d < 5; ++d) sources.sizes.push_back(RandomSizes(gen, 20 + gen() % 100, 150));
    GptDataConfig config;
    config.seed = static_cast<uint32_t>(gen());
    config.seq_length = 16 + static_cast<int32_t>(gen() % 40);
    config.cache_path = "none";
    config.open_source = sources.Opener();
    config.num_samples = {int64_t(1000 + gen() % 2000), int64_t(gen() % 300), int64_t(gen() % 50)};
    json per_split = json::array();
    // train: weighted blend of 2; valid: a single weighted prefix; test: none or an
    // unweighted blend.
    config.blend_per_split[0] = GptDataBlend{{"syn0", "syn1"}, std::vector<double>{0.3, 0.7}};
    per_split.push_back(
        {{"datasets", {sources.Json(0), sources.Json(1)}}, {"weights", {0.3, 0.7}}});
    config.blend_per_split[1] = GptDataBlend{{"syn2"}, std::vector<double>{1.0}};
    per_split.push_back({{"datasets", {sources.Json(2)}}, {"weights", {1.0}}});
    if (trial % 2) {
      config.blend_per_split[2] = GptDataBlend{{"syn3", "syn4"}, std::nullopt};
      per_split.push_back({{"datasets", {sources.Json(3), sources.Json(4)}}, {"weights", nullptr}});
    } else {
      per_split.push_back(nullptr);
    }
    json ref = {{"mode", "build"},
                {"seq_length", config.seq_length},
                {"seed", config.seed},
                {"sizes", SizesJson(config.num_samples)},
                {"blend_per_split", per_split},
                {"max_samples", {300, 100, 100}}};
    RunParity(config, ref);
  }
}

TEST_CASE("Mock data matches MockGPTDataset") {
  GptDataConfig config;
  config.mock = true;
  config.seed = 1234;
  config.seq_length = 2048;
  config.num_samples = {int64_t{3000}, int64_t{64}, int64_t{32}};
  json ref = {{"mode", "build"},          {"seq_length", config.seq_length},
              {"seed", config.seed},      {"sizes", SizesJson(config.num_samples)},
              {"mock", config.eod_token}, {"max_samples", {40, 10, 10}}};
  RunParity(config, ref);
  // A vocabulary smaller than the mock sequences: core_v0.19.0 reduces the tokens modulo it.
  config.vocab_size = 1001;
  config.eod_token = 1000;
  ref["mock"] = config.eod_token;
  ref["vocab_size"] = config.vocab_size;
  RunParity(config, ref);
}

TEST_CASE("Index cache: hit, corrupt files rebuilt, readable by numpy") {
  auto dir = testing::MakeScratchDir("gptcache");
  REQUIRE(dir.ok());
  std::mt19937_64 gen(99);
  Sources sources;
  sources.sizes.push_back(RandomSizes(gen, 300, 120));
  GptDataConfig config;
  config.blend = GptDataBlend{{"syn0"}, std::nullopt};
  config.split = "90,5,5";
  config.seed = 31337;
  config.seq_length = 32;
  config.num_samples = {int64_t{2500}, int64_t{40}, int64_t{10}};
  config.cache_path = *dir + "/cache";
  config.open_source = sources.Opener();

  auto first = BuildGptDatasets(config);
  REQUIRE(first.ok());
  const auto* train = dynamic_cast<const GptDataset*>(first->train.get());
  REQUIRE(train != nullptr);
  CHECK(train->cache_report().rfind("built ", 0) == 0);

  auto second = BuildGptDatasets(config);
  REQUIRE(second.ok());
  const auto* train2 = dynamic_cast<const GptDataset*>(second->train.get());
  CHECK(train2->cache_report().rfind("hit ", 0) == 0);
  CHECK(train2->indices().document_index == train->indices().document_index);
  CHECK(train2->indices().sample_index == train->indices().sample_index);
  CHECK(train2->indices().shuffle_index == train->indices().shuffle_index);

  // The file names and numpy's view of them.
  std::string base;
  {
    FILE* ls = popen(
        ("ls " + config.cache_path + " | grep -- '-GPTDataset-train-sample_index.npy'").c_str(),
        "r");
    char buf[512] = {0};
    REQUIRE(fgets(buf, sizeof(buf), ls) != nullptr);
    pclose(ls);
    base = config.cache_path + "/" +
           std::string(buf).substr(0, std::string(buf).find("sample_index.npy"));
  }
  {
    const std::string cmd =
        "/usr/bin/python3 -c \"import numpy,sys; a=numpy.load(sys.argv[1]); "
        "print(a.dtype, a.shape, int(a.astype(numpy.int64).sum()))\" " +
        base + "sample_index.npy";
    FILE* p = popen(cmd.c_str(), "r");
    char buf[512] = {0};
    REQUIRE(fgets(buf, sizeof(buf), p) != nullptr);
    pclose(p);
    int64_t sum = 0;
    for (int64_t v : train->indices().sample_index) sum += v;
    CHECK(std::string(buf) == absl::StrCat("int32 (", train->size() + 1, ", 2) ", sum, "\n"));
  }

  // Truncate the sample index: detected, rebuilt, same result.
  {
    std::ifstream in(base + "sample_index.npy", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(base + "sample_index.npy", std::ios::binary | std::ios::trunc);
    out << bytes.substr(0, bytes.size() - 12);
  }
  auto third = BuildGptDatasets(config);
  REQUIRE(third.ok());
  const auto* train3 = dynamic_cast<const GptDataset*>(third->train.get());
  CHECK(train3->cache_report().rfind("rebuilt ", 0) == 0);
  CHECK(train3->indices().sample_index == train->indices().sample_index);

  // Scramble the shuffle index (a duplicate entry): detected and rebuilt.
  {
    std::fstream f(base + "shuffle_index.npy", std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(128);
    const char zeros[8] = {0};
    f.write(zeros, 8);
  }
  auto fourth = BuildGptDatasets(config);
  REQUIRE(fourth.ok());
  const auto* train4 = dynamic_cast<const GptDataset*>(fourth->train.get());
  CHECK(train4->cache_report().rfind("rebuilt ", 0) == 0);
  CHECK(train4->indices().shuffle_index == train->indices().shuffle_index);

  // A cache directory that cannot be created is an error naming the way out.
  GptDataConfig unwritable = config;
  unwritable.cache_path = *dir + "/cache/" + "x/" + "\x01";
  {
    std::ofstream blocker(*dir + "/cache/x");  // a file where a directory must go
  }
  auto failed = BuildGptDatasets(unwritable);
  REQUIRE(!failed.ok());
  CHECK(failed.status().message().find("--data-cache-path") != absl::string_view::npos);

  // Another seed is another cache entry.
  config.seed = 31338;
  auto fifth = BuildGptDatasets(config);
  REQUIRE(fifth.ok());
  CHECK(dynamic_cast<const GptDataset*>(fifth->train.get())->cache_report().rfind("built ", 0) ==
        0);
}

TEST_CASE("Split strings parse as Megatron's and bad inputs are errors") {
  auto m = ParseSplitMatrix("969, 30, 1");
  REQUIRE(m.ok());
  REQUIRE((*m)[0].has_value());
  CHECK((*m)[0]->second == 0.969);
  CHECK(SplitSequenceRange(*(*m)[0], 1000) == std::make_pair<int64_t, int64_t>(0, 969));
  auto one = ParseSplitMatrix("100");
  REQUIRE(one.ok());
  CHECK(!(*one)[1].has_value());
  CHECK(!(*one)[2].has_value());
  // Python's round: half to even.
  CHECK(SplitSequenceRange({0.0, 0.5}, 5).second == 2);
  CHECK(SplitSequenceRange({0.0, 0.5}, 7).second == 4);
  CHECK(!ParseSplitMatrix("").ok());
  CHECK(!ParseSplitMatrix("1,2,3,4").ok());
  CHECK(!ParseSplitMatrix("0,0,0").ok());
  CHECK(!ParseSplitMatrix("1.2.3,4").ok());

  std::vector<int32_t> sizes = {5, 7, 0, 9};
  CHECK(!BuildGptIndices(sizes, 2, 2, 10, 4, 1).ok());  // empty range
  CHECK(!BuildGptIndices(sizes, 2, 3, 10, 4, 1).ok());  // no tokens
  CHECK(!BuildGptIndices(sizes, 0, 4, 10, 1, 1).ok());  // seq_length 1
  CHECK(!BuildGptIndices(sizes, 0, 5, 10, 4, 1).ok());  // past the end
  CHECK(BuildGptIndices(sizes, 0, 4, 10, 4, 1).ok());

  auto blend = ParseDataBlend({"0.7", "a", "0.3", " b "});
  REQUIRE(blend.ok());
  CHECK((*blend)->prefixes == std::vector<std::string>{"a", "b"});
  CHECK(*(*blend)->weights == std::vector<double>{0.7, 0.3});
  auto plain = ParseDataBlend({"a", "b"});
  REQUIRE(plain.ok());
  CHECK((*plain)->prefixes == std::vector<std::string>{"a", "b"});
  CHECK(!(*plain)->weights.has_value());
  CHECK(!ParseDataBlend({"0.7", "a", "b", "c"}).ok());
  CHECK(!ParseDataBlend({"-1", "a"}).ok());

  GptDataConfig both;
  both.seq_length = 8;
  both.blend = GptDataBlend{{"a"}, std::nullopt};
  both.blend_per_split[0] = GptDataBlend{{"b"}, std::nullopt};
  CHECK(!BuildGptDatasets(both).ok());
}

TEST_CASE("NumpySum matches numpy's pairwise summation") {
  std::mt19937_64 gen(1);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  json cases = json::array();
  std::vector<std::vector<double>> inputs;
  for (int n : {1, 2, 3, 7, 8, 9, 16, 17, 127, 128, 129, 300, 1000}) {
    std::vector<double> v(n);
    for (auto& x : v) x = u(gen) * std::pow(10.0, static_cast<int>(gen() % 7) - 3);
    inputs.push_back(v);
  }
  json ref = json::array();
  for (const auto& v : inputs) ref.push_back(v);
  const std::string cmd_script = "data/tests/gpt_dataset_reference/numpy_sum_reference.py";
  auto want = testing::RunPythonJson(cmd_script, ref);
  REQUIRE(want.ok());
  for (size_t i = 0; i < inputs.size(); ++i) {
    INFO("n = " << inputs[i].size());
    const double expected = std::strtod((*want)[i]["sum"].get<std::string>().c_str(), nullptr);
    CHECK(NumpySum(inputs[i]) == expected);
    const auto normalized = NormalizeWeights(inputs[i]);
    for (size_t j = 0; j < normalized.size(); ++j) {
      CHECK(normalized[j] ==
            std::strtod((*want)[i]["normalized"][j].get<std::string>().c_str(), nullptr));
    }
  }
}

}  // namespace
}  // namespace mxmaca::data
