// api/train/moe_setup.cc: see moe_setup.h.
#include "api/train/moe_setup.h"

#include <cctype>
#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "layers/moe/moe_layer.h"

namespace mxmaca::api {
namespace {

// A tiny parser for Megatron's --moe-layer-freq list expressions:
//   expr := term ('+' term)* ; term := atom ('*' int)? ; atom := '[' ints ']' | '(' expr ')'
class FreqParser {
 public:
  explicit FreqParser(const std::string& text) : text_(text) {}
  absl::StatusOr<std::vector<bool>> Parse() {
    MXMACA_ASSIGN_OR_RETURN(std::vector<bool> v, Expr());
    Skip();
    if (pos_ != text_.size()) return Error("unexpected text");
    return v;
  }

 private:
  void Skip() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Eat(char c) {
    Skip();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  absl::StatusOr<int64_t> Int() {
    Skip();
    const size_t start = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    int64_t v = 0;
    if (start == pos_ || !absl::SimpleAtoi(text_.substr(start, pos_ - start), &v)) {
      return Error("expected an integer");
    }
    return v;
  }
  absl::StatusOr<std::vector<bool>> Atom() {
    std::vector<bool> v;
    if (Eat('[')) {
      if (Eat(']')) return v;
      do {
        MXMACA_ASSIGN_OR_RETURN(int64_t x, Int());
        if (x != 0 && x != 1) return Error("list entries must be 0 or 1");
        v.push_back(x == 1);
      } while (Eat(','));
      if (!Eat(']')) return Error("expected ']'");
      return v;
    }
    if (Eat('(')) {
      MXMACA_ASSIGN_OR_RETURN(v, Expr());
      if (!Eat(')')) return Error("expected ')'");
      return v;
    }
    return Error("expected '[' or '('");
  }
  absl::StatusOr<std::vector<bool>> Term() {
    MXMACA_ASSIGN_OR_RETURN(std::vector<bool> v, Atom());
    if (Eat('*')) {
      MXMACA_ASSIGN_OR_RETURN(int64_t n, Int());
      if (n < 0 || n > 100000) return Error("repeat count out of range");
      std::vector<bool> r;
      for (int64_t i = 0; i < n; ++i) r.insert(r.end(), v.begin(), v.end());
      v = std::move(r);
    }
    return v;
  }
  absl::StatusOr<std::vector<bool>> Expr() {
    MXMACA_ASSIGN_OR_RETURN(std::vector<bool> v, Term());
    while (Eat('+')) {
      MXMACA_ASSIGN_OR_RETURN(std::vector<bool> t, Term());
      v.insert(v.end(), t.begin(), t.end());
    }
    return v;
  }
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("--moe-layer-freq '", text_, "': ", what,
                                                   " at character ", pos_));
  }

