// layers/modules/embedding.cc
#include "layers/modules/embedding.h"

namespace mxmaca::layers::modules {

absl::Status WordEmbeddingForward(device::DeviceKernels& k, const VocabRows& vocab,
                                  const int32_t* tokens, const float* word, int64_t t, int64_t h,
                                  float* out) {
  if (vocab.sharded) {
    return k.VocabShardEmbeddingForward(tokens, t, word, vocab.start, vocab.rows, h, out, false);
  }
  return k.EmbeddingForward(tokens, t, word, h, out, false);
}

absl::Status PositionEmbeddingAdd(device::DeviceKernels& k, const int32_t* positions,
                                  const float* position_table, int64_t t, int64_t h, float* out) {
  return k.EmbeddingForward(positions, t, position_table, h, out, true);
}

absl::Status WordEmbeddingBackward(device::DeviceKernels& k, const VocabRows& vocab,
                                   const int32_t* tokens, const float* d_out, int64_t t, int64_t h,
                                   float* d_word) {
  if (vocab.sharded) {
    return k.VocabShardEmbeddingBackward(tokens, t, d_out, vocab.start, vocab.rows, h, d_word);
  }
  return k.EmbeddingBackward(tokens, t, d_out, h, d_word);
}

absl::Status PositionEmbeddingBackward(device::DeviceKernels& k, const int32_t* positions,
                                       const float* d_out, int64_t t, int64_t h,
                                       float* d_position) {
  return k.EmbeddingBackward(positions, t, d_out, h, d_position);
}

}  // namespace mxmaca::layers::modules
