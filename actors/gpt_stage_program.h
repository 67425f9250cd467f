// actors/gpt_stage_program.h: StageProgram over the GPT layers (layers::GptStage), one
// GptStage per model chunk (virtual pipeline stage).
//
// Maps a micro-batch message (data::GptMicroBatch) and its MicroBatchKey to the layers'
// MicroBatchInput: tokens and position ids on the chunk with the embedding, labels and
// loss mask on the chunk with the loss head, document starts everywhere with
// --reset-attention-mask; the key's global micro-batch id and iteration select the
// dropout masks. Eval ops run EvalForward (no dropout, no stash). With context
// parallelism (GptStage::context_parallel()) every array is first cut to the CP rank's
// two chunks (layers/context_parallel/cp_batch.h SliceMicroBatchForCpRank).
#ifndef MXMACA_ACTORS_GPT_STAGE_PROGRAM_H_
#define MXMACA_ACTORS_GPT_STAGE_PROGRAM_H_

#include <functional>
#include <memory>
#include <vector>

#include "actors/stage_program.h"
#include "layers/gpt_stage.h"

namespace mxmaca::actors {

// GptStageProgram: owns the stage's chunks (chunks[c] = model chunk c).
class GptStageProgram : public StageProgram {
 public:
  // reset_attention_mask: pass the batch's document starts to attention (else causal).
  // chunks: at least one; their layouts come from the pipeline placement.
  GptStageProgram(std::vector<std::unique_ptr<layers::GptStage>> chunks,
                  bool reset_attention_mask);
  // Single-chunk convenience.
  GptStageProgram(std::unique_ptr<layers::GptStage> stage, bool reset_attention_mask);

  int num_chunks() const override { return static_cast<int>(chunks_.size()); }
  absl::Status Forward(const MicroBatchKey& key, const data::GptMicroBatch& batch,
                       const Activation* input, ForwardResult* result) override;
  absl::Status BackwardInput(const MicroBatchKey& key, const Activation* d_output,
                             float loss_grad_scale, std::vector<float>* d_input) override;
  absl::Status BackwardWeight(const MicroBatchKey& key) override;

  layers::ParameterStore& parameters(int chunk) override { return chunks_[chunk]->parameters(); }
  int tied_embedding_parameter(int chunk) const override;
  bool is_tied_copy(int chunk, int param) const override;
  bool counts_toward_grad_norm(int chunk, int param) const override;
  int64_t peak_activation_bytes() const override { return peak_; }
  void ResetPeakActivationBytes() override;
  std::vector<layers::moe::MoELayerStats> TakeMoEStats() override;
  // FinishTrainingIteration: every chunk's GptStage::UpdateExpertBias over the
  // reduction given to SetExpertBiasReduction (none: this rank's counts alone).
  absl::Status FinishTrainingIteration() override;
  std::vector<std::pair<std::string, std::vector<float>*>> persistent_buffers(
      int chunk) override {
    return chunks_[chunk]->ExpertBiasBuffers();
  }
  int64_t expert_region_begin(int chunk) override {
    return chunks_[chunk]->expert_region_begin();
  }
  int expert_data_parallel_rank(int chunk) const override {
    return chunks_[chunk]->expert_data_parallel_rank();
  }
  bool is_expert_shard(int chunk, int param) const override {
    return chunks_[chunk]->holds_expert_shard(param);
  }
  double ExpertGradNormSquared(int chunk) override {
    return chunks_[chunk]->ExpertGradNormSquared();
  }
  // SetExpertBiasReduction: the in-place fp32 sum over the stage's TP x DP ranks.
  void SetExpertBiasReduction(std::function<absl::Status(float* data, int64_t n)> all_reduce) {
    expert_bias_all_reduce_ = std::move(all_reduce);
  }

  layers::GptStage& stage(int chunk = 0) { return *chunks_[chunk]; }

 private:
  absl::StatusOr<layers::GptStage*> Chunk(const MicroBatchKey& key);
  // ForwardOn: Forward on `stage` with the batch as the stage sees it (CP: its slice).
  absl::Status ForwardOn(layers::GptStage& stage, const MicroBatchKey& key,
                         const data::GptMicroBatch& batch, const Activation* input,
                         ForwardResult* result);
  // Around each F/B/W call: track the stage's peak stash over all chunks.
  void BeginCall(int chunk);
  void EndCall(int chunk);

  std::vector<std::unique_ptr<layers::GptStage>> chunks_;
  bool reset_attention_mask_;
  int64_t peak_ = 0;
  std::function<absl::Status(float* data, int64_t n)> expert_bias_all_reduce_;
};

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_GPT_STAGE_PROGRAM_H_
