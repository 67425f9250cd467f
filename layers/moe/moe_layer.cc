// layers/moe/moe_layer.cc: MoELayer = router -> permute -> experts -> unpermute (+ shared).
#include "layers/moe/moe_layer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mxmaca::layers::moe {
namespace {

ExpertMlpConfig SharedConfig(const MoELayerConfig& c) {
  ExpertMlpConfig s = c.expert;
  s.ffn_hidden_size = c.shared_expert_ffn_hidden_size;
  return s;
}

float ScaledStd(const MoELayerConfig& c) {
  return static_cast<float>(c.init_method_std / std::sqrt(2.0 * static_cast<double>(c.num_layers)));
}

// Registers one MLP's fc1/fc2 (and biases) under `fc1_prefix`/`fc2_prefix` + `suffix`
// ("weight" + suffix, "bias" + suffix).
absl::Status RegisterMlp(const MoELayerConfig& c, const ExpertMlpConfig& mlp,
                         const std::string& base, const std::string& suffix,
                         ParameterStore* store) {
  const int64_t h = mlp.hidden_size;
  ParameterSpec w1{base + ".linear_fc1.weight" + suffix,
                   {mlp.fc1_size(), h},
                   ParameterInit::kNormal,
                   static_cast<float>(c.init_method_std)};
  ParameterSpec w2{base + ".linear_fc2.weight" + suffix,
                   {h, mlp.ffn_hidden_size},
                   ParameterInit::kNormal,
                   ScaledStd(c)};
  MXMACA_RETURN_IF_ERROR(store->Register(w1).status());
  if (mlp.add_bias) {
    ParameterSpec b1{base + ".linear_fc1.bias" + suffix,
                     {mlp.fc1_size()},
                     ParameterInit::kZeros,
                     0.0f,
                     /*weight_decay=*/false};
    MXMACA_RETURN_IF_ERROR(store->Register(b1).status());
  }
  MXMACA_RETURN_IF_ERROR(store->Register(w2).status());
  if (mlp.add_bias) {
    ParameterSpec b2{base + ".linear_fc2.bias" + suffix,
                     {h},
                     ParameterInit::kZeros,
                     0.0f,
                     /*weight_decay=*/false};
    MXMACA_RETURN_IF_ERROR(store->Register(b2).status());
  }
  return absl::OkStatus();
}

// Looks up a tensor and checks its shape.
absl::StatusOr<int> Lookup(ParameterStore* store, const std::string& name,
                           const std::vector<int64_t>& shape) {
  MXMACA_ASSIGN_OR_RETURN(int index, store->Index(name));
  if (store->info(index).spec.shape != shape || !store->info(index).is_whole()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MoE layer: ", name, " is registered with another shape (or sharded)"));
  }
  return index;
}

absl::Status BindMlp(const ExpertMlpConfig& mlp, const std::string& base, const std::string& suffix,
                     ParameterStore* store, ExpertWeights* w, ExpertGrads* g, MoELayer::MlpIds* ids) {
  const int64_t h = mlp.hidden_size;
  MXMACA_ASSIGN_OR_RETURN(int w1,
                          Lookup(store, base + ".linear_fc1.weight" + suffix, {mlp.fc1_size(), h}));
  MXMACA_ASSIGN_OR_RETURN(
      int w2, Lookup(store, base + ".linear_fc2.weight" + suffix, {h, mlp.ffn_hidden_size}));
  w->fc1_weight.push_back(store->param(w1));
  w->fc2_weight.push_back(store->param(w2));
  g->fc1_weight.push_back(store->grad(w1));
  g->fc2_weight.push_back(store->grad(w2));
  ids->fc1_weight.push_back(w1);
  ids->fc2_weight.push_back(w2);
  if (mlp.add_bias) {
    MXMACA_ASSIGN_OR_RETURN(int b1,
                            Lookup(store, base + ".linear_fc1.bias" + suffix, {mlp.fc1_size()}));
    MXMACA_ASSIGN_OR_RETURN(int b2, Lookup(store, base + ".linear_fc2.bias" + suffix, {h}));
    w->fc1_bias.push_back(store->param(b1));
    w->fc2_bias.push_back(store->param(b2));
    g->fc1_bias.push_back(store->grad(b1));
    g->fc2_bias.push_back(store->grad(b2));
    ids->fc1_bias.push_back(b1);
    ids->fc2_bias.push_back(b2);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateMoELayerConfig(const MoELayerConfig& c) {
  MXMACA_RETURN_IF_ERROR(ValidateRouterConfig(c.router));
  MXMACA_RETURN_IF_ERROR(ValidateExpertMlpConfig(c.expert));
  if (c.expert.hidden_size != c.router.hidden_size) {
    return absl::InvalidArgumentError(absl::StrCat("MoE layer: expert hidden size ",
                                                   c.expert.hidden_size, " != router hidden size ",
                                                   c.router.hidden_size));
  }
  if (c.shared_expert_ffn_hidden_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("MoE layer: --moe-shared-expert-intermediate-size must be >= 0, got ",
                     c.shared_expert_ffn_hidden_size));
  }
  if (c.init_method_std < 0.0 || c.num_layers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("MoE layer: --init-method-std (", c.init_method_std,
                     ") must be >= 0 and --num-layers (", c.num_layers, ") >= 1"));
  }
  const int64_t p = c.expert_model_parallel_size;
  if (p < 1 || c.router.num_experts % p != 0 || c.expert_model_parallel_rank < 0 ||
      c.expert_model_parallel_rank >= p) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MoE layer: --num-experts ", c.router.num_experts,
        " must be a multiple of --expert-model-parallel-size ", p, " (and the EP rank ",
        c.expert_model_parallel_rank, " in [0, ", p, "))"));
  }
  return absl::OkStatus();
}

