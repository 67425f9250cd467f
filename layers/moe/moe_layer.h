// layers/moe/moe_layer.h: Megatron-Core's MoELayer, CPU fp32, with separate forward (F),
// backward-input (B) and backward-weight (W); all experts on this rank (expert-parallel
// size 1) or E / EP of them with the tokens moved by a TokenDispatcher (EP > 1).
//
// Source: megatron/core/transformer/moe/moe_layer.py (MoELayer.forward), router.py,
// token_dispatcher.py (the local permute / unpermute of MoEAlltoAllTokenDispatcher at
// EP = 1), experts.py (TEGroupedMLP), shared_experts.py (SharedExpertMLP, gate off).
// T = tokens of this rank in [b, s] order, h hidden, E experts, R permuted rows.
//   probs, map = Router(x)                              [T, E]   (router.h)
//   xp         = Permute(x, map)                        [R, h]   (token_permutation.h)
//   yp         = Experts(xp, tokens_per_expert)         [R, h]   (grouped_experts.h)
//   y          = Unpermute(yp, probs) + SharedExpert(x) [T, h]
// B: dx = PermuteBackward(Experts_B(UnpermuteBackward(dy))) + d_logits W + SharedExpert_B(dy),
//    summed in that order.
//
// Parameters (registered in a ParameterStore under Megatron's TEGroupedMLP names;
// N = the GLOBAL layer number as layers/gpt_parameters.h; std = --init-method-std,
// L = --num-layers; f1 = 2f with SwiGLU else f; fs = shared expert size):
//   decoder.layers.N.mlp.router.weight                      [E, h]   normal(0, std)
//   decoder.layers.N.mlp.experts.linear_fc1.weight<i>       [f1, h]  normal(0, std)
//   decoder.layers.N.mlp.experts.linear_fc1.bias<i>         [f1]     0 (add_bias only)
//   decoder.layers.N.mlp.experts.linear_fc2.weight<i>       [h, f]   normal(0, std/sqrt(2L))
//   decoder.layers.N.mlp.experts.linear_fc2.bias<i>         [h]      0 (add_bias only)
//   decoder.layers.N.mlp.shared_experts.linear_fc1.weight   [fs1, h] normal(0, std)
//   decoder.layers.N.mlp.shared_experts.linear_fc1.bias     [fs1]    0 (add_bias only)
//   decoder.layers.N.mlp.shared_experts.linear_fc2.weight   [h, fs]  normal(0, std/sqrt(2L))
//   decoder.layers.N.mlp.shared_experts.linear_fc2.bias     [h]      0 (add_bias only)
// i = 0..E-1. (SequentialMLP would name them mlp.experts.local_experts.<i>.linear_fc1.weight;
// TEGroupedMLP's names are the ones --moe-grouped-gemm checkpoints carry.) The expert bias
// (--moe-router-enable-expert-bias) is Megatron's persistent buffer
// decoder.layers.N.mlp.router.expert_bias [E] fp32: held by the layer, not a parameter.
//
// Expert parallelism (MoELayerConfig::expert_model_parallel_size P > 1; SetExpertParallel):
// this rank registers and holds experts [r L, (r + 1) L), L = E / P, r its EP rank, under
// the same global names (so checkpoints and initial values do not depend on P). F becomes
//   probs, map = Router(x)                               x: this rank's T tokens
//   xp         = Permute(x, map)                         [R, h] global-expert-major
//   xl, layout = Dispatch(xp, tokens_per_expert)         [N, h] local-expert-major
//   yl         = LocalExperts(xl, tokens_per_local_expert)
//   yp         = Combine(yl, layout)                     [R, h]
//   y          = Unpermute(yp, probs) + SharedExpert(x)
// and B runs the same chain backwards (CombineBackward, the local experts' B,
// DispatchBackward, PermuteBackward, router). Dispatch and Combine move rows bit for bit
// and the expert GEMM's rows do not depend on how many rows it gets (expert_gemm.h), so
// a token's output is the same bits for every P (dropless) — only the expert weight
// gradients, now summed over the rows of all EP ranks in one GEMM, change their order.
//
// Token group (SetTokenGroup, any P): the g ranks that route disjoint parts of one
// micro-batch — Megatron's tp_cp group where the tokens are split over it (the TP ranks
// under sequence parallelism with P > 1, the context-parallel ranks). Each rank routes only
// its own T tokens: the aux loss uses the group's token counts (router.h), the z-loss
// coefficient must be divided by g (Megatron's moe_z_loss_coeff / tp_cp size), the metrics
// are summed over the group, and — for the members whose gradients no data-parallel
// reduction sums (TP) — W sums the router's and the shared expert's weight gradients of
// each call over them (the tensors are replicated there).
//
// Not supported here (each is an error or simply absent, never silently approximated):
// expert tensor parallelism, --moe-shared-expert-gate,
// --moe-shared-expert-overlap, a list of load-balancing types, --moe-input-jitter-eps,
// --moe-router-force-load-balancing, --moe-router-dtype fp64 (the router is always fp32),
// the router bias that newer Megatron adds with --add-bias-linear, padding masks, and
// --moe-router-padding-for-quantization.
#ifndef MXMACA_LAYERS_MOE_MOE_LAYER_H_
#define MXMACA_LAYERS_MOE_MOE_LAYER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kernels/exec_context.h"
#include "layers/moe/dispatch/token_dispatcher.h"
#include "layers/moe/grouped_experts.h"
#include "layers/moe/router.h"
#include "layers/moe/token_permutation.h"
#include "layers/parameter_store.h"

