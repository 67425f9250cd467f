// layers/modules/embedding.h: Megatron's LanguageModelEmbedding — the word embedding
// (VocabParallelEmbedding: this rank's vocabulary rows) plus the learned position
// embedding — forward and backward-weight, written once against the backend interface
// (layers/device/device_kernels.h).
//
// Source: megatron/core/models/common/embeddings/language_model_embedding.py and
// megatron/core/tensor_parallel/layers.py (VocabParallelEmbedding). The sum over the TP
// ranks of a sharded lookup, the sequence-parallel scatter and the embedding dropout are
// the caller's (layers/gpt_stage.h): they are collectives or depend on the layout.
//
// Shapes (t = tokens, h = hidden; backend memory): tokens, positions int32 [t]; word
// [rows, h] holding vocabulary rows [start, start + rows); position table [max_pos, h];
// out, d_out [t, h] fp32. Token ids outside the shard give zero rows (never read out of
// bounds); position ids must be < max_pos (the caller validates them on the host).
// Errors: the backend's (kInvalidArgument for negative sizes, kInternal on the device).
#ifndef MXMACA_LAYERS_MODULES_EMBEDDING_H_
#define MXMACA_LAYERS_MODULES_EMBEDDING_H_

#include <cstdint>

#include "absl/status/status.h"
#include "layers/device/device_kernels.h"

namespace mxmaca::layers::modules {

// VocabRows: the word-embedding rows this rank holds. sharded = false: the whole table
// (tensor parallel size 1; start 0), looked up without the shard test.
struct VocabRows {
  bool sharded = false;
  int64_t start = 0, rows = 0;
};

// WordEmbeddingForward: out = word[tokens] (VocabParallelEmbedding: this shard's rows,
// zero rows for the other shards' tokens; the caller sums over TP).
absl::Status WordEmbeddingForward(device::DeviceKernels& k, const VocabRows& vocab,
                                  const int32_t* tokens, const float* word, int64_t t, int64_t h,
                                  float* out);
// PositionEmbeddingAdd: out += position_table[positions] (learned absolute positions).
absl::Status PositionEmbeddingAdd(device::DeviceKernels& k, const int32_t* positions,
                                  const float* position_table, int64_t t, int64_t h, float* out);

// WordEmbeddingBackward: ACCUMULATES d_word[tokens - start] += d_out for this shard's
// tokens, in increasing token order (the same order on every backend, so the same bits).
absl::Status WordEmbeddingBackward(device::DeviceKernels& k, const VocabRows& vocab,
                                   const int32_t* tokens, const float* d_out, int64_t t, int64_t h,
                                   float* d_word);
// PositionEmbeddingBackward: ACCUMULATES d_position[positions] += d_out, token order.
absl::Status PositionEmbeddingBackward(device::DeviceKernels& k, const int32_t* positions,
                                       const float* d_out, int64_t t, int64_t h, float* d_position);

}  // namespace mxmaca::layers::modules

#endif  // MXMACA_LAYERS_MODULES_EMBEDDING_H_