std::string MoEParameterPrefix(int64_t layer) {
  return absl::StrCat("decoder.layers.", layer, ".mlp");
}

absl::Status RegisterMoEParameters(const MoELayerConfig& c, int64_t layer, ParameterStore* store,
                                   MoEParameterParts parts) {
  MXMACA_RETURN_IF_ERROR(ValidateMoELayerConfig(c));
  const std::string prefix = MoEParameterPrefix(layer);
  if (parts == MoEParameterParts::kRoutedExperts) {
    for (int64_t i = c.first_local_expert(); i < c.first_local_expert() + c.num_local_experts();
         ++i) {
      MXMACA_RETURN_IF_ERROR(
          RegisterMlp(c, c.expert, prefix + ".experts", absl::StrCat(i), store));
    }
    return absl::OkStatus();
  }
  ParameterSpec router{prefix + ".router.weight",
                       {c.router.num_experts, c.router.hidden_size},
                       ParameterInit::kNormal,
                       static_cast<float>(c.init_method_std)};
  MXMACA_RETURN_IF_ERROR(store->Register(router).status());
  for (int64_t i = c.first_local_expert();
       parts == MoEParameterParts::kAll && i < c.first_local_expert() + c.num_local_experts();
       ++i) {
    MXMACA_RETURN_IF_ERROR(RegisterMlp(c, c.expert, prefix + ".experts", absl::StrCat(i), store));
  }
  if (c.shared_expert_ffn_hidden_size > 0) {
    MXMACA_RETURN_IF_ERROR(RegisterMlp(c, SharedConfig(c), prefix + ".shared_experts", "", store));
  }
  return absl::OkStatus();
}

absl::StatusOr<MoELayer> MoELayer::Create(const MoELayerConfig& config, int64_t layer,
                                          ParameterStore* store) {
  MXMACA_RETURN_IF_ERROR(ValidateMoELayerConfig(config));
  if (!store->finalized()) {
    return absl::InvalidArgumentError("MoE layer: the ParameterStore is not finalized");
  }
  MoELayer moe;
  moe.config_ = config;
  moe.shared_config_ = SharedConfig(config);
  moe.store_ = store;
  const std::string prefix = MoEParameterPrefix(layer);
  MXMACA_ASSIGN_OR_RETURN(moe.router_weight_,
                          Lookup(store, prefix + ".router.weight",
                                 {config.router.num_experts, config.router.hidden_size}));
  for (int64_t i = config.first_local_expert();
       i < config.first_local_expert() + config.num_local_experts(); ++i) {
    MXMACA_RETURN_IF_ERROR(BindMlp(config.expert, prefix + ".experts", absl::StrCat(i), store,
                                   &moe.experts_, &moe.expert_grads_, &moe.expert_ids_));
  }
  if (config.shared_expert_ffn_hidden_size > 0) {
    MXMACA_RETURN_IF_ERROR(BindMlp(moe.shared_config_, prefix + ".shared_experts", "", store,
                                   &moe.shared_, &moe.shared_grads_, &moe.shared_ids_));
  }
  moe.expert_bias_.assign(config.router.num_experts, 0.0f);
  moe.local_tokens_.assign(config.router.num_experts, 0.0f);
  return moe;
}

