// api/convert/hf_config.cc: see hf_config.h.
#include "api/convert/hf_config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "layers/moe/moe_layer.h"

namespace mxmaca::api::convert {
namespace {

// ShortestFloat: the shortest %g decimal that reads back as `f` (fp32), as a JSON number.
nlohmann::json ShortestFloat(float f) {
  char buf[32];
  for (int precision = 1; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
  return nlohmann::json::parse(buf);
}

std::string Str(float f) { return ShortestFloat(f).dump(); }

absl::Status Refuse(const std::string& what, const std::string& target,
                    const std::string& expected) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, " but Hugging Face ", target, " expects ", expected));
}

const char* NormName(layers::Normalization n) {
  return n == layers::Normalization::kRmsNorm ? "RMSNorm" : "LayerNorm";
}

const char* PositionName(layers::PositionEmbeddingType p) {
  switch (p) {
    case layers::PositionEmbeddingType::kRope:
      return "rope";
    case layers::PositionEmbeddingType::kNone:
      return "none";
    default:
      return "learned_absolute";
  }
}

// CheckMoE: what Hugging Face's MixtralSparseMoeBlock / Qwen3MoeSparseMoeBlock compute
// (every layer MoE; router = softmax over all experts, top-k, renormalised to sum 1 =
// Megatron's default top-k on the logits then softmax over the k; Qwen3-MoE also without the
// renormalisation (norm_topk_prob false = --moe-router-pre-softmax); dropless; SwiGLU
// experts without biases; no shared expert), refusing each MoE setting that differs.
absl::Status CheckMoE(const layers::GptConfig& c, const std::string& target) {
  const layers::moe::MoELayerConfig& m = *c.moe;
  const layers::moe::RouterConfig& r = m.router;
  std::vector<int64_t> dense;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (!c.is_moe_layer(l)) dense.push_back(l);
  }
  if (!dense.empty()) {
    return Refuse(
        absl::StrCat("--moe-layer-freq makes layers [", absl::StrJoin(dense, ", "), "] dense"),
        target, "a MoE block on every layer");
  }
  if (c.add_bias_linear || c.add_qkv_bias || m.expert.add_bias) {
    return Refuse(c.add_bias_linear ? "--add-bias-linear is set (biases on every linear)"
                                    : "--add-qkv-bias is set",
                  target, "no biases (pass --disable-bias-linear)");
  }
  if (m.shared_expert_ffn_hidden_size > 0) {
    return Refuse(
        absl::StrCat("--moe-shared-expert-intermediate-size is ", m.shared_expert_ffn_hidden_size),
        target, "routed experts only (no shared expert)");
  }
  if (r.score_function != layers::moe::ScoreFunction::kSoftmax) {
    return Refuse("--moe-router-score-function is sigmoid", target, "softmax routing");
  }
  if (r.pre_softmax && target != "qwen3_moe") {
    return Refuse("--moe-router-pre-softmax is set (top-k probabilities not renormalised)", target,
                  "the top-k softmax weights renormalised to sum 1 (qwen3_moe can leave them: "
                  "norm_topk_prob false)");
  }
  if (r.num_groups > 0) {
    return Refuse(
        absl::StrCat("--moe-router-num-groups is ", r.num_groups, " (group-limited routing)"),
        target, "top-k over all experts");
  }
  if (r.topk_scaling_factor != 0.0 && r.topk_scaling_factor != 1.0) {
    return Refuse(absl::StrCat("--moe-router-topk-scaling-factor is ",
                               Str(static_cast<float>(r.topk_scaling_factor))),
                  target, "unscaled routing weights");
  }
  if (r.enable_expert_bias) {
    return Refuse("--moe-router-enable-expert-bias is set", target, "no expert bias");
  }
  if (r.capacity_factor.has_value()) {
    return Refuse(absl::StrCat("--moe-expert-capacity-factor is ",
                               Str(static_cast<float>(*r.capacity_factor)),
                               " (tokens over capacity are dropped)"),
                  target, "dropless routing (no capacity factor)");
  }
  if (r.load_balancing_type == layers::moe::LoadBalancingType::kSinkhorn) {
    return Refuse(
        "--moe-router-load-balancing-type is sinkhorn (its routing weights are the softmax over "
        "all experts, not renormalised over the top-k)",
        target, "aux_loss, seq_aux_loss, global_aux_loss or none");
  }
  if (!m.expert.swiglu) return Refuse("--swiglu is not set", target, "SwiGLU experts");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HfModelType> ChooseHfModelType(const layers::GptConfig& c,
                                              const std::string& requested) {
  HfModelType t;
  if (requested == "auto") {
    const bool gpt2 = c.normalization == layers::Normalization::kLayerNorm &&
                      c.position_embedding_type == layers::PositionEmbeddingType::kLearnedAbsolute;
    t.architecture = gpt2 ? HfArchitecture::kGpt2 : HfArchitecture::kLlama;
    // Qwen3's q/k norms; Qwen2's biases on q, k and v only.
    t.model_type = gpt2                                   ? "gpt2"
                   : c.qk_layernorm                       ? "qwen3"
                   : c.add_qkv_bias && !c.add_bias_linear ? "qwen2"
                                                          : "llama";
  } else if (requested == "gpt2") {
    t = {HfArchitecture::kGpt2, "gpt2"};
  } else if (requested == "llama" || requested == "mistral" || requested == "qwen2" ||
             requested == "qwen3") {
    t = {HfArchitecture::kLlama, requested};
  } else if (requested == "mixtral") {
    t = {HfArchitecture::kMixtral, "mixtral"};
  } else if (requested == "qwen3_moe") {
    t = {HfArchitecture::kQwen3Moe, "qwen3_moe"};
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--model-type is ", requested,
                     "; expected auto, gpt2, llama, mistral, qwen2, qwen3, mixtral or qwen3_moe"));
  }
  if (requested == "auto" && c.moe != nullptr) {
    t = c.qk_layernorm ? HfModelType{HfArchitecture::kQwen3Moe, "qwen3_moe"}
                       : HfModelType{HfArchitecture::kMixtral, "mixtral"};
  }
  const std::string& target = t.model_type;
  if (c.moe != nullptr && !IsMoEArchitecture(t.architecture)) {
    return Refuse(absl::StrCat("the checkpoint is a Mixture-of-Experts model (--num-experts ",
                               c.moe->router.num_experts, ")"),
                  target,
                  "a dense model (export MoE models as --model-type mixtral, qwen3_moe or auto)");
  }
  if (c.moe == nullptr && IsMoEArchitecture(t.architecture)) {
    return Refuse("--num-experts is not set (a dense model)", target,
                  "a Mixture-of-Experts model (use llama or mistral for dense models)");
  }
  if (c.apply_layernorm_1p)
    return Refuse("--apply-layernorm-1p is set", target, "plain norm weights");
  // Qwen3-MoE has Qwen3's attention (q_norm / k_norm, no biases).
  const bool qwen2 = target == "qwen2", qwen3 = target == "qwen3" || target == "qwen3_moe";
  if (c.qk_layernorm && !qwen3) {
    return Refuse("--qk-layernorm is set", target, "no q/k norms (qwen3 and qwen3_moe have them)");
  }
  if (qwen3 && !c.qk_layernorm) {
    return Refuse("--qk-layernorm is not set", target, "q_norm / k_norm on every layer");
  }
  if (c.rotary_interleaved) {
    return Refuse("--rotary-interleaved is set (RoPE on adjacent pairs)", target,
                  "RoPE rotating the two halves of each head");
  }
  // rope_scaling: llama3 (--use-rope-scaling) or linear (--rotary-seq-len-interpolation-
  // factor) for llama / qwen2 / qwen3 (LlamaConfig, Qwen2Config, Qwen3Config have it).
  const bool scalable =
      (t.architecture == HfArchitecture::kLlama && target != "mistral") || target == "qwen3_moe";
  if (c.rope_scaling && c.rotary_seq_len_interpolation_factor > 0) {
    return Refuse(
        absl::StrCat("--use-rope-scaling is set with --rotary-seq-len-interpolation-factor ",
                     Str(c.rotary_seq_len_interpolation_factor)),
        target, "one rope_scaling (llama3 or linear)");
  }
  if (c.rope_scaling && !scalable) {
    return Refuse("--use-rope-scaling is set", target,
                  "rope_scaling null (llama, qwen2, qwen3 and qwen3_moe carry Llama-3 scaling)");
  }
  if (c.rotary_seq_len_interpolation_factor > 0 && !scalable) {
    return Refuse(absl::StrCat("--rotary-seq-len-interpolation-factor is ",
                               Str(c.rotary_seq_len_interpolation_factor)),
                  target, "no position interpolation");
  }
  if (c.rotary_percent != 1.0f &&
      c.position_embedding_type == layers::PositionEmbeddingType::kRope) {
    return Refuse(absl::StrCat("--rotary-percent is ", Str(c.rotary_percent)), target, "1");
  }
  if (t.architecture == HfArchitecture::kGpt2) {
    if (c.normalization != layers::Normalization::kLayerNorm) {
      return Refuse(absl::StrCat("--normalization is ", NormName(c.normalization)), target,
                    "LayerNorm");
    }
    if (c.position_embedding_type != layers::PositionEmbeddingType::kLearnedAbsolute) {
      return Refuse(
          absl::StrCat("--position-embedding-type is ", PositionName(c.position_embedding_type)),
          target, "learned_absolute");
    }
    if (c.swiglu) return Refuse("--swiglu is set", target, "a GELU MLP");
    if (!c.add_bias_linear)
      return Refuse("--disable-bias-linear is set", target, "biases on every linear");
    if (!c.tied_embeddings()) {
      return Refuse("--untie-embeddings-and-output-weights is set", target, "tied embeddings");
    }
    if (c.query_groups() != c.num_attention_heads) {
      return Refuse(absl::StrCat("--num-query-groups is ", c.query_groups(), " (GQA)"), target,
                    absl::StrCat("multi-head attention (", c.num_attention_heads, " groups)"));
    }
    if (c.head_dim() * c.num_attention_heads != c.hidden_size) {
      return Refuse(absl::StrCat("--kv-channels is ", c.head_dim()), target,
                    absl::StrCat("hidden_size / heads = ", c.hidden_size / c.num_attention_heads));
    }
  } else {  // llama, mistral, mixtral
    if (c.normalization != layers::Normalization::kRmsNorm) {
      return Refuse(absl::StrCat("--normalization is ", NormName(c.normalization)), target,
                    "RMSNorm");
    }
    if (c.position_embedding_type != layers::PositionEmbeddingType::kRope) {
      return Refuse(
          absl::StrCat("--position-embedding-type is ", PositionName(c.position_embedding_type)),
          target, "rope");
    }
    if (!c.swiglu) return Refuse("--swiglu is not set", target, "a SwiGLU MLP (hidden_act silu)");
    if (qwen2) {
      // Qwen2Attention: q/k/v with biases, o_proj and the MLP without.
      if (c.add_bias_linear) {
        return Refuse("--add-bias-linear is set", target, "no biases on o_proj and the MLP");
      }
      if (!c.add_qkv_bias) {
        return Refuse("--add-qkv-bias is not set", target, "biases on q, k and v");
      }
    } else if (qwen3) {
      // Qwen3: attention_bias covers q, k, v and o; the MLP never has biases.
      if (c.add_bias_linear) {
        return Refuse("--add-bias-linear is set", target,
                      "no MLP biases (attention_bias alone would leave them out)");
      }
      if (c.add_qkv_bias) {
        return Refuse("--add-qkv-bias is set", target,
                      "no biases (attention_bias puts them on q, k, v and o, which no Megatron "
                      "flag does without MLP biases)");
      }
      if (c.normalization != layers::Normalization::kRmsNorm) {
        return Refuse(absl::StrCat("--normalization is ", NormName(c.normalization)), target,
                      "RMSNorm");
      }
    } else if (!c.add_bias_linear && c.add_qkv_bias) {
      return Refuse(
          "--add-qkv-bias is set without --add-bias-linear (Qwen2's layout: --model-type qwen2)",
          target, "biases on all of q, k, v, o and the MLP (attention_bias and mlp_bias) or none");
    }
  }
  if (IsMoEArchitecture(t.architecture)) MXMACA_RETURN_IF_ERROR(CheckMoE(c, target));
  return t;
}

