// api/convert/hf_config.cc: see hf_config.h.
#include "api/convert/hf_config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

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

}  // namespace

absl::StatusOr<HfModelType> ChooseHfModelType(const layers::GptConfig& c,
                                              const std::string& requested) {
  HfModelType t;
  if (requested == "auto") {
    const bool gpt2 = c.normalization == layers::Normalization::kLayerNorm &&
                      c.position_embedding_type == layers::PositionEmbeddingType::kLearnedAbsolute;
    t.architecture = gpt2 ? HfArchitecture::kGpt2 : HfArchitecture::kLlama;
    t.model_type = gpt2 ? "gpt2" : "llama";
  } else if (requested == "gpt2") {
    t = {HfArchitecture::kGpt2, "gpt2"};
  } else if (requested == "llama" || requested == "mistral") {
    t = {HfArchitecture::kLlama, requested};
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--model-type is ", requested, "; expected auto, gpt2, llama or mistral"));
  }
  const std::string& target = t.model_type;
  if (c.moe != nullptr) {
    return absl::UnimplementedError(
        "the checkpoint is a Mixture-of-Experts model (--num-experts): exporting MoE models "
        "(Hugging Face mixtral) is not implemented; gpt2, llama and mistral are dense");
  }
  if (c.apply_layernorm_1p)
    return Refuse("--apply-layernorm-1p is set", target, "plain norm weights");
  if (c.qk_layernorm) return Refuse("--qk-layernorm is set", target, "no q/k norms");
  if (c.rotary_interleaved) {
    return Refuse("--rotary-interleaved is set (RoPE on adjacent pairs)", target,
                  "RoPE rotating the two halves of each head");
  }
  if (c.rope_scaling)
    return Refuse("--use-rope-scaling is set", target, "rope_scaling null (not written yet)");
  if (c.rotary_seq_len_interpolation_factor > 0) {
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
  } else {
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
    if (!c.add_bias_linear && c.add_qkv_bias) {
      return Refuse(
          "--add-qkv-bias is set without --add-bias-linear (Qwen2's layout)", target,
          "biases on all of q, k, v, o and the MLP (attention_bias and mlp_bias) or none");
    }
  }
  return t;
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
    j["architectures"] = {t.model_type == "mistral" ? "MistralForCausalLM" : "LlamaForCausalLM"};
    j["model_type"] = t.model_type;
    j["vocab_size"] = c.vocab_size;
    j["hidden_size"] = c.hidden_size;
    j["intermediate_size"] = c.ffn_hidden_size;
    j["num_hidden_layers"] = c.num_layers;
    j["num_attention_heads"] = c.num_attention_heads;
    j["num_key_value_heads"] = c.query_groups();
    j["head_dim"] = c.head_dim();
    j["hidden_act"] = "silu";
    j["max_position_embeddings"] = c.max_position_embeddings;
    j["rms_norm_eps"] = ShortestFloat(c.norm_epsilon);
    j["rope_theta"] = ShortestFloat(c.rotary_base);
    j["rope_scaling"] = nullptr;
    j["attention_bias"] = c.add_bias_linear;
    j["mlp_bias"] = c.add_bias_linear;
    j["attention_dropout"] = ShortestFloat(c.attention_dropout);
    j["initializer_range"] = ShortestFloat(c.init_method_std);
    j["tie_word_embeddings"] = c.tied_embeddings();
    if (t.model_type == "mistral") j["sliding_window"] = nullptr;
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
  } else if (model_type == "llama" || model_type == "mistral") {
    *type = {HfArchitecture::kLlama, model_type};
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
    if (hf.contains("rope_scaling") && !hf["rope_scaling"].is_null()) {
      return bad("rope_scaling", hf["rope_scaling"], "null (RoPE scaling is not converted yet)");
    }
    if (hf.contains("sliding_window") && !hf["sliding_window"].is_null()) {
      return bad("sliding_window", hf["sliding_window"],
                 "null (MXMACA's attention is full causal attention)");
    }
    absl::StatusOr<bool> attn_bias = flag("attention_bias", false);
    if (!attn_bias.ok()) return attn_bias.status();
    absl::StatusOr<bool> mlp_bias = flag("mlp_bias", false);
    if (!mlp_bias.ok()) return mlp_bias.status();
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
    if (!*tie) argv.push_back("--untie-embeddings-and-output-weights");
    max_pos = *pos;
    vocab = *v;
  } else if (model_type == "mixtral") {
    return absl::UnimplementedError(
        "config.json model_type is \"mixtral\": importing MoE models is not implemented; "
        "expected gpt2, llama or mistral");
  } else {
    return bad("model_type", hf.value("model_type", nlohmann::json()), "gpt2, llama or mistral");
  }
  if (vocab < 2) return bad("vocab_size", vocab, "at least 2");
  if (seq_length <= 0) seq_length = std::min<int64_t>(max_pos, 4096);
  argv.insert(argv.end(), {"--max-position-embeddings", absl::StrCat(max_pos), "--seq-length",
                           absl::StrCat(seq_length), "--tokenizer-type", "NullTokenizer",
                           "--vocab-size", absl::StrCat(vocab - 1), "--micro-batch-size", "1"});
  return argv;
}

}  // namespace mxmaca::api::convert
