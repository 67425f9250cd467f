// layers/stage_io.h: what a pipeline stage's forward takes and returns — one micro-batch
// as Megatron's get_batch gives it, and the stage's output (layers/gpt_stage.h, on every
// backend).
#ifndef MXMACA_LAYERS_STAGE_IO_H_
#define MXMACA_LAYERS_STAGE_IO_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace mxmaca::layers {

// MicroBatchInput: one micro-batch as Megatron's get_batch gives it. Spans are read during
// the call only (what is needed later is copied into the stash).
struct MicroBatchInput {
  int64_t micro_batch_id = 0;        // GLOBAL micro-batch id (dropout keys, W order bookkeeping)
  int64_t iteration = 0;             // training iteration (dropout keys)
  int64_t micro_batch_size = 0;      // b
  int64_t seq_length = 0;            // s (<= config.seq_length; inference may use fewer)
  absl::Span<const int32_t> tokens;  // [b, s] in [0, V): first stage
  absl::Span<const int32_t> position_ids;  // [b, s] in [0, max_pos): first stage with learned
                                           // positions; empty = 0..s-1 in every row
  absl::Span<const int32_t> doc_start;     // [b, s] (--reset-attention-mask): query t attends
                                           // keys j with doc_start[t] <= j <= t; empty = causal
  absl::Span<const float> hidden;          // [b, s, h] ([b, s/p, h] with SP): stages
                                           // without the embedding
  absl::Span<const int32_t> labels;        // [b, s] in [0, V): last stage (not for inference)
  absl::Span<const float> loss_mask;       // [b, s]: last stage; empty = all ones
  // MoE layers: the aux / z-loss gradient scale used in this micro-batch's B (Megatron's
  // MoEAuxLossAutoScaler: 1 / num_microbatches, or 1 with --calculate-per-token-loss).
  double moe_aux_loss_grad_scale = 1.0;
};

// StageOutput: what Forward / EvalForward / InferenceForward return.
struct StageOutput {
  std::vector<float> hidden;        // [b, s, h] ([b, s/p, h] with SP): stages without the
                                    // loss head
  std::vector<float> token_losses;  // [b, s] per-token cross-entropy (nats), unmasked: last stage
  double loss_sum = 0.0;            // sum of token_losses * loss_mask (fp64): last stage
  double num_tokens = 0.0;          // sum of loss_mask: last stage
  std::vector<float> logits;        // InferenceForward, last stage: [b, VP] at position s - 1
};

}  // namespace mxmaca::layers

#endif  // MXMACA_LAYERS_STAGE_IO_H_