std::vector<std::string> HfExportNotes(const layers::GptConfig& c, const HfModelType& t) {
  std::vector<std::string> notes;
  if (!IsMoEArchitecture(t.architecture) || c.moe == nullptr) return notes;
  const bool mixtral = t.architecture == HfArchitecture::kMixtral;
  const layers::moe::RouterConfig& r = c.moe->router;
  if (r.load_balancing_type == layers::moe::LoadBalancingType::kSeqAuxLoss ||
      r.load_balancing_type == layers::moe::LoadBalancingType::kGlobalAuxLoss) {
    notes.push_back(absl::StrCat(
        "note: --moe-router-load-balancing-type ",
        r.load_balancing_type == layers::moe::LoadBalancingType::kSeqAuxLoss ? "seq_aux_loss"
                                                                             : "global_aux_loss",
        " is written as router_aux_loss_coef ", Str(static_cast<float>(r.aux_loss_coeff)), " (",
        mixtral ? "Mixtral" : "Qwen3-MoE",
        "'s one load-balancing loss, over the batch; training only)"));
  }
  if (mixtral && c.ffn_hidden_size != c.moe->expert.ffn_hidden_size) {
    notes.push_back(
        absl::StrCat("not exported: --ffn-hidden-size ", c.ffn_hidden_size,
                     " (unused: every layer is MoE; intermediate_size is --moe-ffn-hidden-size ",
                     c.moe->expert.ffn_hidden_size, ", and an import records both as that)"));
  }
  if (r.z_loss_coeff != 0.0) {
    notes.push_back(absl::StrCat(
        "not exported: --moe-z-loss-coeff ", Str(static_cast<float>(r.z_loss_coeff)), " (",
        mixtral ? "Mixtral" : "Qwen3-MoE", "'s config has no router z-loss; training only)"));
  }
  return notes;
}