absl::Status MoELayer::SetExpertParallel(const MoEExpertParallel& ep) {
  const int64_t p = config_.expert_model_parallel_size;
  if (ep.dispatcher == nullptr ||
      ep.dispatcher->options().num_experts != config_.router.num_experts ||
      ep.dispatcher->options().ep_group.size() != p ||
      ep.dispatcher->options().ep_group.rank_in_group != config_.expert_model_parallel_rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MoE layer: expert parallelism needs a dispatcher over an EP group of ", p,
        " ranks with this rank at ", config_.expert_model_parallel_rank, " and ",
        config_.router.num_experts, " experts"));
  }
  ep_ = ep;
  return absl::OkStatus();
}

absl::Status MoELayer::SetTokenGroup(const MoETokenGroup& group) {
  if (group.size < 1 || (group.size > 1 && !group.all_reduce)) {
    return absl::InvalidArgumentError(
        absl::StrCat("MoE layer: a token group of ", group.size, " ranks needs its all-reduce"));
  }
  token_group_ = group;
  return absl::OkStatus();
}

// RunExperts: the local experts over rows [R, h] (permuted, global-expert-major, counts
// [E]) into out [R, h]. P = 1: the experts directly. P > 1: dispatch, local experts,
// combine; the received rows stay in the stash for W.
absl::Status MoELayer::RunExperts(const kernels::ExecContext& ctx, MoEStash* st) {
  const int64_t h = config_.router.hidden_size;
  if (config_.expert_model_parallel_size == 1) {
    GroupedExpertsForward(ctx, config_.expert, experts_, st->plan.tokens_per_expert,
                          st->permuted_x.data(), st->expert_out.data(), &st->experts);
    return absl::OkStatus();
  }
  if (ep_.dispatcher == nullptr) {
    return absl::FailedPreconditionError("MoE layer: EP > 1 without SetExpertParallel");
  }
  MXMACA_ASSIGN_OR_RETURN(
      dispatch::DispatchResult got,
      dispatch::DispatchAndWait(*ep_.dispatcher, st->permuted_x.data(), st->plan.num_rows(), h,
                                st->plan.tokens_per_expert, ep_.timeout));
  st->layout = std::move(got.layout);
  st->tokens_per_local_expert = std::move(got.tokens_per_local_expert);
  st->local_x = std::move(got.rows);
  const int64_t n = static_cast<int64_t>(st->local_x.size()) / h;
  std::vector<float> local_out(static_cast<size_t>(n * h), 0.0f);
  GroupedExpertsForward(ctx, config_.expert, experts_, st->tokens_per_local_expert,
                        st->local_x.data(), local_out.data(), &st->experts);
  MXMACA_ASSIGN_OR_RETURN(st->expert_out, dispatch::CombineAndWait(*ep_.dispatcher, st->layout,
                                                                   local_out.data(), n,
                                                                   ep_.timeout));
  st->permuted_x.clear();  // B needs only the plan; W the received rows
  st->permuted_x.shrink_to_fit();
  return absl::OkStatus();
}

