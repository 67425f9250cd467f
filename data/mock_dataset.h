// data/mock_dataset.h: Megatron-Core's MockGPTLowLevelDataset (gpt_dataset.py,
// core_v0.19.0): 100,000 synthetic sequences whose lengths are
// numpy.random.default_rng(seed=0).integers(1, 4096, size=100000, dtype=int32); sequence
// k of length L holds the tokens (1, 2, ..., L-1) % vocab_size (the tokenizer's) followed
// by the end-of-document token.
// `--mock-data` (and a run with no data path) samples from it through the ordinary
// GPTDataset index logic with the split "1,1,1", exactly as MockGPTDataset does.
#ifndef MXMACA_DATA_MOCK_DATASET_H_
#define MXMACA_DATA_MOCK_DATASET_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "data/gpt_dataset.h"

namespace mxmaca::data {

// MockTokenSource: the TokenSource of MockGPTLowLevelDataset. Tokens lie in
// [0, min(4094, vocab_size - 1)] plus `eod_token`; `vocab_size` <= 0 means no modulo (the
// tokens 1..4094 as they are); path_prefix() is "" (mock indices are never cached).
class MockTokenSource : public TokenSource {
 public:
  // Megatron's hard-coded constants (MockGPTLowLevelDataset.seed/size/max_sequence_length).
  static constexpr uint32_t kSeed = 0;
  static constexpr int64_t kSize = 100000;
  static constexpr int32_t kMaxSequenceLength = 4096;

  MockTokenSource(int32_t eod_token, int64_t vocab_size);

  absl::Span<const int32_t> sequence_lengths() const override { return lengths_; }
  absl::Status GetInto(int64_t seq, int64_t offset, absl::Span<int32_t> out) const override;
  std::string path_prefix() const override { return ""; }

 private:
  int32_t eod_token_;
  int64_t vocab_size_;
  std::vector<int32_t> lengths_;
};

}  // namespace mxmaca::data

#endif  // MXMACA_DATA_MOCK_DATASET_H_
