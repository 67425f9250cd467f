// layers/moe/router.h: Megatron-Core's TopKRouter on CPU fp32, forward and backward.
//
// Source: megatron/core/transformer/moe/router.py (TopKRouter.routing) and moe_utils.py
// (topk_routing_with_score_function, group_limited_topk, apply_router_token_dropping,
// get_capacity, compute_routing_scores_for_aux_loss, switch_load_balancing_loss_func,
// z_loss_func, sinkhorn, get_updated_expert_bias, MoEAuxLossAutoScaler), core_v0.15.
//
// Shapes: T = tokens of this rank, in this codebase's [b, s] order (row t = bi * s + si,
// layers/transformer_layer.h); h = hidden; E = experts; k = top-k.
//   logits  = x W^T                                   [T, E] fp32 (--moe-router-dtype fp32:
//                                                      always fp32 here, also under --bf16)
//   scores / selection / probs as topk_routing_with_score_function (see RouterForward)
//   capacity drop / pad as apply_router_token_dropping (when a capacity factor is set)
//   aux loss (aux_loss | seq_aux_loss | global_aux_loss) on compute_routing_scores_for_aux_loss
//   z loss = coeff * mean_t logsumexp(logits_t)^2
//
// Ties. Every top-k here (expert selection, group selection, the aux-loss top-k, capacity
// selection over tokens) orders candidates by (value descending, index ascending): ties go
// to the LOWER expert (or group, or token) index. Implemented as a stable sort by value
// descending of the indices in ascending order (std::stable_sort), never by torch.topk's
// unspecified tie order. -0.0 and +0.0 compare equal; NaN logits are rejected upstream
// (they would be a broken model).
#ifndef MXMACA_LAYERS_MOE_ROUTER_H_
#define MXMACA_LAYERS_MOE_ROUTER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "kernels/exec_context.h"

