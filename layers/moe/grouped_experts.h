// layers/moe/grouped_experts.h: the local experts' MLPs over expert-major rows
// (Megatron-Core's TEGroupedMLP / SequentialMLP math, megatron/core/transformer/moe/
// experts.py), forward, backward-input (B) and backward-weight (W), CPU fp32.
//
// Shapes: E_l local experts; R rows, expert-major, expert i owning the counts[i] rows
// starting at sum_{j<i} counts[j]; h hidden; f = --moe-ffn-hidden-size; f1 = 2f with
// SwiGLU ([gate | up], as layers/gpt_config.h) else f. Per expert i, on its rows X_i:
//   fc1_i = X_i W1_i^T + b1_i        W1_i [f1, h], b1_i [f1]
//   act_i = GELU(fc1_i) | SwiGLU(fc1_i)            [rows, f]
//   Y_i   = act_i W2_i^T + b2_i       W2_i [h, f], b2_i [h]
// Biases only with add_bias (Megatron's --disable-bias-linear turns them off).
//
// Batch invariance: every product runs through BatchInvariantGemm and the activations are
// applied row by row, so a row's output (and its input gradient) is bit-identical however
// many rows its expert received and wherever the row sits. Weight gradients sum over rows
// and therefore do depend on the rows present (as they must).
#ifndef MXMACA_LAYERS_MOE_GROUPED_EXPERTS_H_
#define MXMACA_LAYERS_MOE_GROUPED_EXPERTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/exec_context.h"

namespace mxmaca::layers::moe {

// ExpertMlpConfig: one expert's MLP shape and activation.
struct ExpertMlpConfig {
  int64_t hidden_size = 0;      // h
  int64_t ffn_hidden_size = 0;  // f (--moe-ffn-hidden-size)
  bool swiglu = false;          // --swiglu
  // GELU as the tanh approximation (Megatron's bias-GELU fusion) instead of the exact erf
  // GELU; ignored with SwiGLU (layers/gpt_config.h explains when the trainer sets it).
  bool gelu_tanh_approximation = false;
  bool add_bias = false;  // --add-bias-linear (Megatron's default true; false with
                          // --disable-bias-linear)
  int64_t fc1_size() const { return swiglu ? 2 * ffn_hidden_size : ffn_hidden_size; }
};

// ValidateExpertMlpConfig: InvalidArgument naming the field when h or f < 1.
absl::Status ValidateExpertMlpConfig(const ExpertMlpConfig& config);

// ExpertWeights: per local expert, pointers to W1 [f1, h], b1 [f1], W2 [h, f], b2 [h]
// (fp32, row-major; bias vectors empty without add_bias). Not owned.
struct ExpertWeights {
  std::vector<const float*> fc1_weight, fc1_bias, fc2_weight, fc2_bias;
};

// ExpertGrads: the matching gradient buffers (accumulated into). Not owned.
struct ExpertGrads {
  std::vector<float*> fc1_weight, fc1_bias, fc2_weight, fc2_bias;
};

// GroupedExpertsStash: what F keeps for B and W, and what B keeps for W.
struct GroupedExpertsStash {
  std::vector<float> fc1_out;  // [R, f1] pre-activation (with bias)
  std::vector<float> act_out;  // [R, f]
  std::vector<float> d_fc1;    // [R, f1] set by GroupedExpertsBackwardInput
};

// GroupedExpertsForward: y [R, h] (overwritten) from x [R, h]; counts [E_l] (sum = R);
// weights sized E_l. Fills the stash.
void GroupedExpertsForward(const kernels::ExecContext& ctx, const ExpertMlpConfig& config,
                           const ExpertWeights& weights, absl::Span<const int64_t> counts,
                           const float* x, float* y, GroupedExpertsStash* stash);

// GroupedExpertsBackwardInput: dx [R, h] (overwritten) from dy [R, h]; stores d_fc1 in the
// stash for the weight gradients.
void GroupedExpertsBackwardInput(const kernels::ExecContext& ctx, const ExpertMlpConfig& config,
                                 const ExpertWeights& weights, absl::Span<const int64_t> counts,
                                 const float* dy, float* dx, GroupedExpertsStash* stash);

// GroupedExpertsBackwardWeight: accumulates dW2_i += dY_i^T act_i, db2_i += colsum dY_i,
// dW1_i += d_fc1_i^T X_i, db1_i += colsum d_fc1_i (kernels/cpu Gemm with beta = 1 and
// BiasGrad's fixed order). x, dy [R, h]; needs a stash filled by F and B.
void GroupedExpertsBackwardWeight(const kernels::ExecContext& ctx, const ExpertMlpConfig& config,
                                  absl::Span<const int64_t> counts, const float* x, const float* dy,
                                  const GroupedExpertsStash& stash, const ExpertGrads& grads);

}  // namespace mxmaca::layers::moe

#endif  // MXMACA_LAYERS_MOE_GROUPED_EXPERTS_H_
