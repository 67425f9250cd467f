// tests/integration/tiny_corpus.h: a small Megatron dataset of fresh random documents for
// end-to-end training tests, and the flags of a tiny GPT that trains on it in seconds.
#ifndef MXMACA_TESTS_INTEGRATION_TINY_CORPUS_H_
#define MXMACA_TESTS_INTEGRATION_TINY_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace mxmaca::testing {

// kTinyVocab: the NullTokenizer's --vocab-size; token ids are in [0, kTinyVocab), and the
// end-of-document id is kTinyVocab.
inline constexpr int kTinyVocab = 1000;

// TempDir: a fresh directory under $TEST_TMPDIR (or /tmp).
std::string TempDir(const std::string& name);

// MakeTinyCorpus: writes `num_docs` documents of 20..300 tokens from a Zipf-like
// distribution (so a model can learn something) at `prefix` (.bin/.idx), each ending with
// the end-of-document id; seeded by `seed`. Aborts the test on failure.
void MakeTinyCorpus(const std::string& prefix, int num_docs, uint64_t seed);

// TinyTrainArgs: `mxmaca train` flags for a 2-layer, hidden-64 GPT on `prefix` with
// dropout on, 8 iterations of 2 micro-batches, eval every 4.
std::vector<std::string> TinyTrainArgs(const std::string& prefix, const std::string& cache_dir);

}  // namespace mxmaca::testing

#endif  // MXMACA_TESTS_INTEGRATION_TINY_CORPUS_H_
