// `mxmaca merge-datasets` (merge_datasets_command.h): datasets of fresh random documents
// merged from a directory equal, byte for byte (.bin and .idx), the dataset written by
// adding all their documents in sorted-prefix order to one builder — the identity
// Megatron's add_index keeps (the writer itself is checked against Megatron's in
// api/preprocess:preprocess_parity_test) — for uint16 and int32 tokens, with empty
// documents and multi-sequence documents; and the errors name the value.
#include "api/merge_datasets/merge_datasets_command.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"

namespace mxmaca::api {
namespace {

// TempDir: a fresh directory under $TEST_TMPDIR (or /tmp).
std::string TempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/merge_XXXXXX";
  REQUIRE(mkdtemp(tmpl.data()) != nullptr);
  return tmpl;
}

using Doc = std::pair<std::vector<int32_t>, std::vector<int32_t>>;  // tokens, lengths

std::vector<Doc> RandomDocs(std::mt19937& gen, int n, int32_t vocab) {
  std::vector<Doc> docs(n);
  for (Doc& d : docs) {
    const int sequences = std::uniform_int_distribution<int>(0, 3)(gen);  // 0: empty document
    for (int s = 0; s < sequences; ++s) {
      const int len = std::uniform_int_distribution<int>(1, 40)(gen);
      d.second.push_back(len);
      for (int i = 0; i < len; ++i) {
        d.first.push_back(std::uniform_int_distribution<int32_t>(0, vocab - 1)(gen));
      }
    }
  }
  return docs;
}

void Write(const std::string& prefix, data::DType dtype, const std::vector<Doc>& docs) {
  auto b = data::IndexedDatasetBuilder::Create(prefix, dtype);
  REQUIRE(b.ok());
  for (const Doc& d : docs) REQUIRE((*b)->AddDocument(d.first, d.second).ok());
  REQUIRE((*b)->Finalize().ok());
}

std::string Bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

TEST_CASE("merge-datasets equals writing all documents in sorted prefix order") {
  std::mt19937 gen(std::random_device{}());
  for (const auto& [dtype, vocab] :
       {std::pair{data::DType::kUint16, 65000}, std::pair{data::DType::kInt32, 200000}}) {
    const std::string dir = TempDir();
    std::filesystem::create_directory(dir + "/in");
    // Written in a shuffled order; merged in sorted order: b_part < part10 < part2.
    const std::vector<std::string> names = {"part2", "b_part", "part10"};
    std::vector<std::vector<Doc>> parts;
    for (const std::string& n : names) {
      parts.push_back(RandomDocs(gen, 30, vocab));
      Write(dir + "/in/" + n, dtype, parts.back());
    }
    std::vector<Doc> all;
    for (int i : {1, 2, 0}) all.insert(all.end(), parts[i].begin(), parts[i].end());
    Write(dir + "/expected", dtype, all);
    REQUIRE(RunMergeDatasets({"--input", dir + "/in", "--output-prefix", dir + "/merged"}).ok());
    CHECK(Bytes(dir + "/merged.bin") == Bytes(dir + "/expected.bin"));
    CHECK(Bytes(dir + "/merged.idx") == Bytes(dir + "/expected.idx"));
    auto merged = data::IndexedDataset::Open(dir + "/merged");
    REQUIRE(merged.ok());
    CHECK((*merged)->dtype() == dtype);
  }
}

TEST_CASE("merge-datasets errors name the value") {
  const std::string dir = TempDir();
  std::filesystem::create_directory(dir + "/in");
  std::mt19937 gen(7);
  Write(dir + "/in/a", data::DType::kUint16, RandomDocs(gen, 3, 100));
  Write(dir + "/in/b", data::DType::kInt32, RandomDocs(gen, 3, 100));
  auto message = [](const std::vector<std::string>& args) {
    const absl::Status s = RunMergeDatasets(args);
    REQUIRE(!s.ok());
    return std::string(s.message());
  };
  CHECK(message({"--input", dir + "/in", "--output-prefix", dir + "/out"}).find(dir + "/in/b") !=
        std::string::npos);  // another dtype
  CHECK(message({"--input", dir + "/nothing", "--output-prefix", dir + "/out"})
            .find("is not a directory") != std::string::npos);
  CHECK(message({"--input", dir + "/in", "--output-prefix", dir + "/no/out"})
            .find(dir + "/no is not a directory") != std::string::npos);
  CHECK(message({"--input", dir + "/in"}).find("--output-prefix are required") !=
        std::string::npos);
  CHECK(message({"--input", dir + "/in", "--output-prefix", dir + "/o", "--multimodal"})
            .find("--multimodal") != std::string::npos);
  CHECK(message({"--input", dir + "/in", "--output-prefix", dir + "/o", "--bogus"})
            .find("unknown argument(s) --bogus") != std::string::npos);
  std::filesystem::remove(dir + "/in/b.idx");
  CHECK(message({"--input", dir + "/in", "--output-prefix", dir + "/o"})
            .find(".idx file not provided for " + dir + "/in/b") != std::string::npos);
  std::filesystem::remove(dir + "/in/b.bin");
  std::filesystem::remove(dir + "/in/a.bin");
  std::filesystem::remove(dir + "/in/a.idx");
  CHECK(message({"--input", dir + "/in", "--output-prefix", dir + "/o"})
            .find("holds no .bin/.idx dataset") != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::api
