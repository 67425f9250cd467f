// Tests BpeMerges::Apply (heap form) against a line-by-line transcription of
// openai/gpt-2 src/encoder.py's `Encoder.bpe` loop on random merge tables.
#include "data/internal/bpe_merges.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <utility>
#include <vector>

namespace mxmaca::data::internal {
namespace {

using Pair = std::pair<int32_t, int32_t>;

// ReferenceBpe: encoder.py's loop on ids: take the adjacent pair of lowest rank;
// rebuild the word merging each occurrence of it left to right; repeat.
std::vector<int32_t> ReferenceBpe(std::vector<int32_t> word,
                                  const std::map<Pair, std::pair<int, int32_t>>& rules) {
  while (word.size() > 1) {
    int best_rank = std::numeric_limits<int>::max();
    Pair bigram;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = rules.find({word[i], word[i + 1]});
      if (it != rules.end() && it->second.first < best_rank) {
        best_rank = it->second.first;
        bigram = it->first;
      }
    }
    if (best_rank == std::numeric_limits<int>::max()) break;
    const int32_t merged = rules.at(bigram).second;
    std::vector<int32_t> new_word;
    size_t i = 0;
    while (i < word.size()) {
      if (word[i] == bigram.first && i + 1 < word.size() && word[i + 1] == bigram.second) {
        new_word.push_back(merged);
        i += 2;
      } else {
        new_word.push_back(word[i]);
        i += 1;
      }
    }
    word = std::move(new_word);
  }
  return word;
}

TEST_CASE("BpeMerges::Apply merges by rank, all occurrences per pass") {
  // Ids 0 = a, 1 = b, 2 = c; rules a b -> 3 (ab), ab c -> 4 (abc), a a -> 5 (aa).
  BpeMerges merges;
  REQUIRE(merges.Add(0, 1, 3));
  REQUIRE(merges.Add(3, 2, 4));
  REQUIRE(merges.Add(0, 0, 5));
  CHECK(!merges.Add(0, 1, 7));  // repeated pair
  CHECK(merges.size() == 3);
  std::vector<int32_t> w = {0, 1, 2, 0, 1};  // a b c a b
  merges.Apply(&w);
  CHECK(w == std::vector<int32_t>{4, 3});  // abc ab
  w = {0, 0, 0};                           // a a a: left-to-right, non-overlapping
  merges.Apply(&w);
  CHECK(w == std::vector<int32_t>{5, 0});
  w = {2};
  merges.Apply(&w);
  CHECK(w == std::vector<int32_t>{2});
}

TEST_CASE("BpeMerges::Apply equals encoder.py's loop on random tables") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int table = 0; table < 200; ++table) {
    // Tokens have string lengths; a merged token's length is the sum of its parts'
    // (as for strings), and a merged id may be shared by two rules, as "abc" is by
    // (a, bc) and (ab, c). Ranks are shuffled, so some tables rank a rule that uses a
    // token before the rule that makes it (not the case in GPT-2's file, but the
    // Python loop still defines the result).
    const int alphabet = 2 + static_cast<int>(rng() % 4);
    std::vector<int> length(alphabet, 1);
    std::map<Pair, std::pair<int, int32_t>> rules;
    std::vector<std::pair<Pair, int32_t>> order;
    const int num_rules = 1 + static_cast<int>(rng() % 30);
    for (int r = 0; r < num_rules; ++r) {
      const int32_t left = static_cast<int32_t>(rng() % length.size());
      const int32_t right = static_cast<int32_t>(rng() % length.size());
      if (rules.count({left, right})) continue;
      const int len = length[left] + length[right];
      int32_t merged = -1;
      for (int32_t id = 0; id < static_cast<int32_t>(length.size()) && merged < 0; ++id) {
        if (length[id] == len && rng() % 2 == 0) merged = id;
      }
      if (merged < 0) {
        merged = static_cast<int32_t>(length.size());
        length.push_back(len);
      }
      rules[{left, right}] = {0, merged};
      order.push_back({{left, right}, merged});
    }
    std::shuffle(order.begin(), order.end(), rng);
    BpeMerges merges;
    for (size_t k = 0; k < order.size(); ++k) {
      rules[order[k].first].first = static_cast<int>(k);
      REQUIRE(merges.Add(order[k].first.first, order[k].first.second, order[k].second));
    }
    for (int trial = 0; trial < 50; ++trial) {
      // Both paths of Apply: up to kSmallWord symbols and beyond.
      const size_t len = trial % 3 == 0 ? BpeMerges::kSmallWord - 5 + rng() % 150 : 1 + rng() % 40;
      std::vector<int32_t> word(len);
      for (auto& id : word) id = static_cast<int32_t>(rng() % alphabet);
      std::vector<int32_t> got = word;
      merges.Apply(&got);
      REQUIRE(got == ReferenceBpe(word, rules));
    }
  }
}

}  // namespace
}  // namespace mxmaca::data::internal
