// tests/integration/tiny_corpus.cc: see tiny_corpus.h.
#include "tests/integration/tiny_corpus.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

#include <catch2/catch.hpp>

#include "data/indexed_dataset.h"

namespace mxmaca::testing {

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(base ? base : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void MakeTinyCorpus(const std::string& prefix, int num_docs, uint64_t seed) {
  auto builder = data::IndexedDatasetBuilder::Create(prefix, data::DTypeForVocab(kTinyVocab + 1));
  REQUIRE(builder.ok());
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> len(20, 300);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int d = 0; d < num_docs; ++d) {
    std::vector<int32_t> doc(len(rng));
    int32_t prev = 0;
    for (size_t i = 0; i + 1 < doc.size(); ++i) {
      // Zipf-like ids with a dependency on the previous token: learnable structure.
      const int32_t z = static_cast<int32_t>(std::pow(kTinyVocab, u(rng))) - 1;
      doc[i] = (u(rng) < 0.3) ? (prev * 7 + 3) % kTinyVocab : z;
      prev = doc[i];
    }
    doc.back() = kTinyVocab;  // end of document
    REQUIRE((*builder)->AddItem(doc).ok());
    (*builder)->EndDocument();
  }
  REQUIRE((*builder)->Finalize().ok());
}

std::vector<std::string> TinyTrainArgs(const std::string& prefix, const std::string& cache_dir) {
  return {"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
          "--seq-length", "32", "--max-position-embeddings", "32",
          "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "8",
          "--lr", "1e-3", "--min-lr", "1e-4", "--lr-decay-style", "cosine",
          "--lr-warmup-iters", "2", "--weight-decay", "0.1", "--clip-grad", "1.0",
          "--hidden-dropout", "0.1", "--attention-dropout", "0.1", "--seed", "7",
          "--data-path", prefix, "--split", "90,10,0", "--data-cache-path", cache_dir,
          "--tokenizer-type", "NullTokenizer", "--vocab-size", std::to_string(kTinyVocab),
          "--eval-interval", "4", "--eval-iters", "1", "--log-interval", "1",
          "--num-threads", "1"};
}

}  // namespace mxmaca::testing
