// actors/stage_input.h: how a StageProgram turns an op's message into its stage's forward
// input and the stage's output back into the ForwardResult the actor publishes
// (GptStageProgram, on every backend).
#ifndef MXMACA_ACTORS_STAGE_INPUT_H_
#define MXMACA_ACTORS_STAGE_INPUT_H_

#include <cstdint>

#include "actors/stage_program.h"
#include "data/gpt_batch.h"
#include "layers/gpt_parameters.h"
#include "layers/stage_io.h"

namespace mxmaca::actors {

// StageInputFor: the micro-batch `key` as a stage holding `layout` sees it: the global
// micro-batch id, iteration and MoE aux-loss scale of `key`; document starts on every
// stage with reset_attention_mask; tokens and position ids with the embedding, else the
// previous stage's `input` [b, s / seq_shards, h]; labels and loss mask with the loss
// head. A middle virtual stage gets no micro-batch data (batch.b == 0): its b and s come
// from the activation's shape (s = shape[1] x seq_shards, the sequence-parallel shards).
// Spans point into `batch` and `input`, which must outlive the forward call.
layers::MicroBatchInput StageInputFor(const MicroBatchKey& key, const data::GptMicroBatch& batch,
                                      const Activation* input, const layers::StageLayout& layout,
                                      bool reset_attention_mask, int64_t seq_shards);

// StoreForwardResult: the stage's output into `result`: the loss sum and token count, and
// on a stage without the loss head the hidden states (moved) with their shape
// [b, s / seq_shards, hidden_size].
void StoreForwardResult(const layers::MicroBatchInput& in, const layers::StageLayout& layout,
                        int64_t seq_shards, int64_t hidden_size, layers::StageOutput* out,
                        ForwardResult* result);

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_STAGE_INPUT_H_
