// data/indexed_dataset_parity_test.cc: byte identity of IndexedDatasetBuilder with a
// numpy reference writer built from Megatron-Core's indexed_dataset.py facts
// (data/tests/indexed_dataset_reference/megatron_indexed_writer.py), on fresh random
// documents: empty documents, multi-sequence documents, add_document, add_index merges,
// uint16 and int32.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/indexed_dataset.h"

namespace mxmaca::data {
namespace {

constexpr char kReference[] =
    "data/tests/indexed_dataset_reference/megatron_indexed_writer.py";

std::string MakeTempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string templ = std::string(base != nullptr ? base : "/tmp") + "/idxparity.XXXXXX";
  REQUIRE(::mkdtemp(templ.data()) != nullptr);
  return templ;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs one random sequence of builder operations through our builder (at `prefix`) and
// records it as a JSON spec for the reference writer (at `prefix`_ref).
class Recorder {
 public:
  Recorder(const std::string& prefix, DType dtype) : prefix_(prefix), dtype_(dtype) {
    auto b = IndexedDatasetBuilder::Create(prefix, dtype);
    REQUIRE(b.ok());
    builder_ = std::move(*b);
  }

  void Item(const std::vector<int32_t>& tokens) {
    REQUIRE(builder_->AddItem(tokens).ok());
    ops_.push_back(absl::StrCat("[\"item\", [", absl::StrJoin(tokens, ","), "]]"));
  }
  void End() {
    builder_->EndDocument();
    ops_.push_back("[\"end\"]");
  }
  void Doc(const std::vector<int32_t>& tokens, const std::vector<int32_t>& lengths) {
    REQUIRE(builder_->AddDocument(tokens, lengths).ok());
    ops_.push_back(absl::StrCat("[\"doc\", [", absl::StrJoin(tokens, ","), "], [",
                                absl::StrJoin(lengths, ","), "]]"));
  }
  void Index(const std::string& other) {
    REQUIRE(builder_->AddIndex(other).ok());
    ops_.push_back(absl::StrCat("[\"index\", \"", other, "\"]"));
  }

  // Finalizes ours, runs the reference, and compares both files byte for byte.
  void FinishAndCompare() {
    REQUIRE(builder_->Finalize().ok());
    const std::string spec_path = prefix_ + "_spec.json";
    {
      std::ofstream spec(spec_path);
      spec << "{\"prefix\": \"" << prefix_ << "_ref\", \"dtype\": \"" << DTypeName(dtype_)
           << "\", \"ops\": [" << absl::StrJoin(ops_, ",\n") << "]}\n";
    }
    const std::string cmd = absl::StrCat("/usr/bin/python3 ", kReference, " ", spec_path);
    const int rc = std::system(cmd.c_str());
    REQUIRE(WIFEXITED(rc));
    REQUIRE(WEXITSTATUS(rc) == 0);
    const std::string ours_idx = ReadFile(prefix_ + ".idx");
    const std::string ref_idx = ReadFile(prefix_ + "_ref.idx");
    CHECK(ours_idx.size() == ref_idx.size());
    CHECK(ours_idx == ref_idx);
    CHECK(ReadFile(prefix_ + ".bin") == ReadFile(prefix_ + "_ref.bin"));
  }

 private:
  std::string prefix_;
  DType dtype_;
  std::unique_ptr<IndexedDatasetBuilder> builder_;
  std::vector<std::string> ops_;
};

std::vector<int32_t> RandomTokens(std::mt19937_64& rng, int32_t max_token) {
  std::vector<int32_t> tokens(std::uniform_int_distribution<int>(0, 30)(rng));
  std::uniform_int_distribution<int32_t> token(0, max_token);
  for (int32_t& t : tokens) t = token(rng);
  return tokens;
}

// Random documents through AddItem/EndDocument (0..3 sequences, so some are empty) and
// AddDocument (0..3 lengths).
void RandomDocuments(std::mt19937_64& rng, Recorder& r, int num_docs, int32_t max_token) {
  std::uniform_int_distribution<int> num_seq(0, 3);
  for (int d = 0; d < num_docs; ++d) {
    const int k = num_seq(rng);
    if (rng() % 2 == 0) {
      for (int s = 0; s < k; ++s) r.Item(RandomTokens(rng, max_token));
      r.End();
    } else {
      std::vector<int32_t> flat, lengths;
      for (int s = 0; s < k; ++s) {
        auto seq = RandomTokens(rng, max_token);
        flat.insert(flat.end(), seq.begin(), seq.end());
        lengths.push_back(static_cast<int32_t>(seq.size()));
      }
      r.Doc(flat, lengths);
    }
  }
}

TEST_CASE("builder output is byte-identical to the Megatron reference writer",
          "[parity]") {
  std::random_device seed_source;
  const uint64_t seed = (uint64_t{seed_source()} << 32) | seed_source();
  INFO("seed " << seed);  // fresh each run; printed on failure to reproduce
  std::mt19937_64 rng(seed);
  const std::string dir = MakeTempDir();
  for (DType dtype : {DType::kUint16, DType::kInt32}) {
    const int32_t max_token = dtype == DType::kUint16 ? 65535 : 2147483647;
    const std::string tag = DTypeName(dtype);
    // Two plain datasets, then one merging them around documents of its own.
    for (const char* part : {"_a", "_b"}) {
      Recorder r(dir + "/" + tag + part, dtype);
      RandomDocuments(rng, r, 150, max_token);
      r.FinishAndCompare();
    }
    Recorder merged(dir + "/" + tag + "_merged", dtype);
    RandomDocuments(rng, merged, 10, max_token);
    merged.Index(dir + "/" + tag + "_a");
    RandomDocuments(rng, merged, 10, max_token);
    merged.Index(dir + "/" + tag + "_b");
    merged.End();  // an empty document after a merge
    merged.FinishAndCompare();
  }
}

}  // namespace
}  // namespace mxmaca::data
