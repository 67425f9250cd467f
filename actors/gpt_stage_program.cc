// actors/gpt_stage_program.cc: see gpt_stage_program.h.
#include "actors/gpt_stage_program.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "actors/stage_input.h"
#include "base/status_macros.h"
#include "layers/context_parallel/cp_batch.h"

namespace mxmaca::actors {

GptStageProgram::GptStageProgram(std::vector<std::unique_ptr<layers::GptStage>> chunks,
                                 bool reset_attention_mask)
    : chunks_(std::move(chunks)), reset_attention_mask_(reset_attention_mask) {}

GptStageProgram::GptStageProgram(std::unique_ptr<layers::GptStage> stage,
                                 bool reset_attention_mask)
    : reset_attention_mask_(reset_attention_mask) {
  chunks_.push_back(std::move(stage));
}

GptStageProgram::GptStageProgram(std::unique_ptr<layers::device::DeviceKernels> kernels,
                                 std::vector<std::unique_ptr<layers::GptStage>> chunks,
                                 int64_t num_microbatches, bool reset_attention_mask)
    : kernels_(std::move(kernels)),
      chunks_(std::move(chunks)),
      reset_attention_mask_(reset_attention_mask),
      num_microbatches_(num_microbatches),
      w_done_(chunks_.size(), 0) {}

GptStageProgram::~GptStageProgram() {
  chunks_.clear();  // before the kernels they allocated from
}

absl::Status GptStageProgram::SyncParameters(const MicroBatchKey& key) {
  if (!on_device() || (synced_ && (state_on_backend_ || (synced_iteration_ == key.iteration &&
                                                         synced_eval_ == key.eval)))) {
    return absl::OkStatus();
  }
  for (auto& chunk : chunks_) MXMACA_RETURN_IF_ERROR(chunk->UploadParameters());
  synced_ = true;
  synced_iteration_ = key.iteration;
  synced_eval_ = key.eval;
  return absl::OkStatus();
}

int64_t GptStageProgram::parameter_bytes() const {
  int64_t bytes = 0;
  for (const auto& chunk : chunks_) bytes += 4 * chunk->parameters().arena_elements();
  return bytes;
}

int64_t GptStageProgram::peak_activation_bytes() const {
  if (!on_device()) return peak_;
  int64_t bytes = 0;
  for (const auto& chunk : chunks_) bytes += chunk->slot_bytes() * chunk->num_slots();
  return bytes;
}

absl::StatusOr<layers::GptStage*> GptStageProgram::Chunk(const MicroBatchKey& key) {
  if (key.chunk < 0 || key.chunk >= num_chunks()) {
    return absl::InvalidArgumentError(absl::StrCat("model chunk ", key.chunk,
                                                   " out of range: this stage has ",
                                                   num_chunks(), " chunk(s)"));
  }
  return chunks_[key.chunk].get();
}

absl::Status GptStageProgram::Forward(const MicroBatchKey& key,
                                      const data::GptMicroBatch& batch,
                                      const Activation* input, ForwardResult* result) {
  absl::StatusOr<layers::GptStage*> chunk = Chunk(key);
  if (!chunk.ok()) return chunk.status();
  layers::GptStage& stage = **chunk;
  MXMACA_RETURN_IF_ERROR(SyncParameters(key));
  // Context parallelism: this CP rank's two chunks of every [b, s] array (original
  // positions, labels and document starts kept; cp_batch.h).
  data::GptMicroBatch cp_local;
  if (stage.context_parallel().enabled() && batch.b > 0) {
    absl::StatusOr<data::GptMicroBatch> sliced = layers::cp::SliceMicroBatchForCpRank(
        stage.cp_layout(), stage.context_parallel().rank, batch);
    if (!sliced.ok()) return sliced.status();
    cp_local = std::move(*sliced);
  }
  return ForwardOn(stage, key, cp_local.b > 0 ? cp_local : batch, input, result);
}

absl::Status GptStageProgram::ForwardOn(layers::GptStage& stage, const MicroBatchKey& key,
                                        const data::GptMicroBatch& batch,
                                        const Activation* input, ForwardResult* result) {
  const layers::TensorParallelContext& tp = stage.tensor_parallel();
  const int64_t seq_shards = tp.sp() ? tp.size : 1;
  const layers::MicroBatchInput in =
      StageInputFor(key, batch, input, stage.layout(), reset_attention_mask_, seq_shards);
  layers::StageOutput out;
  out.hidden = std::move(result->output);  // the recycled buffer (GptStage assigns into it)
  BeginCall(key.chunk);
  absl::Status s = key.eval ? stage.EvalForward(in, &out) : stage.Forward(in, &out);
  EndCall(key.chunk);
  if (!s.ok()) return s;
  StoreForwardResult(in, stage.layout(), seq_shards, stage.config().hidden_size, &out, result);
  return absl::OkStatus();
}

absl::Status GptStageProgram::BackwardInput(const MicroBatchKey& key,
                                            const Activation* d_output,
                                            float loss_grad_scale,
                                            std::vector<float>* d_input) {
  absl::StatusOr<layers::GptStage*> chunk = Chunk(key);
  if (!chunk.ok()) return chunk.status();
  absl::Span<const float> dout;
  if (d_output != nullptr && d_output->data) dout = *d_output->data;
  std::vector<float> scratch;
  BeginCall(key.chunk);
  absl::Status s = (*chunk)->BackwardInput(key.global_microbatch, dout, loss_grad_scale,
                                           d_input != nullptr ? d_input : &scratch);
  EndCall(key.chunk);
  return s;
}

absl::Status GptStageProgram::BackwardWeight(const MicroBatchKey& key) {
  absl::StatusOr<layers::GptStage*> chunk = Chunk(key);
  if (!chunk.ok()) return chunk.status();
  BeginCall(key.chunk);
  absl::Status s = (*chunk)->BackwardWeight(key.global_microbatch);
  EndCall(key.chunk);
  if (!s.ok() || !on_device() || ++w_done_[key.chunk] < num_microbatches_) return s;
  w_done_[key.chunk] = 0;
  if (state_on_backend_) return s;  // they stay for GradSumSquaresOnBackend / StepOnBackend
  // The chunk's gradients are final: to the host arena for the reduction and the step.
  MXMACA_RETURN_IF_ERROR((*chunk)->DownloadGradients());
  return (*chunk)->ZeroGrads();
}

int GptStageProgram::tied_embedding_parameter(int chunk) const {
  const layers::GptStage& stage = *chunks_[chunk];
  return layers::CrossStageTiedEmbedding(stage.config(), stage.layout(), stage.parameter_ids());
}

bool GptStageProgram::is_tied_copy(int chunk, int param) const {
  const layers::GptStage& stage = *chunks_[chunk];
  return layers::IsTiedEmbeddingCopy(stage.layout(), stage.parameter_ids(), param);
}

bool GptStageProgram::counts_toward_grad_norm(int chunk, int param) const {
  if (is_tied_copy(chunk, param)) return false;
  const layers::GptStage& stage = *chunks_[chunk];
  if (stage.holds_expert_shard(param)) return true;  // this EP rank's experts
  return layers::CountsTowardGradNorm(stage.parameters().info(param),
                                      stage.tensor_parallel().rank);
}

absl::StatusOr<double> GptStageProgram::GradSumSquaresOnBackend(
    int chunk, absl::Span<const layers::GradBucket> ranges) {
  if (!state_on_backend_) return StageProgram::GradSumSquaresOnBackend(chunk, ranges);
  return chunks_[chunk]->GradSumSquares(ranges);
}

absl::Status GptStageProgram::StepOnBackend(int chunk, layers::AdamWOptimizer& optimizer, bool skip,
                                            absl::Span<const double> grad_factors, double lr,
                                            double decoupled_lr, double weight_decay) {
  if (!state_on_backend_) {
    return StageProgram::StepOnBackend(chunk, optimizer, skip, grad_factors, lr, decoupled_lr,
                                       weight_decay);
  }
  layers::GptStage& stage = *chunks_[chunk];
  if (!skip) {
    for (const double factor : grad_factors) {
      if (factor != 1.0) MXMACA_RETURN_IF_ERROR(stage.ScaleGrads(static_cast<float>(factor)));
    }
    MXMACA_RETURN_IF_ERROR(stage.StepOptimizer(optimizer, lr, decoupled_lr, weight_decay));
  }
  return stage.ZeroGrads();
}

absl::Status GptStageProgram::DownloadTrainingState(int chunk, layers::AdamWOptimizer& optimizer) {
  if (!state_on_backend_) return absl::OkStatus();
  return chunks_[chunk]->DownloadOptimizerState(optimizer);
}

void GptStageProgram::BeginCall(int chunk) { chunks_[chunk]->ResetPeakActivationBytes(); }

void GptStageProgram::EndCall(int chunk) {
  // Exact stage peak: the other chunks' stashes are unchanged during the call, and the
  // called chunk's tracker saw its own peak within the call.
  int64_t others = 0;
  for (int c = 0; c < num_chunks(); ++c) {
    if (c != chunk) others += chunks_[c]->live_activation_bytes();
  }
  peak_ = std::max(peak_, others + chunks_[chunk]->peak_activation_bytes());
}

absl::Status GptStageProgram::FinishTrainingIteration() {
  for (auto& chunk : chunks_) {
    // Expert parallelism across DP ranks: the experts' gradients, already scaled like every
    // gradient, summed over the expert-data-parallel group (no-op otherwise).
    MXMACA_RETURN_IF_ERROR(chunk->AllReduceExpertGrads());
    MXMACA_RETURN_IF_ERROR(chunk->UpdateExpertBias(expert_bias_all_reduce_));
  }
  return absl::OkStatus();
}

std::vector<layers::moe::MoELayerStats> GptStageProgram::TakeMoEStats() {
  std::vector<layers::moe::MoELayerStats> out;
  for (auto& chunk : chunks_) {
    for (layers::moe::MoELayerStats& s : chunk->TakeMoEStats()) out.push_back(std::move(s));
  }
  return out;
}

void GptStageProgram::ResetPeakActivationBytes() {
  int64_t live = 0;
  for (const auto& c : chunks_) live += c->live_activation_bytes();
  peak_ = live;
}

}  // namespace mxmaca::actors
