// actors/stage_input.cc: see stage_input.h.
#include "actors/stage_input.h"

#include <utility>

namespace mxmaca::actors {

layers::MicroBatchInput StageInputFor(const MicroBatchKey& key, const data::GptMicroBatch& batch,
                                      const Activation* input, const layers::StageLayout& layout,
                                      bool reset_attention_mask, int64_t seq_shards) {
  layers::MicroBatchInput in;
  in.micro_batch_id = key.global_microbatch;
  in.moe_aux_loss_grad_scale = key.moe_aux_loss_grad_scale;
  in.iteration = key.iteration;
  in.micro_batch_size = batch.b;
  in.seq_length = batch.s;
  if (batch.b == 0 && input != nullptr && input->shape.size() == 3) {
    in.micro_batch_size = input->shape[0];
    in.seq_length = input->shape[1] * seq_shards;
  }
  // Every stage's attention needs the document starts (--reset-attention-mask).
  if (reset_attention_mask) in.doc_start = batch.doc_start;
  if (layout.has_embedding) {
    in.tokens = batch.tokens;
    in.position_ids = batch.position_ids;
  } else if (input != nullptr && input->data) {
    in.hidden = *input->data;
  }
  if (layout.has_loss_head) {
    in.labels = batch.labels;
    in.loss_mask = batch.loss_mask;
  }
  return in;
}

void StoreForwardResult(const layers::MicroBatchInput& in, const layers::StageLayout& layout,
                        int64_t seq_shards, int64_t hidden_size, layers::StageOutput* out,
                        ForwardResult* result) {
  result->loss_sum = out->loss_sum;
  result->num_tokens = out->num_tokens;
  if (!layout.has_loss_head) {
    result->output_shape = {in.micro_batch_size, in.seq_length / seq_shards, hidden_size};
  }
  result->output = std::move(out->hidden);
}

}  // namespace mxmaca::actors
