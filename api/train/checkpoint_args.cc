// api/train/checkpoint_args.cc: see checkpoint_args.h.
#include "api/train/checkpoint_args.h"

#include "api/train/moe_setup.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mxmaca::api {
namespace {

const char* PositionName(layers::PositionEmbeddingType t) {
  switch (t) {
    case layers::PositionEmbeddingType::kLearnedAbsolute: return "learned_absolute";
    case layers::PositionEmbeddingType::kRope: return "rope";
    case layers::PositionEmbeddingType::kNone: return "none";
  }
  return "none";
}

// The shape fields, with their flag names: a mismatch in any makes the weights unusable.
struct ShapeField {
  const char* key;
  const char* flag;
  int64_t layers::GptConfig::*member;
};
constexpr ShapeField kShapeFields[] = {
    {"num_layers", "--num-layers", &layers::GptConfig::num_layers},
    {"hidden_size", "--hidden-size", &layers::GptConfig::hidden_size},
    {"ffn_hidden_size", "--ffn-hidden-size", &layers::GptConfig::ffn_hidden_size},
    {"num_attention_heads", "--num-attention-heads", &layers::GptConfig::num_attention_heads},
    {"num_query_groups", "--num-query-groups", &layers::GptConfig::num_query_groups},
    {"kv_channels", "--kv-channels", &layers::GptConfig::kv_channels},
    {"max_position_embeddings", "--max-position-embeddings",
     &layers::GptConfig::max_position_embeddings},
    {"vocab_size", "the tokenizer's vocabulary size", &layers::GptConfig::vocab_size},
    {"padded_vocab_size", "the padded vocabulary size", &layers::GptConfig::padded_vocab_size},
};

// The arguments --use-checkpoint-args reads: (dest, force) in load_args_from_checkpoint's
// order. force = false: only where the command line left the argument None.
#define MXMACA_CHECKPOINT_ARGS(X)                                                          \
  X(num_layers, false) X(hidden_size, false) X(ffn_hidden_size, false)                     \
  X(seq_length, false) X(num_attention_heads, false) X(num_query_groups, true)             \
  X(group_query_attention, true) X(kv_channels, false) X(max_position_embeddings, false)   \
  X(position_embedding_type, true) X(add_position_embedding, true)                         \
  X(use_rotary_position_embeddings, true) X(rotary_base, true) X(rotary_percent, true)     \
  X(rotary_interleaved, true) X(add_bias_linear, true) X(add_qkv_bias, true)               \
  X(swiglu, true) X(untie_embeddings_and_output_weights, true)                             \
  X(apply_layernorm_1p, true) X(normalization, true)                                       \
  X(apply_query_key_layer_scaling, true) X(attention_dropout, true)                        \
  X(hidden_dropout, true) X(num_experts, true) X(moe_layer_freq, true)                     \
  X(moe_ffn_hidden_size, true) X(moe_router_topk, true) X(moe_router_pre_softmax, true)    \
  X(moe_shared_expert_intermediate_size, true) X(moe_router_score_function, true)          \
  X(moe_router_enable_expert_bias, true) X(moe_router_topk_scaling_factor, true)

template <typename T>
nlohmann::json ToJson(const T& v) {
  return nlohmann::json(v);
}
template <typename T>
nlohmann::json ToJson(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}
template <typename T>
bool IsSet(const T&) {
  return true;  // a plain field is never None
}
template <typename T>
bool IsSet(const std::optional<T>& v) {
  return v.has_value();
}
template <typename T>
void AssignFrom(const nlohmann::json& j, T* out) {
  *out = j.get<T>();
}
template <typename T>
void AssignFrom(const nlohmann::json& j, std::optional<T>* out) {
  *out = j.get<T>();
}
template <typename T>
std::string Show(const T& v) {
  return ToJson(v).dump();
}

nlohmann::json MegatronArgsJson(const MegatronArgs& a) {
  nlohmann::json j = nlohmann::json::object();
#define MXMACA_TO_JSON(field, force) j[#field] = ToJson(a.field);
  MXMACA_CHECKPOINT_ARGS(MXMACA_TO_JSON)
#undef MXMACA_TO_JSON
  j["tokenizer_type"] = ToJson(a.tokenizer_type);
  j["tokenizer_model"] = ToJson(a.tokenizer_model);
  j["tiktoken_pattern"] = ToJson(a.tiktoken_pattern);
  return j;
}

// StoredMegatronArgs: the checkpoint's "megatron_args", or for an older checkpoint the
// same object from its argv (parsed) and model object (derived shapes).
absl::StatusOr<nlohmann::json> StoredMegatronArgs(const nlohmann::json& args) {
  if (args.contains("megatron_args") && args["megatron_args"].is_object()) {
    return args["megatron_args"];
  }
  if (!args.contains("argv") || !args["argv"].is_array()) {
    return absl::DataLossError("checkpoint args have neither \"megatron_args\" nor \"argv\"");
  }
  std::vector<std::string> argv;
  for (const nlohmann::json& x : args["argv"]) {
    if (x.is_string()) argv.push_back(x.get<std::string>());
  }
  absl::StatusOr<MegatronArgs> parsed = ParseMegatronArgs(argv);
  if (!parsed.ok()) {
    return absl::DataLossError(
        absl::StrCat("checkpoint args: the stored command line: ", parsed.status().message()));
  }
  nlohmann::json j = MegatronArgsJson(*parsed);
  if (args.contains("model") && args["model"].is_object()) {
    for (const char* key : {"num_layers", "hidden_size", "ffn_hidden_size", "seq_length",
                            "num_attention_heads", "kv_channels", "max_position_embeddings"}) {
      if (args["model"].contains(key)) j[key] = args["model"][key];
    }
  }
  if (args.contains("tokenizer") && args["tokenizer"].contains("type")) {
    j["tokenizer_type"] = args["tokenizer"]["type"];
  }
  return j;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ApplyCheckpointArgs(const nlohmann::json& ckpt_args,
                                                             MegatronArgs* a) {
  MXMACA_ASSIGN_OR_RETURN(const nlohmann::json stored, StoredMegatronArgs(ckpt_args));
  std::vector<std::string> log;
  const std::string* failed = nullptr;
  std::string failed_name;
  auto set = [&](const char* name, bool force, auto* field) {
    if (!force && IsSet(*field)) return;
    if (!stored.contains(name) || stored[name].is_null()) {
      log.push_back(absl::StrCat("Checkpoint did not provide arguments ", name));
      return;
    }
    try {
      AssignFrom(stored[name], field);
    } catch (const nlohmann::json::exception&) {
      failed_name = name;
      failed = &failed_name;
      return;
    }
    log.push_back(absl::StrCat("Setting ", name, " to ", Show(*field), " from checkpoint"));
  };
#define MXMACA_SET(field, force) \
  if (failed == nullptr) set(#field, force, &a->field);
  MXMACA_CHECKPOINT_ARGS(MXMACA_SET)
#undef MXMACA_SET
  if (failed == nullptr && a->use_tokenizer_model_from_checkpoint_args) {
    set("tokenizer_model", true, &a->tokenizer_model);
    if (failed == nullptr) set("tokenizer_type", true, &a->tokenizer_type);
  }
  if (failed == nullptr) set("tiktoken_pattern", true, &a->tiktoken_pattern);
  if (failed != nullptr) {
    return absl::DataLossError(absl::StrCat("checkpoint args: megatron_args.", *failed,
                                            " has the wrong type: ", stored[*failed].dump()));
  }
  return log;
}

nlohmann::json CheckpointArgsJson(const std::vector<std::string>& argv, const MegatronArgs& a,
                                  const layers::GptConfig& m) {
  nlohmann::json model;
  for (const ShapeField& f : kShapeFields) model[f.key] = m.*(f.member);
  model["seq_length"] = m.seq_length;
  model["position_embedding_type"] = PositionName(m.position_embedding_type);
  model["rotary_base"] = m.rotary_base;
  model["rotary_percent"] = m.rotary_percent;
  model["rope_scaling"] = m.rope_scaling;
  model["rope_scaling_factor"] = m.rope_scaling_factor;
  model["rotary_seq_len_interpolation_factor"] = m.rotary_seq_len_interpolation_factor;
  model["normalization"] = m.normalization == layers::Normalization::kRmsNorm ? "RMSNorm" : "LayerNorm";
  model["norm_epsilon"] = m.norm_epsilon;
  model["swiglu"] = m.swiglu;
  model["gelu_tanh_approximation"] = m.gelu_tanh_approximation;
  model["untie_embeddings_and_output_weights"] = m.untie_embeddings_and_output_weights;
  model["add_bias_linear"] = m.add_bias_linear;
  model["add_qkv_bias"] = m.add_qkv_bias;
  model["apply_layernorm_1p"] = m.apply_layernorm_1p;
  model["rotary_interleaved"] = m.rotary_interleaved;
  model["qk_layernorm"] = m.qk_layernorm;
  model["init_method_std"] = m.init_method_std;
  model["seed"] = m.seed;
  nlohmann::json j;
  j["argv"] = argv;
  j["model"] = model;
  j["megatron_args"] = MegatronArgsJson(a);
  j["tokenizer"] = {{"type", a.tokenizer_type.value_or("GPT2BPETokenizer")},
                    {"vocab_file", a.vocab_file.value_or("")},
                    {"merge_file", a.merge_file.value_or("")},
                    {"tokenizer_model", a.tokenizer_model.value_or("")},
                    {"vocab_size", a.vocab_size ? nlohmann::json(*a.vocab_size) : nlohmann::json()},
                    {"vocab_extra_ids", a.vocab_extra_ids},
                    {"tiktoken_pattern", a.tiktoken_pattern.value_or("")},
                    {"tiktoken_num_special_tokens", a.tiktoken_num_special_tokens},
                    {"tiktoken_special_tokens", a.tiktoken_special_tokens},
                    {"legacy_tokenizer", a.legacy_tokenizer}};
  return j;
}

data::TokenizerSpec TokenizerSpecFromArgs(const MegatronArgs& a) {
  data::TokenizerSpec spec;
  spec.tokenizer_type = a.tokenizer_type.value_or("GPT2BPETokenizer");
  spec.vocab_file = a.vocab_file;
  spec.merge_file = a.merge_file;
  spec.tokenizer_model = a.tokenizer_model;
  spec.vocab_size = a.vocab_size;
  spec.vocab_extra_ids = a.vocab_extra_ids;
  spec.tiktoken_pattern = a.tiktoken_pattern;
  spec.tiktoken_num_special_tokens = a.tiktoken_num_special_tokens;
  spec.tiktoken_special_tokens = a.tiktoken_special_tokens;
  spec.legacy_tokenizer = a.legacy_tokenizer;
  return spec;
}

absl::StatusOr<data::TokenizerSpec> TokenizerSpecFromCheckpointArgs(const nlohmann::json& args) {
  if (!args.is_object() || !args.contains("tokenizer") || !args["tokenizer"].is_object()) {
    return absl::DataLossError("checkpoint args have no \"tokenizer\" object");
  }
  const nlohmann::json& t = args["tokenizer"];
  data::TokenizerSpec spec;
  try {
    auto text = [&](const char* key) -> std::optional<std::string> {
      if (!t.contains(key) || t[key].is_null()) return std::nullopt;
      std::string v = t[key].get<std::string>();
      if (v.empty()) return std::nullopt;
      return v;
    };
    spec.tokenizer_type = text("type").value_or("GPT2BPETokenizer");
    spec.vocab_file = text("vocab_file");
    spec.merge_file = text("merge_file");
    spec.tokenizer_model = text("tokenizer_model");
    spec.tiktoken_pattern = text("tiktoken_pattern");
    if (t.contains("vocab_size") && !t["vocab_size"].is_null())
      spec.vocab_size = t["vocab_size"].get<int64_t>();
    if (t.contains("vocab_extra_ids")) spec.vocab_extra_ids = t["vocab_extra_ids"].get<int64_t>();
    if (t.contains("tiktoken_num_special_tokens"))
      spec.tiktoken_num_special_tokens = t["tiktoken_num_special_tokens"].get<int64_t>();
    if (t.contains("tiktoken_special_tokens"))
      spec.tiktoken_special_tokens = t["tiktoken_special_tokens"].get<std::vector<std::string>>();
    if (t.contains("legacy_tokenizer")) spec.legacy_tokenizer = t["legacy_tokenizer"].get<bool>();
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat("checkpoint args: \"tokenizer\" is mistyped: ",
                                            t.dump()));
  }
  return spec;
}

absl::StatusOr<layers::GptConfig> ModelConfigFromCheckpointArgs(const nlohmann::json& args) {
  if (!args.is_object() || !args.contains("model") || !args["model"].is_object()) {
    return absl::DataLossError("checkpoint args have no \"model\" object");
  }
  const nlohmann::json& m = args["model"];
  layers::GptConfig c;
  try {
    for (const ShapeField& f : kShapeFields) c.*(f.member) = m.at(f.key).get<int64_t>();
    c.seq_length = m.at("seq_length").get<int64_t>();
    auto pos = layers::ParsePositionEmbeddingType(m.at("position_embedding_type").get<std::string>());
    if (!pos.ok()) return absl::DataLossError(std::string(pos.status().message()));
    c.position_embedding_type = *pos;
    c.rotary_base = m.at("rotary_base").get<float>();
    c.rotary_percent = m.at("rotary_percent").get<float>();
    // Absent in checkpoints written before these flags: plain RoPE.
    c.rope_scaling = m.value("rope_scaling", false);
    c.rope_scaling_factor = m.value("rope_scaling_factor", 8.0f);
    c.rotary_seq_len_interpolation_factor = m.value("rotary_seq_len_interpolation_factor", 0.0f);
    auto norm = layers::ParseNormalization(m.at("normalization").get<std::string>());
    if (!norm.ok()) return absl::DataLossError(std::string(norm.status().message()));
    c.normalization = *norm;
    c.norm_epsilon = m.at("norm_epsilon").get<float>();
    c.swiglu = m.at("swiglu").get<bool>();
    c.gelu_tanh_approximation = m.at("gelu_tanh_approximation").get<bool>();
    c.untie_embeddings_and_output_weights = m.at("untie_embeddings_and_output_weights").get<bool>();
    c.add_bias_linear = m.at("add_bias_linear").get<bool>();
    // Absent in checkpoints written before --add-qkv-bias: Megatron's rule (with the biases).
    c.add_qkv_bias = m.value("add_qkv_bias", c.add_bias_linear);
    c.apply_layernorm_1p = m.value("apply_layernorm_1p", false);
    c.rotary_interleaved = m.value("rotary_interleaved", false);
    c.qk_layernorm = m.value("qk_layernorm", false);
    c.init_method_std = m.at("init_method_std").get<float>();
    c.seed = m.at("seed").get<uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat("checkpoint args: ", e.what()));
  }
  c.hidden_dropout = 0.0f;
  c.attention_dropout = 0.0f;
  // MoE: the router and experts come from the stored command line (moe_setup.h).
  if (args.contains("argv") && args["argv"].is_array()) {
    std::vector<std::string> argv;
    for (const nlohmann::json& a : args["argv"]) {
      if (a.is_string()) argv.push_back(a.get<std::string>());
    }
    absl::StatusOr<MegatronArgs> parsed = ParseMegatronArgs(argv);
    // The effective MoE arguments (a run with --use-checkpoint-args may not spell them).
    if (parsed.ok() && args.contains("megatron_args")) {
      MegatronArgs overlay = *parsed;
      absl::StatusOr<std::vector<std::string>> applied = ApplyCheckpointArgs(args, &overlay);
      if (applied.ok()) {
        parsed->num_experts = overlay.num_experts;
        parsed->moe_layer_freq = overlay.moe_layer_freq;
        parsed->moe_ffn_hidden_size = overlay.moe_ffn_hidden_size;
        parsed->moe_router_topk = overlay.moe_router_topk;
        parsed->moe_router_pre_softmax = overlay.moe_router_pre_softmax;
        parsed->moe_shared_expert_intermediate_size = overlay.moe_shared_expert_intermediate_size;
        parsed->moe_router_score_function = overlay.moe_router_score_function;
        parsed->moe_router_enable_expert_bias = overlay.moe_router_enable_expert_bias;
        parsed->moe_router_topk_scaling_factor = overlay.moe_router_topk_scaling_factor;
      }
    }
    if (parsed.ok() && parsed->num_experts && *parsed->num_experts > 0) {
      // The stored model is layout-free (experts as whole logical tensors): the run's
      // expert-parallel layout is not re-validated here — its world size may have come
      // from the launcher's environment, which the stored argv does not hold.
      parsed->expert_model_parallel_size = 1;
      parsed->expert_tensor_parallel_size.reset();
      absl::Status moe = AddMoEConfig(*parsed, &c);
      if (!moe.ok()) {
        return absl::DataLossError(absl::StrCat("checkpoint args: MoE flags: ", moe.message()));
      }
    }
  }
  return c;
}

absl::Status CheckModelMatchesCheckpoint(const layers::GptConfig& model,
                                         const nlohmann::json& args, const std::string& dir) {
  absl::StatusOr<layers::GptConfig> stored = ModelConfigFromCheckpointArgs(args);
  if (!stored.ok()) return stored.status();
  for (const ShapeField& f : kShapeFields) {
    // The padded vocabulary is a property of the layout (TP size and
    // --make-vocab-size-divisible-by), not of the model: checkpoints hold the logical
    // vocabulary rows and loading re-pads them (actors/stage_checkpoint.h).
    if (f.member == &layers::GptConfig::padded_vocab_size) continue;
    if (model.*(f.member) != (*stored).*(f.member)) {
      return absl::InvalidArgumentError(absl::StrCat(
          f.flag, " is ", model.*(f.member), " but the checkpoint in ", dir,
          " was trained with ", (*stored).*(f.member)));
    }
  }
  if (model.swiglu != stored->swiglu || model.normalization != stored->normalization ||
      model.add_bias_linear != stored->add_bias_linear ||
      model.qkv_has_bias() != stored->qkv_has_bias() ||
      model.apply_layernorm_1p != stored->apply_layernorm_1p ||
      model.rotary_interleaved != stored->rotary_interleaved ||
      model.qk_layernorm != stored->qk_layernorm ||
      model.untie_embeddings_and_output_weights != stored->untie_embeddings_and_output_weights ||
      model.position_embedding_type != stored->position_embedding_type) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model's layout (--swiglu/--normalization/--disable-bias-linear/--add-qkv-bias/"
        "--apply-layernorm-1p/--rotary-interleaved/--qk-layernorm/"
        "--untie-embeddings-and-output-weights/--position-embedding-type) differs from the "
        "checkpoint in ", dir));
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::api