namespace mxmaca::layers::moe {

// MoELayerConfig: the layer's flags. expert.hidden_size must equal router.hidden_size.
struct MoELayerConfig {
  RouterConfig router;
  ExpertMlpConfig expert;  // ffn_hidden_size = --moe-ffn-hidden-size
  // --moe-shared-expert-intermediate-size; 0 = no shared expert. The shared expert uses
  // expert's activation and bias settings.
  int64_t shared_expert_ffn_hidden_size = 0;
  double init_method_std = 0.02;  // --init-method-std
  int64_t num_layers = 1;         // --num-layers (scaled init of linear_fc2)
  // --expert-model-parallel-size P and this rank's index r in its EP group: the rank holds
  // experts [r E / P, (r + 1) E / P).
  int64_t expert_model_parallel_size = 1;
  int64_t expert_model_parallel_rank = 0;
  // --moe-token-dispatcher-type (alltoall, allgather, or our hierarchical); used at P > 1.
  std::string token_dispatcher_type = "alltoall";
  // experts_after_dense: the stage registers the routed experts of all its MoE layers
  // after its other tensors (MoEParameterParts), in their own arena region — set by
  // GptStage::Create when the expert-data-parallel group differs from the data-parallel one.
  bool experts_after_dense = false;

  int64_t num_local_experts() const { return router.num_experts / expert_model_parallel_size; }
  int64_t first_local_expert() const { return expert_model_parallel_rank * num_local_experts(); }
};

// ValidateMoELayerConfig: the router's and the experts' errors, plus InvalidArgument when
// the hidden sizes differ, the shared size is negative, std < 0, num_layers < 1, P < 1,
// E % P != 0 or r outside [0, P).
absl::Status ValidateMoELayerConfig(const MoELayerConfig& config);

// MoEParameterPrefix: "decoder.layers.<layer>.mlp".
std::string MoEParameterPrefix(int64_t layer);

// MoEParameterParts: which of a MoE layer's tensors RegisterMoEParameters registers: all,
// all but this rank's routed experts, or only those (so a stage can put every layer's
// experts in one arena region after the dense tensors: expert parallelism across
// data-parallel ranks reduces them over another group, layers/gpt_stage.h).
enum class MoEParameterParts { kAll, kAllButRoutedExperts, kRoutedExperts };

// RegisterMoEParameters: registers the tensors listed in the file banner (before
// ParameterStore::Finalize), the router first, then the routed experts, then the shared
// expert. Errors: config errors, or the store's (duplicate names, already finalized).
absl::Status RegisterMoEParameters(const MoELayerConfig& config, int64_t layer,
                                   ParameterStore* store,
                                   MoEParameterParts parts = MoEParameterParts::kAll);

// MoEExpertParallel: what a MoE layer with P > 1 calls (MoELayer::SetExpertParallel).
struct MoEExpertParallel {
  // dispatcher: the EP group's (not owned; outlives the layer's calls). Its calls are made
  // one after another from F and B, blocking until each is done or `timeout` passes.
  dispatch::TokenDispatcher* dispatcher = nullptr;
  absl::Duration timeout = absl::Minutes(5);
};

// MoETokenGroup: the token group of the file banner (MoELayer::SetTokenGroup).
struct MoETokenGroup {
  int64_t size = 1;  // g
  // all_reduce: the in-place fp32 sum over the g ranks (token counts, metrics).
  std::function<absl::Status(float* data, int64_t n)> all_reduce;
  // all_reduce_replicated_grads: the in-place fp32 sum of the router's and shared expert's
  // weight gradients of one call over the group's members that no data-parallel reduction
  // sums (the TP ranks); null: none (e.g. only CP ranks, whose gradients the dp-cp buckets
  // sum).
  std::function<absl::Status(float* data, int64_t n)> all_reduce_replicated_grads;
};

// MoECall: per-call facts.
struct MoECall {
  int64_t num_tokens = 0;  // T
  int64_t seq_length = 0;  // s (seq_aux_loss)
  bool training = true;
  GlobalAuxLossInput global;  // global_aux_loss counts (router.h)
  // count_for_expert_bias: add this call's routed tokens to local_tokens_per_expert() (in
  // training with the bias enabled). False for a recomputation of a forward that counted.
  bool count_for_expert_bias = true;
};

// MoEMetrics: per-call logging values (issue 7, "Per-layer metrics").
struct MoEMetrics {
  std::vector<int64_t> tokens_per_expert;  // [E] rows each expert processed (after capacity)
  double mean_tokens_per_expert = 0.0;
  int64_t max_tokens_per_expert = 0;
  double load_imbalance = 0.0;  // max / mean (1 = perfectly balanced; 0 with no tokens)
  int64_t dropped_tokens = 0;   // (token, expert) choices dropped by capacity
  int64_t capacity = -1;        // expert capacity (-1: dropless)
  // Megatron's logged values (router.py: aux_loss / coeff, z_loss / coeff); 0 when off.
  double load_balancing_loss = 0.0;
  double z_loss = 0.0;
  // The router's RouterState::min_topk_margin for this rank's tokens (not reduced over the
  // token group).
  double min_topk_margin = 0.0;
};

// MoEStash: what F keeps for B and W, and what B keeps for W (one per micro-batch).
struct MoEStash {
  int64_t num_tokens = 0;
  RouterState router;
  PermutationPlan plan;
  std::vector<float> permuted_x;  // [R, h]
  std::vector<float> expert_out;  // [R, h]
  GroupedExpertsStash experts;
  GroupedExpertsStash shared;       // shared expert over all T rows
  std::vector<float> d_expert_out;  // [R, h] (B)
  std::vector<float> d_logits;      // [T, E] (B)
  // EP > 1 only: the rows this rank's experts received and their gradient.
  std::shared_ptr<const dispatch::DispatchLayout> layout;
  std::vector<int64_t> tokens_per_local_expert;  // [L]
  std::vector<float> local_x;                    // [N, h] (F)
  std::vector<float> d_local_out;                // [N, h] (B)
};

// MoEStashBytes: the bytes the stash's buffers hold (for memory accounting).
int64_t MoEStashBytes(const MoEStash& stash);

// MoELayer: binds to the tensors of one layer in a finalized ParameterStore.
class MoELayer {
 public:
  // Create: validates the config and looks up the layer's tensors (NotFound naming a
  // missing one; InvalidArgument on a shape mismatch or when the store is not finalized).
  static absl::StatusOr<MoELayer> Create(const MoELayerConfig& config, int64_t layer,
                                         ParameterStore* store);