namespace mxmaca::layers::moe {

// ScoreFunction: --moe-router-score-function.
enum class ScoreFunction { kSoftmax, kSigmoid };

// LoadBalancingType: --moe-router-load-balancing-type (one type; Megatron's list form is
// not supported).
enum class LoadBalancingType { kAuxLoss, kSeqAuxLoss, kGlobalAuxLoss, kSinkhorn, kNone };

// TokenDropPolicy: --moe-token-drop-policy.
enum class TokenDropPolicy { kProbs, kPosition };

// RouterConfig: the router's flags (Megatron's names in the comments).
struct RouterConfig {
  int64_t hidden_size = 0;  // --hidden-size (h)
  int64_t num_experts = 0;  // --num-experts (E)
  int64_t topk = 2;         // --moe-router-topk (k)
  ScoreFunction score_function = ScoreFunction::kSoftmax;
  bool pre_softmax = false;  // --moe-router-pre-softmax (softmax only)
  // --moe-router-num-groups / --moe-router-group-topk; 0 = no group-limited routing.
  int64_t num_groups = 0;
  int64_t group_topk = 0;
  // --moe-router-topk-scaling-factor; 0 = none (Megatron's None; the scaling is skipped).
  double topk_scaling_factor = 0.0;
  LoadBalancingType load_balancing_type = LoadBalancingType::kAuxLoss;
  double aux_loss_coeff = 0.0;  // --moe-aux-loss-coeff
  // --moe-z-loss-coeff; 0 = off. Megatron divides the flag by the TP x CP size before use;
  // the caller passes the divided value (at TP = CP = 1 the flag itself).
  double z_loss_coeff = 0.0;
  bool enable_expert_bias = false;  // --moe-router-enable-expert-bias (sigmoid only)
  double bias_update_rate = 1e-3;   // --moe-router-bias-update-rate
  // --moe-expert-capacity-factor; nullopt = dropless.
  std::optional<double> capacity_factor;
  TokenDropPolicy drop_policy = TokenDropPolicy::kProbs;
  bool pad_to_capacity = false;  // --moe-pad-expert-input-to-capacity
};

// ValidateRouterConfig: InvalidArgument naming the flag and value when: h or E < 1;
// k < 1 or k > E; groups set with E % groups != 0, group_topk > groups, k % group_topk
// != 0, or k / group_topk > E / groups; pre-softmax with sigmoid; expert bias with softmax;
// sinkhorn with aux_loss_coeff != 0 (Megatron asserts this); capacity factor <= 0;
// padding without a capacity factor; negative coefficients or update rate.
absl::Status ValidateRouterConfig(const RouterConfig& config);

// GlobalAuxLossInput: for global_aux_loss, the counts the lead all-reduces over TP x DP x CP
// and averages over gradient-accumulation steps (Megatron's global_tokens_per_expert /
// ga_steps) and the matching token total (T x |TP x DP x CP|). Null / 0: this rank's own
// counts and T (a single rank, one step).
struct GlobalAuxLossInput {
  const float* tokens_per_expert = nullptr;  // [E]
  double total_num_tokens = 0.0;
};

// RouterCall: per-call facts.
struct RouterCall {
  int64_t num_tokens = 0;  // T
  // seq_aux_loss: s, the sequence length; T must be a multiple (b = T / s sequences,
  // sequence of row t = t / s). Ignored otherwise.
  int64_t seq_length = 0;
  // training = false: no aux/z loss, sinkhorn replaced by top-k on the activation (as
  // Megatron's eval path), no expert-bias token counting.
  bool training = true;
  GlobalAuxLossInput global;
  // Token split (expert parallelism with sequence parallelism, layers/moe/moe_layer.h):
  // this rank routes 1 / token_group_size of a micro-batch whose other parts are routed by
  // the other ranks of its TP group. For aux_loss, Megatron's TopKRouter reduces the
  // tokens per expert over that group (reduce_from_tensor_model_parallel_region over the
  // tp_cp group) and takes T x group size as the token total, so the group's aux losses sum
  // to the loss of the whole micro-batch. reduce_token_counts(counts, E) sums counts [E]
  // (fp32; integers below 2^24, so exact) over the group in place; required when
  // token_group_size > 1 and aux_loss is in use. Other load-balancing types with a group
  // size > 1 are InvalidArgument.
  int64_t token_group_size = 1;
  std::function<absl::Status(float* counts, int64_t n)> reduce_token_counts;
  // expert_bias [E] (fp32) for selection when enable_expert_bias; may be null otherwise.
  const float* expert_bias = nullptr;
};

// RouterState: what RouterForward produces and RouterBackward consumes (owned vectors).
struct RouterState {
  int64_t num_tokens = 0;
  std::vector<float> logits;                      // [T, E]
  std::vector<int32_t> top_indices;               // [T, k] selected experts in selection order
  std::vector<float> probs;                       // [T, E] final routing probs (0 where not routed)
  std::vector<uint8_t> routing_map;               // [T, E] final map (after capacity drop / pad)
  std::vector<int64_t> tokens_per_expert;         // [E] column sums of routing_map
  std::vector<int64_t> routed_tokens_per_expert;  // [E] top-k choices before capacity
  int64_t capacity = -1;                          // expert capacity (-1: dropless)
  int64_t dropped_tokens = 0;  // (token, expert) top-k choices removed by capacity
  double aux_loss = 0.0;       // the load-balancing loss INCLUDING its coefficient (0 if off)
  double z_loss = 0.0;         // the z-loss INCLUDING its coefficient (0 if off)
  // min_topk_margin: over this call's tokens, the smallest gap by which a top-k choice
  // cleared its best left-out candidate, in the units of the values it chose on (logits,
  // scores, sinkhorn values; the aux loss's scores; routing probs for capacity with the
  // probs policy; group scores with group-limited routing); +inf when k = E. A choice
  // closer to a tie than the arithmetic's error can flip between two runs that sum in a
  // different order (parallel layouts), which no tolerance on the result covers.
  float min_topk_margin = 0.0f;
  // Backward helpers: aux-loss gradient per (t, e) of the aux scores (coefficient
  // included), and each token's logsumexp (z loss).
  std::vector<float> aux_grad;  // [T, E] or empty
  std::vector<double> lse;      // [T] or empty
};

// RouterForward: logits = x W^T (x [T, h], W [E, h], fp32; BatchInvariantGemm, so a
// token's logits do not depend on T), then routing as Megatron's TopKRouter.routing:
//  softmax, not pre: select top-k on logits; probs = softmax over the k selected logits.
//  softmax, pre:     scores = softmax(logits); select top-k on scores; probs = those scores.
//  sigmoid:          scores = sigmoid(logits); select on scores (+ expert_bias if enabled;
//                    the bias affects selection only); probs = selected scores, divided by
//                    (their sum + 1e-20) when k > 1.
//  group-limited (num_groups > 0): group score = sum of the group's top (k / group_topk)
//                    selection values; the best group_topk groups are kept, the others'
//                    experts masked to -inf before the expert top-k.
//  probs *= topk_scaling_factor when set (not for sinkhorn).
//  sinkhorn (training): selection = top-k of sinkhorn(logits) (fp32 iterations until the
//                    mean |d1 change| <= 1e-4, at most 100000 as a guard);
//                    probs = act(logits) at the selection, act = sigmoid (k = 1) or softmax
//                    over all E (k > 1).
//  capacity: C = ceil(T k / E * factor); per expert, keep the C best tokens (policy probs:
//    by routing prob; position: routed tokens first; ties to the lower token index); C > T
//    keeps all. pad_to_capacity: the map becomes exactly the C kept tokens (padding rows
//    carry prob 0).
//  aux losses and z loss as the file banner. Errors: InvalidArgument for T < 1, a size
//  that is not a multiple of seq_length (seq_aux_loss), a null expert_bias when enabled,
//  a token group (RouterCall::token_group_size > 1) with seq_aux_loss / global_aux_loss or
//  without reduce_token_counts, or a non-finite logit (naming token and expert); the
//  error of reduce_token_counts.
absl::Status RouterForward(const kernels::ExecContext& ctx, const RouterConfig& config,
                           const RouterCall& call, const float* x, const float* weight,
                           RouterState* state);

// RouterBackward: d_logits [T, E] from d_probs [T, E] (gradient of the final probs; entries
// outside routing_map are ignored) plus the aux-loss and z-loss gradients, each multiplied by
// `aux_loss_grad_scale` (Megatron's MoEAuxLossAutoScaler.main_loss_backward_scale: the scale
// the main loss's gradient carries, e.g. 1 / num_micro_batches; with
// --calculate-per-token-loss Megatron attaches aux_loss * T instead, i.e. pass the scale
// times T). Then
//   dx [T, h] += d_logits W        (accumulates)
//   dweight [E, h] += d_logits^T x  (accumulates)
// dx or dweight may be null (skipped: B and W separately). d_logits (may be null)
// receives the [T, E] logits gradient.
void RouterBackward(const kernels::ExecContext& ctx, const RouterConfig& config,
                    const RouterState& state, const float* x, const float* weight,
                    const float* d_probs, double aux_loss_grad_scale, float* dx, float* dweight,
                    std::vector<float>* d_logits);

// RouterWeightGrad: dweight [E, h] += d_logits^T [E, T] · x [T, h] (fp32).
void RouterWeightGrad(const kernels::ExecContext& ctx, const RouterConfig& config,
                      int64_t num_tokens, const float* d_logits, const float* x, float* dweight);

// UpdateExpertBias: Megatron's get_updated_expert_bias: with tokens_per_expert [E] (all-
// reduced over TP x DP x CP by the caller and summed since the last update),
//   bias[e] += sign(mean(tokens_per_expert) - tokens_per_expert[e]) * update_rate
// in fp32 (sign(0) = 0).
void UpdateExpertBias(const float* tokens_per_expert, int64_t num_experts, double update_rate,
                      float* bias);

// GetCapacity: Megatron's get_capacity: ceil(num_tokens / num_experts * capacity_factor)
// evaluated in double (num_tokens = T * k for the router).
int64_t GetCapacity(int64_t num_tokens, int64_t num_experts, double capacity_factor);

// TopKIndices: the k indices of values[0, n) with the largest values, ordered by (value
// descending, index ascending) — the tie rule of this file. values may hold -inf.
void TopKIndices(const float* values, int64_t n, int64_t k, int32_t* out);

}  // namespace mxmaca::layers::moe

#endif  // MXMACA_LAYERS_MOE_ROUTER_H_
