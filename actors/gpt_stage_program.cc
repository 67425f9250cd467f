// actors/gpt_stage_program.cc: see gpt_stage_program.h.
#include "actors/gpt_stage_program.h"

#include <utility>

namespace mxmaca::actors {

absl::Status GptStageProgram::Forward(const MicroBatchKey& key,
                                      const data::GptMicroBatch& batch,
                                      const Activation* input, ForwardResult* result) {
  const layers::StageLayout& layout = stage_->layout();
  layers::MicroBatchInput in;
  in.micro_batch_id = key.global_microbatch;
  in.iteration = key.iteration;
  in.micro_batch_size = batch.b;
  in.seq_length = batch.s;
  // Every stage's attention needs the document starts (--reset-attention-mask).
  if (reset_attention_mask_) in.doc_start = batch.doc_start;
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
  layers::StageOutput out;
  absl::Status s = key.eval ? stage_->EvalForward(in, &out) : stage_->Forward(in, &out);
  if (!s.ok()) return s;
  result->loss_sum = out.loss_sum;
  result->num_tokens = out.num_tokens;
  if (!layout.has_loss_head) {
    result->output.shape = {batch.b, batch.s, stage_->config().hidden_size};
    result->output.data = std::make_shared<const std::vector<float>>(std::move(out.hidden));
  }
  return absl::OkStatus();
}

absl::Status GptStageProgram::BackwardInput(const MicroBatchKey& key,
                                            const Activation* d_output,
                                            float loss_grad_scale, Activation* d_input) {
  absl::Span<const float> dout;
  if (d_output != nullptr && d_output->data) dout = *d_output->data;
  std::vector<float> din;
  absl::Status s = stage_->BackwardInput(key.global_microbatch, dout, loss_grad_scale, &din);
  if (!s.ok()) return s;
  if (d_input != nullptr && !din.empty()) {
    d_input->shape = {static_cast<int64_t>(din.size())};
    d_input->data = std::make_shared<const std::vector<float>>(std::move(din));
  }
  return absl::OkStatus();
}

absl::Status GptStageProgram::BackwardWeight(const MicroBatchKey& key) {
  return stage_->BackwardWeight(key.global_microbatch);
}

}  // namespace mxmaca::actors
