// actors/device_stage_program.cc: see device_stage_program.h.
#include "actors/device_stage_program.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mxmaca::actors {

DeviceStageProgram::DeviceStageProgram(
    std::unique_ptr<layers::device::DeviceKernels> kernels,
    std::vector<std::unique_ptr<layers::device::DeviceGptStage>> chunks, int64_t num_microbatches,
    bool reset_attention_mask)
    : kernels_(std::move(kernels)),
      chunks_(std::move(chunks)),
      num_microbatches_(num_microbatches),
      reset_attention_mask_(reset_attention_mask),
      w_done_(chunks_.size(), 0) {}

DeviceStageProgram::~DeviceStageProgram() {
  chunks_.clear();  // before the kernels they allocated from
}

absl::StatusOr<layers::device::DeviceGptStage*> DeviceStageProgram::Chunk(
    const MicroBatchKey& key) {
  if (key.chunk < 0 || key.chunk >= num_chunks()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model chunk ", key.chunk, " out of range: this stage has ", num_chunks(), " chunk(s)"));
  }
  return chunks_[key.chunk].get();
}

absl::Status DeviceStageProgram::SyncParameters(const MicroBatchKey& key) {
  if (synced_ && synced_iteration_ == key.iteration && synced_eval_ == key.eval) {
    return absl::OkStatus();
  }
  for (auto& chunk : chunks_) MXMACA_RETURN_IF_ERROR(chunk->UploadParameters());
  synced_ = true;
  synced_iteration_ = key.iteration;
  synced_eval_ = key.eval;
  return absl::OkStatus();
}

absl::Status DeviceStageProgram::Forward(const MicroBatchKey& key, const data::GptMicroBatch& batch,
                                         const Activation* input, ForwardResult* result) {
  MXMACA_ASSIGN_OR_RETURN(layers::device::DeviceGptStage * stage, Chunk(key));
  MXMACA_RETURN_IF_ERROR(SyncParameters(key));
  const layers::StageLayout& layout = stage->layout();
  layers::device::DeviceMicroBatch in;
  in.micro_batch_id = key.global_microbatch;
  in.iteration = key.iteration;
  in.micro_batch_size = batch.b;
  in.seq_length = batch.s;
  // A middle virtual stage gets no data: b and s from the activation [b, s, h].
  if (batch.b == 0 && input != nullptr && input->shape.size() == 3) {
    in.micro_batch_size = input->shape[0];
    in.seq_length = input->shape[1];
  }
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
  layers::device::DeviceStageOutput out;
  out.hidden = std::move(result->output);  // the recycled buffer
  MXMACA_RETURN_IF_ERROR(stage->Forward(in, !key.eval, &out));
  result->loss_sum = out.loss_sum;
  result->num_tokens = out.num_tokens;
  if (!layout.has_loss_head) {
    result->output_shape = {in.micro_batch_size, in.seq_length, stage->config().hidden_size};
  }
  result->output = std::move(out.hidden);
  return absl::OkStatus();
}

absl::Status DeviceStageProgram::BackwardInput(const MicroBatchKey& key, const Activation* d_output,
                                               float loss_grad_scale, std::vector<float>* d_input) {
  MXMACA_ASSIGN_OR_RETURN(layers::device::DeviceGptStage * stage, Chunk(key));
  absl::Span<const float> dout;
  if (d_output != nullptr && d_output->data) dout = *d_output->data;
  std::vector<float> scratch;
  return stage->BackwardInput(key.global_microbatch, dout, loss_grad_scale,
                              d_input != nullptr ? d_input : &scratch);
}

absl::Status DeviceStageProgram::BackwardWeight(const MicroBatchKey& key) {
  MXMACA_ASSIGN_OR_RETURN(layers::device::DeviceGptStage * stage, Chunk(key));
  MXMACA_RETURN_IF_ERROR(stage->BackwardWeight(key.global_microbatch));
  if (++w_done_[key.chunk] < num_microbatches_) return absl::OkStatus();
  // The chunk's gradients are final: to the host arena for the reduction and the step.
  w_done_[key.chunk] = 0;
  MXMACA_RETURN_IF_ERROR(stage->DownloadGradients());
  return stage->ZeroGrads();
}

int DeviceStageProgram::tied_embedding_parameter(int chunk) const {
  const layers::device::DeviceGptStage& stage = *chunks_[chunk];
  const layers::StageLayout& layout = stage.layout();
  if (!stage.config().tied_embeddings()) return -1;
  if (layout.has_embedding && layout.has_loss_head) return -1;
  if (!layout.has_embedding && !layout.has_loss_head) return -1;
  return stage.ids().word_embeddings;
}

bool DeviceStageProgram::is_tied_copy(int chunk, int param) const {
  const layers::device::DeviceGptStage& stage = *chunks_[chunk];
  return !stage.layout().has_embedding && param >= 0 && param == stage.ids().word_embeddings;
}

int64_t DeviceStageProgram::peak_activation_bytes() const {
  int64_t bytes = 0;
  for (const auto& chunk : chunks_) bytes += chunk->slot_bytes() * chunk->num_slots();
  return bytes;
}

}  // namespace mxmaca::actors