  // SetExpertParallel: required before Forward when P > 1 (InvalidArgument without a
  // dispatcher, or with a dispatcher whose expert count or EP size differ from the config).
  absl::Status SetExpertParallel(const MoEExpertParallel& ep);
  // SetTokenGroup: the token group (default: none, g = 1). InvalidArgument for g < 1 or
  // g > 1 without all_reduce.
  absl::Status SetTokenGroup(const MoETokenGroup& group);

  // Forward: y [T, h] (overwritten) from x [T, h]. Fills the stash and metrics (metrics
  // may be null; with a token group they are summed over it, so every rank of the group
  // reports the group's tokens and losses). In training with the expert bias enabled,
  // adds the routing map's column sums to local_tokens_per_expert(). Errors: the
  // router's (RouterForward); FailedPrecondition when P > 1 and SetExpertParallel was not
  // called; the dispatcher's and the token-group reduction's.
  absl::Status Forward(const kernels::ExecContext& ctx, const MoECall& call, const float* x,
                       float* y, MoEStash* stash, MoEMetrics* metrics);

  // BackwardInput: dx [T, h] (overwritten) from dy [T, h]; the aux / z-loss gradients are
  // scaled by aux_loss_grad_scale (router.h). Keeps in the stash what W needs. Errors
  // (P > 1 only): the dispatcher's.
  absl::Status BackwardInput(const kernels::ExecContext& ctx, const float* x, const float* dy,
                             double aux_loss_grad_scale, MoEStash* stash, float* dx);