absl::Status MoELayer::Forward(const kernels::ExecContext& ctx, const MoECall& call, const float* x,
                               float* y, MoEStash* st, MoEMetrics* metrics) {
  const RouterConfig& rc = config_.router;
  const int64_t t = call.num_tokens, h = rc.hidden_size, e = rc.num_experts;
  const int64_t group = token_group_.size;
  RouterCall rcall;
  rcall.num_tokens = t;
  rcall.seq_length = call.seq_length;
  rcall.training = call.training;
  rcall.global = call.global;
  rcall.expert_bias = rc.enable_expert_bias ? expert_bias_.data() : nullptr;
  rcall.token_group_size = group;
  rcall.reduce_token_counts = token_group_.all_reduce;
  st->num_tokens = t;
  MXMACA_RETURN_IF_ERROR(
      RouterForward(ctx, rc, rcall, x, store_->param(router_weight_), &st->router));
  if (call.training && call.count_for_expert_bias && rc.enable_expert_bias) {
    for (int64_t i = 0; i < e; ++i) local_tokens_[i] += st->router.tokens_per_expert[i];
  }
  MXMACA_ASSIGN_OR_RETURN(
      st->plan, MakePermutationPlan(st->router.routing_map.data(), st->router.probs.data(), t, e));
  const int64_t rows = st->plan.num_rows();
  st->permuted_x.assign(rows * h, 0.0f);
  st->expert_out.assign(rows * h, 0.0f);
  Permute(st->plan, x, h, st->permuted_x.data());
  MXMACA_RETURN_IF_ERROR(RunExperts(ctx, st));
  Unpermute(st->plan, st->expert_out.data(), h, y);
  if (config_.shared_expert_ffn_hidden_size > 0) {
    std::vector<float> shared_out(t * h);
    const int64_t counts[1] = {t};
    GroupedExpertsForward(ctx, shared_config_, shared_, counts, x, shared_out.data(), &st->shared);
    for (int64_t i = 0; i < t * h; ++i) y[i] = y[i] + shared_out[i];
  }
  if (metrics != nullptr) {
    // [tokens per expert E | dropped | load-balancing loss | z-loss], summed over the token
    // group (each rank's aux loss is its part of the group's; its z-loss the mean over its
    // T tokens, so the group mean is the sum of the parts / g).
    std::vector<float> m(static_cast<size_t>(e + 3), 0.0f);
    for (int64_t i = 0; i < e; ++i) m[i] = static_cast<float>(st->plan.tokens_per_expert[i]);
    m[e] = static_cast<float>(st->router.dropped_tokens);
    m[e + 1] = static_cast<float>(rc.aux_loss_coeff > 0.0 ? st->router.aux_loss / rc.aux_loss_coeff
                                                          : 0.0);
    m[e + 2] = static_cast<float>(
        rc.z_loss_coeff > 0.0 ? st->router.z_loss / rc.z_loss_coeff / static_cast<double>(group)
                              : 0.0);
    double lb = st->router.aux_loss / (rc.aux_loss_coeff > 0.0 ? rc.aux_loss_coeff : 1.0);
    double z = rc.z_loss_coeff > 0.0 ? st->router.z_loss / rc.z_loss_coeff : 0.0;
    if (group > 1) {
      MXMACA_RETURN_IF_ERROR(token_group_.all_reduce(m.data(), e + 3));
      lb = m[e + 1];
      z = m[e + 2];
    }
    metrics->tokens_per_expert.assign(static_cast<size_t>(e), 0);
    int64_t total = 0, max = 0;
    for (int64_t i = 0; i < e; ++i) {
      const int64_t n = group > 1 ? static_cast<int64_t>(m[i]) : st->plan.tokens_per_expert[i];
      metrics->tokens_per_expert[i] = n;
      total += n;
      max = std::max(max, n);
    }
    metrics->mean_tokens_per_expert = static_cast<double>(total) / e;
    metrics->max_tokens_per_expert = max;
    metrics->load_imbalance =
        total > 0 ? static_cast<double>(max) / metrics->mean_tokens_per_expert : 0.0;
    metrics->dropped_tokens =
        group > 1 ? static_cast<int64_t>(m[e]) : st->router.dropped_tokens;
    metrics->capacity = st->router.capacity;
    metrics->load_balancing_loss = rc.aux_loss_coeff > 0.0 ? lb : 0.0;
    metrics->z_loss = z;
    metrics->min_topk_margin = st->router.min_topk_margin;
  }
  return absl::OkStatus();
}

