// api/train/checkpoint_args.cc: see checkpoint_args.h.
#include "api/train/checkpoint_args.h"

#include "api/train/moe_setup.h"

#include "absl/strings/str_cat.h"

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

}  // namespace

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
  model["init_method_std"] = m.init_method_std;
  model["seed"] = m.seed;
  nlohmann::json j;
  j["argv"] = argv;
  j["model"] = model;
  j["tokenizer"] = {{"type", a.tokenizer_type.value_or("GPT2BPETokenizer")},
                    {"vocab_file", a.vocab_file.value_or("")},
                    {"merge_file", a.merge_file.value_or("")}};
  return j;
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
    if (parsed.ok() && parsed->num_experts && *parsed->num_experts > 0) {
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
      model.untie_embeddings_and_output_weights != stored->untie_embeddings_and_output_weights ||
      model.position_embedding_type != stored->position_embedding_type) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model's layout (--swiglu/--normalization/--disable-bias-linear/"
        "--untie-embeddings-and-output-weights/--position-embedding-type) differs from the "
        "checkpoint in ", dir));
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::api
