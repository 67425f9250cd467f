// data/internal/bpe_merges.cc: heap-based form of GPT-2's BPE merge loop.
#include "data/internal/bpe_merges.h"

#include <algorithm>
#include <cstddef>

namespace mxmaca::data::internal {

bool BpeMerges::Add(int32_t left, int32_t right, int32_t merged) {
  const Rule rule{static_cast<int32_t>(rules_.size()), merged};
  return rules_.emplace(Key(left, right), rule).second;
}

void BpeMerges::Apply(std::vector<int32_t>* symbols) const {
  const int32_t n = static_cast<int32_t>(symbols->size());
  if (n < 2) return;

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