absl::Status MoELayer::BackwardInput(const kernels::ExecContext& ctx, const float* x,
                                     const float* dy, double aux_loss_grad_scale, MoEStash* st,
                                     float* dx) {
  const RouterConfig& rc = config_.router;
  const int64_t t = st->num_tokens, h = rc.hidden_size, e = rc.num_experts;
  const int64_t rows = st->plan.num_rows();
  st->d_expert_out.assign(rows * h, 0.0f);
  std::vector<float> d_probs(t * e), d_permuted(rows * h);
  UnpermuteBackward(st->plan, st->expert_out.data(), dy, h, st->d_expert_out.data(),
                    d_probs.data());
  if (config_.expert_model_parallel_size == 1) {
    GroupedExpertsBackwardInput(ctx, config_.expert, experts_, st->plan.tokens_per_expert,
                                st->d_expert_out.data(), d_permuted.data(), &st->experts);
  } else {
    if (ep_.dispatcher == nullptr || !st->layout) {
      return absl::FailedPreconditionError("MoE layer: EP > 1 B without the layout of F");
    }
    MXMACA_ASSIGN_OR_RETURN(st->d_local_out,
                            dispatch::CombineBackwardAndWait(*ep_.dispatcher, st->layout,
                                                             st->d_expert_out.data(), rows,
                                                             ep_.timeout));
    const int64_t n = static_cast<int64_t>(st->d_local_out.size()) / h;
    std::vector<float> d_local_in(static_cast<size_t>(n * h), 0.0f);
    GroupedExpertsBackwardInput(ctx, config_.expert, experts_, st->tokens_per_local_expert,
                                st->d_local_out.data(), d_local_in.data(), &st->experts);
    MXMACA_ASSIGN_OR_RETURN(d_permuted,
                            dispatch::DispatchBackwardAndWait(*ep_.dispatcher, st->layout,
                                                              d_local_in.data(), n, ep_.timeout));
    st->d_expert_out.clear();  // W uses d_local_out
    st->d_expert_out.shrink_to_fit();
  }
  PermuteBackward(st->plan, d_permuted.data(), h, dx);
  RouterBackward(ctx, rc, st->router, x, store_->param(router_weight_), d_probs.data(),
                 aux_loss_grad_scale, dx, /*dweight=*/nullptr, &st->d_logits);
  if (config_.shared_expert_ffn_hidden_size > 0) {
    std::vector<float> d_shared(t * h);
    const int64_t counts[1] = {t};
    GroupedExpertsBackwardInput(ctx, shared_config_, shared_, counts, dy, d_shared.data(),
                                &st->shared);
    for (int64_t i = 0; i < t * h; ++i) dx[i] = dx[i] + d_shared[i];
  }
  return absl::OkStatus();
}

absl::Status MoELayer::BackwardWeight(const kernels::ExecContext& ctx, const float* x,
                                      const float* dy, const MoEStash& st) {
  ParameterStore* store = store_;
  return BackwardWeight(ctx, x, dy, st, [store](int id) { return store->grad(id); });
}

