// actors/device_stage_program.cc: see device_stage_program.h.
#include "actors/device_stage_program.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "actors/stage_input.h"
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
  const layers::MicroBatchInput in =
      StageInputFor(key, batch, input, stage->layout(), reset_attention_mask_, /*seq_shards=*/1);
  layers::StageOutput out;
  out.hidden = std::move(result->output);  // the recycled buffer
  MXMACA_RETURN_IF_ERROR(stage->Forward(in, !key.eval, &out));
  StoreForwardResult(in, stage->layout(), /*seq_shards=*/1, stage->config().hidden_size, &out,
                     result);
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
  return layers::CrossStageTiedEmbedding(stage.config(), stage.layout(), stage.ids());
}

bool DeviceStageProgram::is_tied_copy(int chunk, int param) const {
  const layers::device::DeviceGptStage& stage = *chunks_[chunk];
  return layers::IsTiedEmbeddingCopy(stage.layout(), stage.ids(), param);
}

int64_t DeviceStageProgram::peak_activation_bytes() const {
  int64_t bytes = 0;
  for (const auto& chunk : chunks_) bytes += chunk->slot_bytes() * chunk->num_slots();
  return bytes;
}

}  // namespace mxmaca::actors