  // BackwardWeight: accumulates every parameter gradient of the layer into the store's
  // gradient arena. x, dy as given to F and B.
  absl::Status BackwardWeight(const kernels::ExecContext& ctx, const float* x, const float* dy,
                              const MoEStash& stash);
  // BackwardWeight: the same, accumulating tensor `id`'s gradient into grad(id) (a buffer
  // of the tensor's numel floats) instead of the arena — for callers that fold each
  // micro-batch's gradient into the arena themselves (layers/transformer_layer.h's
  // WeightGradSink). Every id of parameter_ids() is asked for. With a token group the
  // router's and the shared expert's gradient of this call are summed over the group
  // before they are added (error: the reduction's).
  absl::Status BackwardWeight(const kernels::ExecContext& ctx, const float* x, const float* dy,
                              const MoEStash& stash, const std::function<float*(int id)>& grad);
  // parameter_ids: the store indices of the layer's tensors (router, experts, shared).
  std::vector<int> parameter_ids() const;
  // expert_parameter_ids: the store indices of this rank's experts' tensors (P > 1: each
  // is held by this EP rank only, so it counts toward the grad norm and is written to
  // checkpoints here; empty-equivalent semantics at P = 1 are the caller's).
  std::vector<int> expert_parameter_ids() const;
  // MlpIds: the store indices of a group of expert MLPs, in ExpertGrads' order.
  struct MlpIds {
    std::vector<int> fc1_weight, fc1_bias, fc2_weight, fc2_bias;
  };

  // expert_bias: [E] fp32 (zeros at start; used for selection only).
  std::vector<float>& expert_bias() { return expert_bias_; }
  // local_tokens_per_expert: [E] routed tokens counted since the last UpdateExpertBias.
  const std::vector<float>& local_tokens_per_expert() const { return local_tokens_; }
  // UpdateExpertBias: get_updated_expert_bias with `tokens_per_expert` [E] (the caller's
  // all-reduce of local_tokens_per_expert() over TP x DP x CP; null: the local counts),
  // then resets the local counts (Megatron's finalize_model_grads does both).
  void UpdateExpertBias(const float* tokens_per_expert);

  const MoELayerConfig& config() const { return config_; }

 private:
  MoELayer() = default;
  absl::Status RunExperts(const kernels::ExecContext& ctx, MoEStash* st);
  MoELayerConfig config_;
  ExpertMlpConfig shared_config_;
  ParameterStore* store_ = nullptr;
  int router_weight_ = -1;
  ExpertWeights experts_, shared_;
  ExpertGrads expert_grads_, shared_grads_;
  MlpIds expert_ids_, shared_ids_;
  std::vector<float> expert_bias_, local_tokens_;
  MoEExpertParallel ep_;
  MoETokenGroup token_group_;
};

}  // namespace mxmaca::layers::moe

#endif  // MXMACA_LAYERS_MOE_MOE_LAYER_H_
