// layers/testing/stage_batches.h (testonly): the random micro-batches the stage tests feed
// to GptStage, and the MicroBatchInput they make of them, in one place.
#ifndef MXMACA_LAYERS_TESTING_STAGE_BATCHES_H_
#define MXMACA_LAYERS_TESTING_STAGE_BATCHES_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "layers/stage_io.h"

namespace mxmaca::layers::testing {

// StageBatch: one micro-batch of b rows of s tokens: tokens and labels (int32 ids in
// [0, vocab)), loss mask (fp32, 0 for about one token in five), and, when the rows hold two
// documents, the start of each token's document (doc_start) and position ids restarting
// at that start (positions). All arrays [b, s], row-major.
struct StageBatch {
  int64_t b = 2, s = 12;
  std::vector<int32_t> tokens, labels, positions, doc_start;
  std::vector<float> mask;
};

// DocumentCuts: where the second document of each row starts. kNone: one document per row
// (doc_start and positions left empty); kFixed: at first + r * step in row r, with
// positions restarting there; kRandom: at 2 + a draw in [0, s - 3), doc_start only.
struct DocumentCuts {
  enum Kind { kNone, kFixed, kRandom };
  Kind kind = kNone;
  int64_t first = 3;
  int64_t step = 2;
};

// MakeStageBatch: a fresh batch drawn from `rng`: for each of the b * s tokens, in order,
// a token, a label and the mask (rng() % 5 == 0 masks it); then the cuts (kRandom draws one
// per row). The caller keeps drawing from `rng` for anything else the test needs.
StageBatch MakeStageBatch(std::mt19937& rng, int64_t vocab_size, int64_t b, int64_t s,
                          const DocumentCuts& cuts = {});

// StageInput: the MicroBatchInput of `batch` as micro-batch `id` of `iteration`, with
// every array of the batch (empty ones stay empty) and `hidden` (the previous stage's
// output, [b, s, h]) when given.
MicroBatchInput StageInput(const StageBatch& batch, int64_t id, int64_t iteration = 1,
                           const std::vector<float>* hidden = nullptr);

// BitEqual: same length and the same bytes.
bool BitEqual(absl::Span<const float> a, absl::Span<const float> b);

}  // namespace mxmaca::layers::testing

#endif  // MXMACA_LAYERS_TESTING_STAGE_BATCHES_H_
