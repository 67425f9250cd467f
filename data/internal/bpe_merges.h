// data/internal/bpe_merges.h: the byte-pair merge table and GPT-2's merge loop.
//
// Source: openai/gpt-2 src/encoder.py `Encoder.bpe` (= Megatron-LM's
// gpt2_tokenization.py `GPT2Tokenizer.bpe`). That loop repeatedly takes the
// adjacent pair with the lowest merge rank and, in one left-to-right pass, merges
// every non-overlapping occurrence of it, until no adjacent pair has a rank. Apply()
// computes the same result: words of up to kSmallWord symbols by that loop itself
// on stack arrays (keeping the ranks of pairs a pass did not touch), longer words
// in O(n log n) with a heap keyed by (rank, position): all entries of the lowest
// rank are popped as one batch (= one pass of the Python loop, positions in
// increasing order), and stale entries are skipped.
#ifndef MXMACA_DATA_INTERNAL_BPE_MERGES_H_
#define MXMACA_DATA_INTERNAL_BPE_MERGES_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace mxmaca::data::internal {

// BpeMerges: merge rules on token ids. Rule k (0-based, in insertion order) has
// rank k; lower ranks merge first.
class BpeMerges {
 public:
  // Add: appends the rule (left, right) -> merged with the next rank. Returns
  // false (and adds nothing) if a rule for (left, right) already exists.
  bool Add(int32_t left, int32_t right, int32_t merged);

  // size: number of rules.
  int64_t size() const { return static_cast<int64_t>(rules_.size()); }

  // Apply: merges `symbols` (token ids of one word, in order) in place, exactly as
  // GPT-2's Encoder.bpe does on the corresponding strings.
  void Apply(std::vector<int32_t>* symbols) const;

  // kSmallWord: words up to this many symbols take the array path.
  static constexpr int kSmallWord = 48;

 private:
  void ApplySmall(std::vector<int32_t>* symbols) const;
  void ApplyHeap(std::vector<int32_t>* symbols) const;

  struct Rule {
    int32_t rank;
    int32_t merged;
  };
  static uint64_t Key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  const Rule* Find(int32_t left, int32_t right) const {
    auto it = rules_.find(Key(left, right));
    return it == rules_.end() ? nullptr : &it->second;
  }

  absl::flat_hash_map<uint64_t, Rule> rules_;
  std::vector<int32_t> merged_by_rank_;  // [size()]
};

}  // namespace mxmaca::data::internal

#endif  // MXMACA_DATA_INTERNAL_BPE_MERGES_H_