nlohmann::json HfConfigJson(const layers::GptConfig& c, const HfModelType& t, HfDtype dtype) {
  nlohmann::ordered_json j;
  const char* torch_dtype = dtype == HfDtype::kBf16 ? "bfloat16" : "float32";
  if (t.architecture == HfArchitecture::kGpt2) {
    j["architectures"] = {"GPT2LMHeadModel"};
    j["model_type"] = "gpt2";
    j["vocab_size"] = c.vocab_size;
    j["n_positions"] = c.max_position_embeddings;
    j["n_ctx"] = c.max_position_embeddings;
    j["n_embd"] = c.hidden_size;
    j["n_layer"] = c.num_layers;
    j["n_head"] = c.num_attention_heads;
    j["n_inner"] = c.ffn_hidden_size;
    j["activation_function"] = c.gelu_tanh_approximation ? "gelu_new" : "gelu";
    j["layer_norm_epsilon"] = ShortestFloat(c.norm_epsilon);
    j["resid_pdrop"] = ShortestFloat(c.hidden_dropout);
    j["embd_pdrop"] = ShortestFloat(c.hidden_dropout);
    j["attn_pdrop"] = ShortestFloat(c.attention_dropout);
    j["initializer_range"] = ShortestFloat(c.init_method_std);
    j["scale_attn_weights"] = true;
    j["tie_word_embeddings"] = true;
  } else {
    const bool mixtral = t.architecture == HfArchitecture::kMixtral;
    const bool qwen3_moe = t.architecture == HfArchitecture::kQwen3Moe;
    const bool qwen2 = t.model_type == "qwen2", qwen3 = t.model_type == "qwen3" || qwen3_moe;
    j["architectures"] = {mixtral                     ? "MixtralForCausalLM"
                          : qwen3_moe                 ? "Qwen3MoeForCausalLM"
                          : t.model_type == "mistral" ? "MistralForCausalLM"
                          : qwen2                     ? "Qwen2ForCausalLM"
                          : qwen3                     ? "Qwen3ForCausalLM"
                                                      : "LlamaForCausalLM"};
    j["model_type"] = t.model_type;
    j["vocab_size"] = c.vocab_size;
    j["hidden_size"] = c.hidden_size;
    // Mixtral: each expert's FFN (every layer is MoE, so the dense --ffn-hidden-size is unused);
    // Qwen3-MoE: the dense MLP's (mlp_only_layers), each expert's is moe_intermediate_size.
    j["intermediate_size"] = mixtral ? c.moe->expert.ffn_hidden_size : c.ffn_hidden_size;
    if (qwen3_moe) j["moe_intermediate_size"] = c.moe->expert.ffn_hidden_size;
    j["num_hidden_layers"] = c.num_layers;
    j["num_attention_heads"] = c.num_attention_heads;
    j["num_key_value_heads"] = c.query_groups();
    j["head_dim"] = c.head_dim();
    j["hidden_act"] = "silu";
    j["max_position_embeddings"] = c.max_position_embeddings;
    j["rms_norm_eps"] = ShortestFloat(c.norm_epsilon);
    j["rope_theta"] = ShortestFloat(c.rotary_base);
    if (!mixtral) {  // (Qwen3MoeConfig has rope_scaling too)
      // transformers' _compute_llama3_parameters / _compute_linear_scaling_rope_parameters
      // with Megatron's fixed low 1, high 4, original 8192 (kernels/rope_frequencies.h).
      const kernels::RopeFrequencies f = c.rope_frequencies();
      nlohmann::ordered_json s = nullptr;
      if (c.rope_scaling) {
        s = nlohmann::ordered_json::object();
        s["rope_type"] = "llama3";
        s["factor"] = ShortestFloat(f.scaling_factor);
        s["low_freq_factor"] = ShortestFloat(f.low_freq_factor);
        s["high_freq_factor"] = ShortestFloat(f.high_freq_factor);
        s["original_max_position_embeddings"] = static_cast<int64_t>(f.original_max_position);
      } else if (c.rotary_seq_len_interpolation_factor > 0) {
        s = nlohmann::ordered_json::object();
        s["rope_type"] = "linear";
        s["factor"] = ShortestFloat(c.rotary_seq_len_interpolation_factor);
      }
      j["rope_scaling"] = s;
    }
    if (qwen3) {
      j["attention_bias"] = false;    // (Qwen2's q/k/v biases are implied; Qwen3's MLP has none)
    } else if (!mixtral && !qwen2) {  // (MixtralConfig has neither; its linears never have biases)
      j["attention_bias"] = c.add_bias_linear;
      j["mlp_bias"] = c.add_bias_linear;
    }
    if (qwen2 || qwen3) {
      j["use_sliding_window"] = false;
      j["sliding_window"] = nullptr;
      j["max_window_layers"] = c.num_layers;
    }
    j["attention_dropout"] = ShortestFloat(c.attention_dropout);
    j["initializer_range"] = ShortestFloat(c.init_method_std);
    j["tie_word_embeddings"] = c.tied_embeddings();
    if (t.model_type == "mistral" || mixtral) j["sliding_window"] = nullptr;
    if (mixtral || qwen3_moe) {
      const layers::moe::RouterConfig& r = c.moe->router;
      j[mixtral ? "num_local_experts" : "num_experts"] = r.num_experts;
      j["num_experts_per_tok"] = r.topk;
      if (qwen3_moe) {
        j["norm_topk_prob"] = !r.pre_softmax;
        j["decoder_sparse_step"] = 1;
        j["mlp_only_layers"] = nlohmann::ordered_json::array();
      }
      // Megatron's per-layer aux loss coefficient (0 without a load-balancing loss).
      j["router_aux_loss_coef"] =
          ShortestFloat(r.load_balancing_type == layers::moe::LoadBalancingType::kNone
                            ? 0.0f
                            : static_cast<float>(r.aux_loss_coeff));
      j["output_router_logits"] = false;
      if (mixtral) j["router_jitter_noise"] = 0.0;
    }
  }
  j["torch_dtype"] = torch_dtype;
  return nlohmann::json::parse(j.dump());  // (nlohmann::json sorts the keys)
}