  const std::string& text_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<bool>> ParseMoeLayerFreq(const std::string& value, int64_t num_layers) {
  int64_t every = 0;
  if (absl::SimpleAtoi(value, &every)) {
    if (every < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--moe-layer-freq ", value, ": expected an int >= 1 or a list"));
    }
    std::vector<bool> v(static_cast<size_t>(num_layers));
    for (int64_t l = 0; l < num_layers; ++l) v[static_cast<size_t>(l)] = l % every == 0;
    return v;
  }
  MXMACA_ASSIGN_OR_RETURN(std::vector<bool> v, FreqParser(value).Parse());
  if (static_cast<int64_t>(v.size()) != num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("--moe-layer-freq '", value, "' has ",
                                                   v.size(), " entries; --num-layers is ",
                                                   num_layers));
  }
  return v;
}

absl::Status AddMoEConfig(const MegatronArgs& a, layers::GptConfig* config) {
  if (!a.num_experts) return absl::OkStatus();
  const int64_t ep = a.expert_model_parallel_size;
  const int64_t tp = a.tensor_model_parallel_size;
  if (ep > 1) {
    // The expert grid of docs/ARCHITECTURE.md with ETP = 1: EP = k x TP (k dividing DP), so an EP
    // group is the TP groups of k consecutive DP replicas and the expert-data-parallel
    // group the remaining DP / k replicas (k = 1: the TP group and the DP group; k > 1:
    // the experts sit in their own arena region reduced over EDP, layers/gpt_stage.h).
    // With TP each TP rank routes its sequence-parallel rows (Megatron requires SP for
    // MoE with TP).
    const int64_t etp = a.expert_tensor_parallel_size.value_or(a.tensor_model_parallel_size);
    if (etp != 1) {
      return absl::UnimplementedError(absl::StrCat(
          "--expert-tensor-parallel-size ", etp,
          ": expert tensor parallelism is not implemented; with --expert-model-parallel-size ",
          ep, " pass --expert-tensor-parallel-size 1"));
    }
    const int64_t stage_ranks = tp * a.data_parallel_size;  // TP x DP (CP = 1 below)
    if (ep % tp != 0 || stage_ranks % ep != 0) {
      return absl::UnimplementedError(absl::StrCat(
          "--expert-model-parallel-size ", ep, " with --tensor-model-parallel-size ", tp,
          " and data-parallel size ", a.data_parallel_size,
          ": expected a multiple of the TP size that divides TP x DP = ", stage_ranks,
          " (expert tensor parallel size 1: an EP group is the TP groups of EP / TP "
          "data-parallel replicas)"));
    }
    if (tp > 1 && !a.sequence_parallel) {
      return absl::UnimplementedError(absl::StrCat(
          "--expert-model-parallel-size ", ep, " with --tensor-model-parallel-size ", tp,
          " needs --sequence-parallel (Megatron: MoE with tensor parallelism uses sequence "
          "parallelism; each TP rank routes its own rows)"));
    }
    if (ep > tp) {
      // The EP group reaches across DP replicas: they must run their MoE layers in step.
      const char* what = a.context_parallel_size > 1      ? "--context-parallel-size"
                         : a.use_distributed_optimizer ? "--use-distributed-optimizer"
                         : a.dynamic_pipeline          ? "--dynamic-pipeline"
                                                       : nullptr;
      if (what != nullptr) {
        return absl::UnimplementedError(absl::StrCat(
            "--expert-model-parallel-size ", ep, " > --tensor-model-parallel-size ", tp,
            " (expert groups across data-parallel ranks) with ", what,
            " is not implemented; use EP = TP or drop ", what));
      }
    }
  }
  {
    // A token group (TP ranks routing their own rows, or CP ranks): the aux-loss counts
    // are reduced over it, which seq_aux_loss / global_aux_loss do not do yet.
    const std::string& lb = a.moe_router_load_balancing_type.empty()
                                ? std::string()
                                : a.moe_router_load_balancing_type[0];
    const bool token_group = (ep > 1 && tp > 1) || a.context_parallel_size > 1;
    if (token_group && (lb == "seq_aux_loss" || lb == "global_aux_loss")) {
      return absl::UnimplementedError(absl::StrCat(
          "--moe-router-load-balancing-type ", lb, " with --expert-model-parallel-size ", ep,
          " x --tensor-model-parallel-size ", tp, " / --context-parallel-size ",
          a.context_parallel_size,
          ": only aux_loss, sinkhorn or none (the per-sequence and global counts over the "
          "token group are not implemented)"));
    }
  }
  using layers::moe::LoadBalancingType;
  layers::moe::MoELayerConfig m;
  layers::moe::RouterConfig& r = m.router;
  r.hidden_size = config->hidden_size;
  r.num_experts = *a.num_experts;
  r.topk = a.moe_router_topk;
  if (a.moe_router_score_function == "softmax") {
    r.score_function = layers::moe::ScoreFunction::kSoftmax;
  } else if (a.moe_router_score_function == "sigmoid") {
    r.score_function = layers::moe::ScoreFunction::kSigmoid;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--moe-router-score-function ",
                                                   a.moe_router_score_function,
                                                   ": expected softmax or sigmoid"));
  }
  r.pre_softmax = a.moe_router_pre_softmax;
  r.num_groups = a.moe_router_num_groups.value_or(0);
  r.group_topk = a.moe_router_group_topk.value_or(0);
  r.topk_scaling_factor = a.moe_router_topk_scaling_factor.value_or(0.0);
  if (a.moe_router_load_balancing_type.size() != 1 || a.moe_aux_loss_coeff.size() != 1) {
    return absl::UnimplementedError(
        "--moe-router-load-balancing-type / --moe-aux-loss-coeff: one type and one "
        "coefficient (lists of several are not supported)");
  }
  const std::string& lb = a.moe_router_load_balancing_type[0];
  if (lb == "aux_loss") {
    r.load_balancing_type = LoadBalancingType::kAuxLoss;
  } else if (lb == "seq_aux_loss") {
    r.load_balancing_type = LoadBalancingType::kSeqAuxLoss;
  } else if (lb == "global_aux_loss") {
    r.load_balancing_type = LoadBalancingType::kGlobalAuxLoss;
  } else if (lb == "sinkhorn") {
    r.load_balancing_type = LoadBalancingType::kSinkhorn;
  } else if (lb == "none") {
    r.load_balancing_type = LoadBalancingType::kNone;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--moe-router-load-balancing-type ", lb,
        ": expected aux_loss, seq_aux_loss, global_aux_loss, sinkhorn or none"));
  }
  r.aux_loss_coeff = a.moe_aux_loss_coeff[0];
  // At EP 1 every TP rank computes the router over all tokens (transformer_layer.h), so the
  // z-loss is the single-device one: Megatron's division of the coefficient by TP x CP
  // (which undoes its TP gradient all-reduce of per-rank z-losses) does not apply. With
  // EP > 1 each TP rank routes its own rows and GptStage::Create divides by TP.
  r.z_loss_coeff = a.moe_z_loss_coeff.value_or(0.0);
  r.capacity_factor = a.moe_expert_capacity_factor;
  if (a.moe_token_drop_policy == "probs") {
    r.drop_policy = layers::moe::TokenDropPolicy::kProbs;
  } else if (a.moe_token_drop_policy == "position") {
    r.drop_policy = layers::moe::TokenDropPolicy::kPosition;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--moe-token-drop-policy ",
                                                   a.moe_token_drop_policy,
                                                   ": expected probs or position"));
  }
  r.pad_to_capacity = a.moe_pad_expert_input_to_capacity;
  // Aux-loss-free load balancing: the bias is updated once per iteration from the token
  // counts all-reduced over TP x DP (layers/gpt_stage.h UpdateExpertBias).
  r.enable_expert_bias = a.moe_router_enable_expert_bias;
  r.bias_update_rate = a.moe_router_bias_update_rate;
  m.expert.hidden_size = config->hidden_size;
  m.expert.ffn_hidden_size = a.moe_ffn_hidden_size.value_or(config->ffn_hidden_size);
  m.expert.swiglu = config->swiglu;
  m.expert.gelu_tanh_approximation = config->gelu_tanh_approximation;
  m.expert.add_bias = config->add_bias_linear;
  m.shared_expert_ffn_hidden_size = a.moe_shared_expert_intermediate_size.value_or(0);
  m.init_method_std = config->init_method_std;
  m.num_layers = config->num_layers;
  m.expert_model_parallel_size = ep;
  m.token_dispatcher_type = a.moe_token_dispatcher_type;
  MXMACA_RETURN_IF_ERROR(layers::moe::ValidateMoELayerConfig(m));
  MXMACA_ASSIGN_OR_RETURN(config->moe_layers,
                          ParseMoeLayerFreq(a.moe_layer_freq, config->num_layers));
  config->moe = std::make_shared<const layers::moe::MoELayerConfig>(std::move(m));
  return absl::OkStatus();
}

}  // namespace mxmaca::api
