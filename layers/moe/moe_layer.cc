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
  return absl::OkStatus();
}

std::string MoEParameterPrefix(int64_t layer) {
  return absl::StrCat("decoder.layers.", layer, ".mlp");
}

absl::Status RegisterMoEParameters(const MoELayerConfig& c, int64_t layer, ParameterStore* store) {
  MXMACA_RETURN_IF_ERROR(ValidateMoELayerConfig(c));
  const std::string prefix = MoEParameterPrefix(layer);
  ParameterSpec router{prefix + ".router.weight",
                       {c.router.num_experts, c.router.hidden_size},
                       ParameterInit::kNormal,
                       static_cast<float>(c.init_method_std)};
  MXMACA_RETURN_IF_ERROR(store->Register(router).status());
  for (int64_t i = 0; i < c.router.num_experts; ++i) {
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
  for (int64_t i = 0; i < config.router.num_experts; ++i) {
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

absl::Status MoELayer::Forward(const kernels::ExecContext& ctx, const MoECall& call, const float* x,
                               float* y, MoEStash* st, MoEMetrics* metrics) {
  const RouterConfig& rc = config_.router;
  const int64_t t = call.num_tokens, h = rc.hidden_size, e = rc.num_experts;
  RouterCall rcall;
  rcall.num_tokens = t;
  rcall.seq_length = call.seq_length;
  rcall.training = call.training;
  rcall.global = call.global;
  rcall.expert_bias = rc.enable_expert_bias ? expert_bias_.data() : nullptr;
  st->num_tokens = t;
  MXMACA_RETURN_IF_ERROR(
      RouterForward(ctx, rc, rcall, x, store_->param(router_weight_), &st->router));
  if (call.training && rc.enable_expert_bias) {
    for (int64_t i = 0; i < e; ++i) local_tokens_[i] += st->router.tokens_per_expert[i];
  }
  MXMACA_ASSIGN_OR_RETURN(
      st->plan, MakePermutationPlan(st->router.routing_map.data(), st->router.probs.data(), t, e));
  const int64_t rows = st->plan.num_rows();
  st->permuted_x.assign(rows * h, 0.0f);
  st->expert_out.assign(rows * h, 0.0f);
  Permute(st->plan, x, h, st->permuted_x.data());
  GroupedExpertsForward(ctx, config_.expert, experts_, st->plan.tokens_per_expert,
                        st->permuted_x.data(), st->expert_out.data(), &st->experts);
  Unpermute(st->plan, st->expert_out.data(), h, y);
  if (config_.shared_expert_ffn_hidden_size > 0) {
    std::vector<float> shared_out(t * h);
    const int64_t counts[1] = {t};
    GroupedExpertsForward(ctx, shared_config_, shared_, counts, x, shared_out.data(), &st->shared);
    for (int64_t i = 0; i < t * h; ++i) y[i] = y[i] + shared_out[i];
  }
  if (metrics != nullptr) {
    metrics->tokens_per_expert = st->plan.tokens_per_expert;
    int64_t total = 0, max = 0;
    for (int64_t n : metrics->tokens_per_expert) {
      total += n;
      max = std::max(max, n);
    }
    metrics->mean_tokens_per_expert = static_cast<double>(total) / e;
    metrics->max_tokens_per_expert = max;
    metrics->load_imbalance =
        total > 0 ? static_cast<double>(max) / metrics->mean_tokens_per_expert : 0.0;
    metrics->dropped_tokens = st->router.dropped_tokens;
    metrics->capacity = st->router.capacity;
    metrics->load_balancing_loss =
        rc.aux_loss_coeff > 0.0 ? st->router.aux_loss / rc.aux_loss_coeff : 0.0;
    metrics->z_loss = rc.z_loss_coeff > 0.0 ? st->router.z_loss / rc.z_loss_coeff : 0.0;
  }
  return absl::OkStatus();
}

void MoELayer::BackwardInput(const kernels::ExecContext& ctx, const float* x, const float* dy,
                             double aux_loss_grad_scale, MoEStash* st, float* dx) {
  const RouterConfig& rc = config_.router;
  const int64_t t = st->num_tokens, h = rc.hidden_size, e = rc.num_experts;
  const int64_t rows = st->plan.num_rows();
  st->d_expert_out.assign(rows * h, 0.0f);
  std::vector<float> d_probs(t * e), d_permuted(rows * h);
  UnpermuteBackward(st->plan, st->expert_out.data(), dy, h, st->d_expert_out.data(),
                    d_probs.data());
  GroupedExpertsBackwardInput(ctx, config_.expert, experts_, st->plan.tokens_per_expert,
                              st->d_expert_out.data(), d_permuted.data(), &st->experts);
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
}

void MoELayer::BackwardWeight(const kernels::ExecContext& ctx, const float* x, const float* dy,
                              const MoEStash& st) {
  ParameterStore* store = store_;
  BackwardWeight(ctx, x, dy, st, [store](int id) { return store->grad(id); });
}

void MoELayer::BackwardWeight(const kernels::ExecContext& ctx, const float* x, const float* dy,
                              const MoEStash& st, const std::function<float*(int)>& grad) {
  auto bind = [&grad](const MlpIds& ids) {
    ExpertGrads g;
    for (int id : ids.fc1_weight) g.fc1_weight.push_back(grad(id));
    for (int id : ids.fc1_bias) g.fc1_bias.push_back(grad(id));
    for (int id : ids.fc2_weight) g.fc2_weight.push_back(grad(id));
    for (int id : ids.fc2_bias) g.fc2_bias.push_back(grad(id));
    return g;
  };
  const RouterConfig& rc = config_.router;
  GroupedExpertsBackwardWeight(ctx, config_.expert, st.plan.tokens_per_expert, st.permuted_x.data(),
                               st.d_expert_out.data(), st.experts, bind(expert_ids_));
  RouterWeightGrad(ctx, rc, st.num_tokens, st.d_logits.data(), x, grad(router_weight_));
  if (config_.shared_expert_ffn_hidden_size > 0) {
    const int64_t counts[1] = {st.num_tokens};
    GroupedExpertsBackwardWeight(ctx, shared_config_, counts, x, dy, st.shared, bind(shared_ids_));
  }
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
         bytes(s.d_expert_out) + bytes(s.d_logits);
}

void MoELayer::UpdateExpertBias(const float* tokens_per_expert) {
  const int64_t e = config_.router.num_experts;
  moe::UpdateExpertBias(tokens_per_expert != nullptr ? tokens_per_expert : local_tokens_.data(), e,
                        config_.router.bias_update_rate, expert_bias_.data());
  std::fill(local_tokens_.begin(), local_tokens_.end(), 0.0f);
}

}  // namespace mxmaca::layers::moe