absl::StatusOr<std::vector<std::string>> MegatronArgvFromHfConfig(const nlohmann::json& hf,
                                                                  int64_t seq_length,
                                                                  HfModelType* type) {
  if (!hf.is_object()) return absl::InvalidArgumentError("config.json is not a JSON object");
  const std::string model_type = hf.value("model_type", std::string());
  auto bad = [&](const std::string& field, const nlohmann::json& value,
                 const std::string& expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json ", field, " is ", value.dump(), "; expected ", expected));
  };
  auto integer = [&](const char* field) -> absl::StatusOr<int64_t> {
    if (!hf.contains(field)) {
      return absl::InvalidArgumentError(
          absl::StrCat("config.json has no ", field, " (", model_type, ")"));
    }
    if (!hf[field].is_number_integer() || hf[field].get<int64_t>() <= 0) {
      return bad(field, hf[field], "a positive integer");
    }
    return hf[field].get<int64_t>();
  };
  auto number = [&](const char* field, double fallback) -> absl::StatusOr<double> {
    if (!hf.contains(field) || hf[field].is_null()) return fallback;
    if (!hf[field].is_number()) return bad(field, hf[field], "a number");
    return hf[field].get<double>();
  };
  auto flag = [&](const char* field, bool fallback) -> absl::StatusOr<bool> {
    if (!hf.contains(field) || hf[field].is_null()) return fallback;
    if (!hf[field].is_boolean()) return bad(field, hf[field], "true or false");
    return hf[field].get<bool>();
  };
  auto num = [](double v) {  // the shortest decimal that reads back as v
    char buf[32];
    for (int precision = 1; precision <= 17; ++precision) {
      std::snprintf(buf, sizeof buf, "%.*g", precision, v);
      if (std::strtod(buf, nullptr) == v) break;
    }
    return std::string(buf);
  };
  std::vector<std::string> argv;
  int64_t max_pos = 0;
  int64_t vocab = 0;
  if (model_type == "gpt2") {
    *type = {HfArchitecture::kGpt2, "gpt2"};
    absl::StatusOr<int64_t> h = integer("n_embd"), l = integer("n_layer"), np = integer("n_head"),
                            pos = integer("n_positions"), v = integer("vocab_size");
    for (const auto* s : {&h, &l, &np, &pos, &v}) {
      if (!s->ok()) return s->status();
    }
    int64_t inner = 4 * *h;
    if (hf.contains("n_inner") && !hf["n_inner"].is_null()) {
      absl::StatusOr<int64_t> n = integer("n_inner");
      if (!n.ok()) return n.status();
      inner = *n;
    }
    const std::string act = hf.value("activation_function", std::string("gelu_new"));
    if (act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "gelu") {
      return bad("activation_function", hf["activation_function"],
                 "gelu_new, gelu_pytorch_tanh (tanh GELU) or gelu (erf GELU)");
    }
    absl::StatusOr<bool> tie = flag("tie_word_embeddings", true);
    if (!tie.ok()) return tie.status();
    if (!*tie) return bad("tie_word_embeddings", false, "true (GPT-2 ties its embeddings)");
    for (const char* f : {"scale_attn_by_inverse_layer_idx", "add_cross_attention"}) {
      absl::StatusOr<bool> b = flag(f, false);
      if (!b.ok()) return b.status();
      if (*b) return bad(f, true, "false (MXMACA's attention has no such option)");
    }
    absl::StatusOr<bool> scale = flag("scale_attn_weights", true);
    if (!scale.ok()) return scale.status();
    if (!*scale) return bad("scale_attn_weights", false, "true (softmax(q k^T / sqrt(hn)))");
    absl::StatusOr<double> eps = number("layer_norm_epsilon", 1e-5);
    if (!eps.ok()) return eps.status();
    argv = {"--num-layers",
            absl::StrCat(*l),
            "--hidden-size",
            absl::StrCat(*h),
            "--ffn-hidden-size",
            absl::StrCat(inner),
            "--num-attention-heads",
            absl::StrCat(*np),
            "--normalization",
            "LayerNorm",
            "--norm-epsilon",
            num(*eps),
            "--position-embedding-type",
            "learned_absolute"};
    if (act == "gelu") argv.push_back("--no-bias-gelu-fusion");
    max_pos = *pos;
    vocab = *v;
  } else if (model_type == "llama" || model_type == "mistral" || model_type == "mixtral" ||
             model_type == "qwen2" || model_type == "qwen3" || model_type == "qwen3_moe") {
    const bool mixtral = model_type == "mixtral", qwen3_moe = model_type == "qwen3_moe";
    const bool qwen2 = model_type == "qwen2", qwen3 = model_type == "qwen3" || qwen3_moe;
    *type = {mixtral     ? HfArchitecture::kMixtral
             : qwen3_moe ? HfArchitecture::kQwen3Moe
                         : HfArchitecture::kLlama,
             model_type};
    absl::StatusOr<int64_t> h = integer("hidden_size"), f = integer("intermediate_size"),
                            l = integer("num_hidden_layers"), np = integer("num_attention_heads"),
                            pos = integer("max_position_embeddings"), v = integer("vocab_size");
    for (const auto* s : {&h, &f, &l, &np, &pos, &v}) {
      if (!s->ok()) return s->status();
    }
    int64_t ng = *np;
    if (hf.contains("num_key_value_heads") && !hf["num_key_value_heads"].is_null()) {
      absl::StatusOr<int64_t> g = integer("num_key_value_heads");
      if (!g.ok()) return g.status();
      ng = *g;
    }
    if (*np % ng != 0) {
      return bad("num_key_value_heads", ng, absl::StrCat("a divisor of num_attention_heads ", *np));
    }
    int64_t head_dim = *h / *np;
    if (hf.contains("head_dim") && !hf["head_dim"].is_null()) {
      absl::StatusOr<int64_t> d = integer("head_dim");
      if (!d.ok()) return d.status();
      head_dim = *d;
    }
    const std::string act = hf.value("hidden_act", std::string("silu"));
    if (act != "silu") return bad("hidden_act", hf["hidden_act"], "silu (SwiGLU)");
    std::vector<std::string> rope_flags;
    if (hf.contains("rope_scaling") && !hf["rope_scaling"].is_null()) {
      const nlohmann::json& rs = hf["rope_scaling"];
      const bool scalable = model_type == "llama" || qwen2 || qwen3;  // (qwen3: and qwen3_moe)
      const std::string kind =
          rs.is_object() ? rs.value("rope_type", rs.value("type", std::string())) : "";
      auto field = [&](const char* name, double want) -> absl::Status {
        const nlohmann::json v = rs.contains(name) ? rs[name] : nlohmann::json();
        if (!v.is_number() || v.get<double>() != want) {
          return bad(absl::StrCat("rope_scaling.", name), v,
                     absl::StrCat(num(want), " (Megatron's --use-rope-scaling fixes it)"));
        }
        return absl::OkStatus();
      };
      const nlohmann::json factor =
          rs.is_object() && rs.contains("factor") ? rs["factor"] : nlohmann::json();
      if (!scalable || (kind != "llama3" && kind != "linear")) {
        return bad("rope_scaling", rs,
                   scalable ? "null, a llama3 rope_type (--use-rope-scaling) or linear "
                              "(--rotary-seq-len-interpolation-factor)"
                            : "null (MXMACA writes RoPE scaling for llama, qwen2, qwen3 and "
                              "qwen3_moe)");
      }
      if (!factor.is_number() || !(factor.get<double>() >= 1.0)) {
        return bad("rope_scaling.factor", factor, "a number >= 1");
      }
      if (kind == "llama3") {
        for (const auto& [name, want] : {std::pair<const char*, double>{"low_freq_factor", 1.0},
                                         {"high_freq_factor", 4.0},
                                         {"original_max_position_embeddings", 8192.0}}) {
          MXMACA_RETURN_IF_ERROR(field(name, want));
        }
        rope_flags = {"--use-rope-scaling", "--rope-scaling-factor", num(factor.get<double>())};
      } else {
        if (std::floor(factor.get<double>()) != factor.get<double>()) {
          return bad("rope_scaling.factor", factor,
                     "a whole number (Megatron's --rotary-seq-len-interpolation-factor is an int)");
        }
        rope_flags = {"--rotary-seq-len-interpolation-factor",
                      absl::StrCat(static_cast<int64_t>(factor.get<double>()))};
      }
    }
    if (qwen2 || qwen3) {
      // Qwen2Config / Qwen3Config keep a sliding_window size that applies only with
      // use_sliding_window.
      absl::StatusOr<bool> sliding = flag("use_sliding_window", false);
      if (!sliding.ok()) return sliding.status();
      if (*sliding) {
        return bad("use_sliding_window", true,
                   "false (MXMACA's attention is full causal attention)");
      }
    } else if (hf.contains("sliding_window") && !hf["sliding_window"].is_null()) {
      return bad("sliding_window", hf["sliding_window"],
                 "null (MXMACA's attention is full causal attention)");
    }
    // (MixtralConfig has no bias fields: its linears never have biases.)
    // (Qwen2Config has no bias fields: q/k/v always have biases, o and the MLP never.)
    absl::StatusOr<bool> attn_bias =
        mixtral || qwen2 ? absl::StatusOr<bool>(false) : flag("attention_bias", false);
    if (!attn_bias.ok()) return attn_bias.status();
    absl::StatusOr<bool> mlp_bias =
        mixtral || qwen2 || qwen3 ? absl::StatusOr<bool>(false) : flag("mlp_bias", false);
    if (!mlp_bias.ok()) return mlp_bias.status();
    if (qwen3 && *attn_bias) {
      return bad("attention_bias", true,
                 "false (Qwen3's biases on q, k, v and o without MLP biases have no Megatron "
                 "flag: --add-bias-linear adds them to the MLP too)");
    }
    if (*attn_bias != *mlp_bias) {
      return bad("attention_bias", *attn_bias,
                 absl::StrCat("the same as mlp_bias (", *mlp_bias ? "true" : "false",
                              "): Megatron's --add-bias-linear puts biases on every linear"));
    }
    absl::StatusOr<bool> tie = flag("tie_word_embeddings", false);
    if (!tie.ok()) return tie.status();
    absl::StatusOr<double> eps = number("rms_norm_eps", 1e-6);
    if (!eps.ok()) return eps.status();
    absl::StatusOr<double> theta = number("rope_theta", 10000.0);
    if (!theta.ok()) return theta.status();
    if (!(*theta >= 1 && *theta < 9e15 && std::floor(*theta) == *theta)) {
      return bad("rope_theta", *theta,
                 "a positive whole number (Megatron's --rotary-base is an int)");
    }
    argv = {"--num-layers",
            absl::StrCat(*l),
            "--hidden-size",
            absl::StrCat(*h),
            "--ffn-hidden-size",
            absl::StrCat(*f),
            "--num-attention-heads",
            absl::StrCat(*np),
            "--normalization",
            "RMSNorm",
            "--norm-epsilon",
            num(*eps),
            "--swiglu",
            "--position-embedding-type",
            "rope",
            "--rotary-base",
            absl::StrCat(static_cast<int64_t>(*theta))};
    if (ng != *np) {
      argv.insert(argv.end(), {"--group-query-attention", "--num-query-groups", absl::StrCat(ng)});
    }
    if (head_dim * *np != *h) argv.insert(argv.end(), {"--kv-channels", absl::StrCat(head_dim)});
    if (!*attn_bias) argv.push_back("--disable-bias-linear");
    argv.insert(argv.end(), rope_flags.begin(), rope_flags.end());
    if (qwen2) argv.push_back("--add-qkv-bias");
    if (qwen3) argv.push_back("--qk-layernorm");
    if (!*tie) argv.push_back("--untie-embeddings-and-output-weights");
    if (qwen3_moe) {
      // Qwen3MoeSparseMoeBlock on every layer (decoder_sparse_step 1, no mlp_only_layers):
      // softmax over the experts' logits, top-k, renormalised when norm_topk_prob (Megatron's
      // default router) or not (--moe-router-pre-softmax: softmax, then top-k), dropless,
      // SwiGLU experts of moe_intermediate_size, no shared expert; the load-balancing loss as
      // aux_loss. Qwen3MoeConfig's defaults where a field is absent.
      absl::StatusOr<int64_t> e = integer("num_experts"), k = integer("num_experts_per_tok"),
                              fe = integer("moe_intermediate_size");
      for (const auto* s : {&e, &k, &fe}) {
        if (!s->ok()) return s->status();
      }
      if (*k > *e) {
        return bad("num_experts_per_tok", *k, absl::StrCat("at most num_experts (", *e, ")"));
      }
      if (hf.contains("decoder_sparse_step") && hf["decoder_sparse_step"] != 1) {
        return bad("decoder_sparse_step", hf["decoder_sparse_step"],
                   "1 (a MoE block on every layer; MXMACA's --moe-layer-freq counts from layer "
                   "0, Qwen3-MoE's step from layer step - 1)");
      }
      if (hf.contains("mlp_only_layers") && !hf["mlp_only_layers"].is_null() &&
          !(hf["mlp_only_layers"].is_array() && hf["mlp_only_layers"].empty())) {
        return bad("mlp_only_layers", hf["mlp_only_layers"], "[] (a MoE block on every layer)");
      }
      absl::StatusOr<bool> norm_topk = flag("norm_topk_prob", false);  // Qwen3MoeConfig's
      if (!norm_topk.ok()) return norm_topk.status();
      absl::StatusOr<double> coef = number("router_aux_loss_coef", 0.001);
      if (!coef.ok()) return coef.status();
      if (!(*coef >= 0)) return bad("router_aux_loss_coef", *coef, "a number >= 0");
      argv.insert(
          argv.end(),
          {"--num-experts", absl::StrCat(*e), "--moe-router-topk", absl::StrCat(*k),
           "--moe-ffn-hidden-size", absl::StrCat(*fe), "--moe-router-score-function", "softmax",
           "--moe-router-load-balancing-type", "aux_loss", "--moe-aux-loss-coeff", num(*coef)});
      if (!*norm_topk) argv.push_back("--moe-router-pre-softmax");
    }
    if (mixtral) {
      // MixtralSparseMoeBlock on every layer: softmax over the experts' logits, top-k,
      // renormalised = Megatron's default router (top-k on the logits, softmax over the k;
      // not pre-softmax), dropless (no capacity factor), SwiGLU experts of
      // intermediate_size, no shared expert; the load-balancing loss as aux_loss.
      absl::StatusOr<int64_t> e = integer("num_local_experts"), k = integer("num_experts_per_tok");
      for (const auto* s : {&e, &k}) {
        if (!s->ok()) return s->status();
      }
      if (*k > *e) {
        return bad("num_experts_per_tok", *k, absl::StrCat("at most num_local_experts (", *e, ")"));
      }
      absl::StatusOr<double> coef = number("router_aux_loss_coef", 0.001);  // MixtralConfig's
      if (!coef.ok()) return coef.status();
      if (!(*coef >= 0)) return bad("router_aux_loss_coef", *coef, "a number >= 0");
      absl::StatusOr<double> jitter = number("router_jitter_noise", 0.0);
      if (!jitter.ok()) return jitter.status();
      if (*jitter != 0.0) {
        return bad("router_jitter_noise", *jitter,
                   "0 (MXMACA has no router input jitter, Megatron's --moe-input-jitter-eps)");
      }
      argv.insert(
          argv.end(),
          {"--num-experts", absl::StrCat(*e), "--moe-router-topk", absl::StrCat(*k),
           "--moe-ffn-hidden-size", absl::StrCat(*f), "--moe-router-score-function", "softmax",
           "--moe-router-load-balancing-type", "aux_loss", "--moe-aux-loss-coeff", num(*coef)});
    }
    max_pos = *pos;
    vocab = *v;
  } else {
    return bad("model_type", hf.value("model_type", nlohmann::json()),
               "gpt2, llama, mistral, qwen2, qwen3, mixtral or qwen3_moe");
  }
  if (vocab < 2) return bad("vocab_size", vocab, "at least 2");
  if (seq_length <= 0) seq_length = std::min<int64_t>(max_pos, 4096);
  argv.insert(argv.end(), {"--max-position-embeddings", absl::StrCat(max_pos), "--seq-length",
                           absl::StrCat(seq_length), "--tokenizer-type", "NullTokenizer",
                           "--vocab-size", absl::StrCat(vocab - 1), "--micro-batch-size", "1"});
  return argv;
}

}  // namespace mxmaca::api::convert
