// actors/gpt_stage_program.h: StageProgram over the GPT layers (layers::GptStage).
//
// Maps a micro-batch message (data::GptMicroBatch) and its MicroBatchKey to the layers'
// MicroBatchInput: tokens, position ids and (with --reset-attention-mask) document starts
// on the first stage, labels and loss mask on the last; the key's global micro-batch id
// and iteration select the dropout masks. Eval ops run EvalForward (no dropout, no stash).
#ifndef MXMACA_ACTORS_GPT_STAGE_PROGRAM_H_
#define MXMACA_ACTORS_GPT_STAGE_PROGRAM_H_

#include <memory>

#include "actors/stage_program.h"
#include "layers/gpt_stage.h"

namespace mxmaca::actors {

// GptStageProgram: owns the stage's layers.
class GptStageProgram : public StageProgram {
 public:
  // reset_attention_mask: pass the batch's document starts to attention (else causal).
  GptStageProgram(std::unique_ptr<layers::GptStage> stage, bool reset_attention_mask)
      : stage_(std::move(stage)), reset_attention_mask_(reset_attention_mask) {}

  absl::Status Forward(const MicroBatchKey& key, const data::GptMicroBatch& batch,
                       const Activation* input, ForwardResult* result) override;
  absl::Status BackwardInput(const MicroBatchKey& key, const Activation* d_output,
                             float loss_grad_scale, Activation* d_input) override;
  absl::Status BackwardWeight(const MicroBatchKey& key) override;

  layers::ParameterStore& parameters() override { return stage_->parameters(); }
  int64_t peak_activation_bytes() const override { return stage_->peak_activation_bytes(); }
  void ResetPeakActivationBytes() override { stage_->ResetPeakActivationBytes(); }

  layers::GptStage& stage() { return *stage_; }

 private:
  std::unique_ptr<layers::GptStage> stage_;
  bool reset_attention_mask_;
};

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_GPT_STAGE_PROGRAM_H_
