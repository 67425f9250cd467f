// data/internal/bpe_merges.cc: GPT-2's BPE merge loop, array form (short words) and heap form.
#include "data/internal/bpe_merges.h"

#include <algorithm>
#include <cstddef>
#include <limits>

namespace mxmaca::data::internal {

bool BpeMerges::Add(int32_t left, int32_t right, int32_t merged) {
  const Rule rule{static_cast<int32_t>(rules_.size()), merged};
  if (!rules_.emplace(Key(left, right), rule).second) return false;
  merged_by_rank_.push_back(merged);
  return true;
}

void BpeMerges::Apply(std::vector<int32_t>* symbols) const {
  if (symbols->size() < 2) return;
  if (symbols->size() <= static_cast<size_t>(kSmallWord)) {
    ApplySmall(symbols);
  } else {
    ApplyHeap(symbols);
  }
}

void BpeMerges::ApplySmall(std::vector<int32_t>* symbols) const {
  constexpr int32_t kNoRank = std::numeric_limits<int32_t>::max();
  int32_t* ids = symbols->data();
  int n = static_cast<int>(symbols->size());
  // rank[i]: rank of the pair (ids[i], ids[i + 1]), kNoRank if no rule.
  int32_t rank[kSmallWord];
  auto rank_of = [&](int32_t left, int32_t right) {
    const Rule* rule = Find(left, right);
    return rule == nullptr ? kNoRank : rule->rank;
  };
  for (int i = 0; i + 1 < n; ++i) rank[i] = rank_of(ids[i], ids[i + 1]);
  while (n > 1) {
    int32_t best = kNoRank;
    for (int i = 0; i + 1 < n; ++i) best = std::min(best, rank[i]);
    if (best == kNoRank) break;
    // One pass of the Python loop: ranks are unique per pair, so rank[i] == best
    // finds the occurrences of the chosen pair; merge them left to right.
    const int32_t merged = merged_by_rank_[best];
    int32_t old_pos[kSmallWord];  // old index of each kept element (-1: merged)
    int out = 0;
    for (int i = 0; i < n; ++out) {
      if (i + 1 < n && rank[i] == best) {
        ids[out] = merged;
        old_pos[out] = -1;
        i += 2;
      } else {
        ids[out] = ids[i];
        old_pos[out] = i;
        i += 1;
      }
    }
    // Pairs of two kept elements were adjacent before and keep their rank.
    for (int k = 0; k + 1 < out; ++k) {
      rank[k] =
          (old_pos[k] >= 0 && old_pos[k + 1] >= 0) ? rank[old_pos[k]] : rank_of(ids[k], ids[k + 1]);
    }
    n = out;
  }
  symbols->resize(static_cast<size_t>(n));
}

void BpeMerges::ApplyHeap(std::vector<int32_t>* symbols) const {
  const int32_t n = static_cast<int32_t>(symbols->size());

  // A doubly linked list over the positions; a merge keeps the left position and
  // unlinks the right one (id = -1 marks it dead).
  struct Node {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  // A candidate merge of the pair starting at `pos`, valid while the ids there are
  // still (left, right): ids only ever get longer, so a changed pair never
  // reappears with the same ids.
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t left;
    int32_t right;
  };
  auto after = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;  // min-heap
  };

  std::vector<Node> nodes(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) nodes[i] = {(*symbols)[i], i - 1, i + 1 < n ? i + 1 : -1};
  std::vector<Candidate> heap;
  heap.reserve(static_cast<size_t>(n));
  auto push_pair = [&](int32_t pos) {
    if (pos < 0) return;
    const int32_t next = nodes[pos].next;
    if (next < 0) return;
    if (const Rule* rule = Find(nodes[pos].id, nodes[next].id)) {
      heap.push_back({rule->rank, pos, nodes[pos].id, nodes[next].id});
      std::push_heap(heap.begin(), heap.end(), after);
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);

  std::vector<Candidate> batch;
  std::vector<int32_t> touched;
  while (!heap.empty()) {
    // One pass of the Python loop: every occurrence of the lowest-ranked pair, left
    // to right. Pairs created by this pass contain the merged token and so have a
    // different rank; they wait for later passes even when their rank is lower.
    const int32_t rank = heap.front().rank;
    batch.clear();
    while (!heap.empty() && heap.front().rank == rank) {
      std::pop_heap(heap.begin(), heap.end(), after);
      batch.push_back(heap.back());
      heap.pop_back();
    }
    touched.clear();
    for (const Candidate& c : batch) {
      Node& left = nodes[c.pos];
      if (left.id != c.left || left.next < 0) continue;
      Node& right = nodes[left.next];
      if (right.id != c.right) continue;
      left.id = Find(c.left, c.right)->merged;
      right.id = -1;
      left.next = right.next;
      if (right.next >= 0) nodes[right.next].prev = c.pos;
      touched.push_back(c.pos);
    }
    // New pairs around each merged token (pushed after the pass, see above).
    for (int32_t pos : touched) {
      if (nodes[pos].id < 0) continue;
      push_pair(nodes[pos].prev);
      push_pair(pos);
    }
  }

  int32_t out = 0;
  for (int32_t i = 0; i >= 0; i = nodes[i].next) (*symbols)[out++] = nodes[i].id;
  symbols->resize(static_cast<size_t>(out));
}

}  // namespace mxmaca::data::internal
