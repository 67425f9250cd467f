// layers/testing/stage_batches.cc: see stage_batches.h.
#include "layers/testing/stage_batches.h"

#include <cstring>

namespace mxmaca::layers::testing {

StageBatch MakeStageBatch(std::mt19937& rng, int64_t vocab_size, int64_t b, int64_t s,
                          const DocumentCuts& cuts) {
  StageBatch bt;
  bt.b = b;
  bt.s = s;
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab_size) - 1);
  for (int64_t i = 0; i < b * s; ++i) {
    bt.tokens.push_back(tok(rng));
    bt.labels.push_back(tok(rng));
    bt.mask.push_back((rng() % 5) == 0 ? 0.0f : 1.0f);
  }
  for (int64_t r = 0; r < b && cuts.kind != DocumentCuts::kNone; ++r) {
    if (cuts.kind == DocumentCuts::kRandom) {
      const int32_t cut = 2 + static_cast<int32_t>(rng() % (s - 3));
      for (int64_t p = 0; p < s; ++p) bt.doc_start.push_back(p < cut ? 0 : cut);
      continue;
    }
    const int64_t cut = cuts.first + r * cuts.step;
    for (int64_t p = 0; p < s; ++p) {
      bt.doc_start.push_back(p >= cut ? static_cast<int32_t>(cut) : 0);
      bt.positions.push_back(static_cast<int32_t>(p >= cut ? p - cut : p));
    }
  }
  return bt;
}

MicroBatchInput StageInput(const StageBatch& batch, int64_t id, int64_t iteration,
                           const std::vector<float>* hidden) {
  MicroBatchInput in;
  in.micro_batch_id = id;
  in.iteration = iteration;
  in.micro_batch_size = batch.b;
  in.seq_length = batch.s;
  in.tokens = batch.tokens;
  in.position_ids = batch.positions;
  in.doc_start = batch.doc_start;
  in.labels = batch.labels;
  in.loss_mask = batch.mask;
  if (hidden != nullptr) in.hidden = *hidden;
  return in;
}

bool BitEqual(absl::Span<const float> a, absl::Span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

}  // namespace mxmaca::layers::testing
