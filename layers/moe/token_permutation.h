// layers/moe/token_permutation.h: the local token permutation of Megatron-Core's MoE
// dispatchers (moe_utils.py permute / unpermute with a routing map), forward and backward.
//
// Shapes: T tokens, h hidden, E experts, R = sum_e tokens_per_expert[e] permuted rows.
// Permuted order: expert-major; within an expert, ascending token index — what
// permute(tokens, routing_map) gives (argsort of routing_map^T, stable) and, with capacity
// padding (drop_and_pad), exactly the capacity rows per expert, since the padded routing
// map then has `capacity` ones per column. Padding rows are real tokens with prob 0.
// Unpermute combines a token's rows weighted by their probs, in ASCENDING EXPERT ORDER,
// starting from 0: out[t] = ((0 + p_e1 y_e1) + p_e2 y_e2) + ..., e1 < e2 < ... — the order of
// Megatron's scatter_add over expert-major rows (fixed; the same on every call).
#ifndef MXMACA_LAYERS_MOE_TOKEN_PERMUTATION_H_
#define MXMACA_LAYERS_MOE_TOKEN_PERMUTATION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace mxmaca::layers::moe {

// PermutationPlan: index maps built once per routing decision.
struct PermutationPlan {
  int64_t num_tokens = 0;                  // T
  int64_t num_experts = 0;                 // E
  std::vector<int64_t> tokens_per_expert;  // [E] rows of each expert
  std::vector<int64_t> expert_offsets;     // [E + 1] first row of each expert; back() = R
  std::vector<int32_t> row_token;          // [R] source token of each row
  std::vector<int32_t> row_expert;         // [R] expert of each row
  std::vector<float> row_prob;             // [R] probs[token, expert] of each row
  std::vector<int64_t> token_row_offsets;  // [T + 1] CSR over tokens ...
  std::vector<int32_t> token_rows;         // [R] ... of their rows, ascending expert
  int64_t num_rows() const { return expert_offsets.empty() ? 0 : expert_offsets.back(); }
};

// MakePermutationPlan: from routing_map [T, E] (0/1 bytes) and probs [T, E] (fp32, read
// only where the map is 1). InvalidArgument for T < 0, E < 1, or a map byte other than 0/1
// (naming token and expert).
absl::StatusOr<PermutationPlan> MakePermutationPlan(const uint8_t* routing_map, const float* probs,
                                                    int64_t num_tokens, int64_t num_experts);

// Permute: out [R, h] row r = x [T, h] row row_token[r].
void Permute(const PermutationPlan& plan, const float* x, int64_t hidden, float* out);

// PermuteBackward: dx [T, h] (overwritten) row t = sum of d_out [R, h] rows of token t in
// ascending expert order, from 0 (zero rows for tokens routed nowhere).
void PermuteBackward(const PermutationPlan& plan, const float* d_out, int64_t hidden, float* dx);

// Unpermute: out [T, h] (overwritten) row t = sum over its rows r (ascending expert) of
// fp32(row_prob[r] * y[r]) accumulated in fp32 from 0 (see the file banner).
void Unpermute(const PermutationPlan& plan, const float* y, int64_t hidden, float* out);

// UnpermuteBackward: with d_out [T, h]:
//   dy [R, h] (overwritten) row r = row_prob[r] * d_out[row_token[r]]
//   d_probs [T, E] (overwritten; 0 off the map) at (row_token[r], row_expert[r]) =
//     sum_j y[r, j] d_out[row_token[r], j] (fp64 accumulation, rounded to fp32).
void UnpermuteBackward(const PermutationPlan& plan, const float* y, const float* d_out,
                       int64_t hidden, float* dy, float* d_probs);

}  // namespace mxmaca::layers::moe

#endif  // MXMACA_LAYERS_MOE_TOKEN_PERMUTATION_H_