absl::Status MoELayer::BackwardWeight(const kernels::ExecContext& ctx, const float* x,
                                      const float* dy, const MoEStash& st,
                                      const std::function<float*(int)>& grad) {
  // bind: the gradient buffers of a group of MLPs, each from `where`.
  auto bind = [](const MlpIds& ids, const std::function<float*(int)>& where) {
    ExpertGrads g;
    for (int id : ids.fc1_weight) g.fc1_weight.push_back(where(id));
    for (int id : ids.fc1_bias) g.fc1_bias.push_back(where(id));
    for (int id : ids.fc2_weight) g.fc2_weight.push_back(where(id));
    for (int id : ids.fc2_bias) g.fc2_bias.push_back(where(id));
    return g;
  };
  const RouterConfig& rc = config_.router;
  if (config_.expert_model_parallel_size == 1) {
    GroupedExpertsBackwardWeight(ctx, config_.expert, st.plan.tokens_per_expert,
                                 st.permuted_x.data(), st.d_expert_out.data(), st.experts,
                                 bind(expert_ids_, grad));
  } else {
    GroupedExpertsBackwardWeight(ctx, config_.expert, st.tokens_per_local_expert,
                                 st.local_x.data(), st.d_local_out.data(), st.experts,
                                 bind(expert_ids_, grad));
  }
  const bool group = static_cast<bool>(token_group_.all_reduce_replicated_grads);
  // With a token group the replicated tensors' gradients of this call are computed into
  // zeroed buffers, summed over the group, then added (so what is added is the gradient
  // of the whole micro-batch, the same on every rank of the group).
  std::vector<std::vector<float>> partial;
  std::vector<int> partial_ids;
  auto target = [&](int id) -> float* {
    if (!group) return grad(id);
    partial_ids.push_back(id);
    partial.emplace_back(static_cast<size_t>(store_->info(id).numel), 0.0f);
    return partial.back().data();
  };
  RouterWeightGrad(ctx, rc, st.num_tokens, st.d_logits.data(), x, target(router_weight_));
  if (config_.shared_expert_ffn_hidden_size > 0) {
    const int64_t counts[1] = {st.num_tokens};
    GroupedExpertsBackwardWeight(ctx, shared_config_, counts, x, dy, st.shared,
                                 bind(shared_ids_, target));
  }
  for (size_t i = 0; i < partial.size(); ++i) {
    std::vector<float>& p = partial[i];
    MXMACA_RETURN_IF_ERROR(
        token_group_.all_reduce_replicated_grads(p.data(), static_cast<int64_t>(p.size())));
    float* out = grad(partial_ids[i]);
    for (size_t j = 0; j < p.size(); ++j) out[j] = out[j] + p[j];
  }
  return absl::OkStatus();
}

std::vector<int> MoELayer::expert_parameter_ids() const {
  std::vector<int> ids;
  for (const auto* v : {&expert_ids_.fc1_weight, &expert_ids_.fc1_bias, &expert_ids_.fc2_weight,
                        &expert_ids_.fc2_bias}) {
    ids.insert(ids.end(), v->begin(), v->end());
  }
  return ids;
}

std::vector<int> MoELayer::parameter_ids() const {
  std::vector<int> ids = {router_weight_};
  for (const MlpIds* m : {&expert_ids_, &shared_ids_}) {
    for (const auto* v : {&m->fc1_weight, &m->fc1_bias, &m->fc2_weight, &m->fc2_bias}) {
      ids.insert(ids.end(), v->begin(), v->end());
    }
  }
  return ids;
}

int64_t MoEStashBytes(const MoEStash& s) {
  auto bytes = [](const auto& v) {
    return static_cast<int64_t>(v.size() * sizeof(typename std::decay_t<decltype(v)>::value_type));
  };
  const RouterState& r = s.router;
  const PermutationPlan& p = s.plan;
  return bytes(r.logits) + bytes(r.top_indices) + bytes(r.probs) + bytes(r.routing_map) +
         bytes(r.tokens_per_expert) + bytes(r.routed_tokens_per_expert) + bytes(r.aux_grad) +
         bytes(r.lse) + bytes(p.tokens_per_expert) + bytes(p.expert_offsets) + bytes(p.row_token) +
         bytes(p.row_expert) + bytes(p.row_prob) + bytes(p.token_row_offsets) +
         bytes(p.token_rows) + bytes(s.permuted_x) + bytes(s.expert_out) +
         bytes(s.experts.fc1_out) + bytes(s.experts.act_out) + bytes(s.experts.d_fc1) +
         bytes(s.shared.fc1_out) + bytes(s.shared.act_out) + bytes(s.shared.d_fc1) +
         bytes(s.d_expert_out) + bytes(s.d_logits) +
         bytes(s.tokens_per_local_expert) + bytes(s.local_x) + bytes(s.d_local_out);
}

void MoELayer::UpdateExpertBias(const float* tokens_per_expert) {
  const int64_t e = config_.router.num_experts;
  moe::UpdateExpertBias(tokens_per_expert != nullptr ? tokens_per_expert : local_tokens_.data(), e,
                        config_.router.bias_update_rate, expert_bias_.data());
  std::fill(local_tokens_.begin(), local_tokens_.end(), 0.0f);
}

}  // namespace mxmaca::layers::moe
