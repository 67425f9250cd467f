// layers/gpt_parameters.cc
#include "layers/gpt_parameters.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mxmaca::layers {

std::string LayerParameterName(int64_t layer, const std::string& suffix) {
  return absl::StrCat("decoder.layers.", layer, ".", suffix);
}

namespace {

ParameterSpec Weight(std::string name, std::vector<int64_t> shape, float std) {
  return {std::move(name), std::move(shape), ParameterInit::kNormal, std, true, false};
}
ParameterSpec Bias(std::string name, int64_t n) {
  return {std::move(name), {n}, ParameterInit::kZeros, 0.0f, false, false};
}
ParameterSpec NormWeight(std::string name, int64_t n) {
  return {std::move(name), {n}, ParameterInit::kOnes, 0.0f, false, false};
}

}  // namespace

absl::StatusOr<GptParameterIds> RegisterGptParameters(const GptConfig& config,
                                                      const StageLayout& layout,
                                                      ParameterStore* store) {
  MXMACA_RETURN_IF_ERROR(config.Validate());
  if (layout.first_layer < 0 || layout.first_layer > layout.last_layer ||
      layout.last_layer > config.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage layout: layers [", layout.first_layer, ", ", layout.last_layer,
                     ") is not a range inside [0, ", config.num_layers, ")"));
  }
  const int64_t h = config.hidden_size;
  const float std = config.init_method_std;
  const float out_std =
      static_cast<float>(std / std::sqrt(2.0 * static_cast<double>(config.num_layers)));
  const bool layer_norm = config.normalization == Normalization::kLayerNorm;
  const bool bias = config.add_bias_linear;
  GptParameterIds ids;

  if (layout.has_embedding) {
    ParameterSpec word =
        Weight("embedding.word_embeddings.weight", {config.padded_vocab_size, h}, std);
    word.tied = config.tied_embeddings();
    MXMACA_ASSIGN_OR_RETURN(ids.word_embeddings, store->Register(word));
    if (config.position_embedding_type == PositionEmbeddingType::kLearnedAbsolute) {
      MXMACA_ASSIGN_OR_RETURN(ids.position_embeddings,
                              store->Register(Weight("embedding.position_embeddings.weight",
                                                     {config.max_position_embeddings, h}, std)));
    }
  }
  for (int64_t l = layout.first_layer; l < layout.last_layer; ++l) {
    LayerParameterIds p;
    auto name = [l](const char* suffix) { return LayerParameterName(l, suffix); };
    MXMACA_ASSIGN_OR_RETURN(p.input_norm_weight,
                            store->Register(NormWeight(name("input_layernorm.weight"), h)));
    if (layer_norm) {
      MXMACA_ASSIGN_OR_RETURN(p.input_norm_bias,
                              store->Register(Bias(name("input_layernorm.bias"), h)));
    }
    MXMACA_ASSIGN_OR_RETURN(p.qkv_weight,
                            store->Register(Weight(name("self_attention.linear_qkv.weight"),
                                                   {config.qkv_size(), h}, std)));
    if (bias) {
      MXMACA_ASSIGN_OR_RETURN(
          p.qkv_bias,
          store->Register(Bias(name("self_attention.linear_qkv.bias"), config.qkv_size())));
    }
    MXMACA_ASSIGN_OR_RETURN(
        p.proj_weight, store->Register(Weight(name("self_attention.linear_proj.weight"),
                                              {h, config.attention_projection_size()}, out_std)));
    if (bias) {
      MXMACA_ASSIGN_OR_RETURN(p.proj_bias,
                              store->Register(Bias(name("self_attention.linear_proj.bias"), h)));
    }
    MXMACA_ASSIGN_OR_RETURN(p.mlp_norm_weight,
                            store->Register(NormWeight(name("pre_mlp_layernorm.weight"), h)));
    if (layer_norm) {
      MXMACA_ASSIGN_OR_RETURN(p.mlp_norm_bias,
                              store->Register(Bias(name("pre_mlp_layernorm.bias"), h)));
    }
    MXMACA_ASSIGN_OR_RETURN(p.fc1_weight, store->Register(Weight(name("mlp.linear_fc1.weight"),
                                                                 {config.fc1_size(), h}, std)));
    if (bias) {
      MXMACA_ASSIGN_OR_RETURN(
          p.fc1_bias, store->Register(Bias(name("mlp.linear_fc1.bias"), config.fc1_size())));
    }
    MXMACA_ASSIGN_OR_RETURN(p.fc2_weight,
                            store->Register(Weight(name("mlp.linear_fc2.weight"),
                                                   {h, config.ffn_hidden_size}, out_std)));
    if (bias) {
      MXMACA_ASSIGN_OR_RETURN(p.fc2_bias, store->Register(Bias(name("mlp.linear_fc2.bias"), h)));
    }
    ids.layers.push_back(p);
  }
  if (layout.has_loss_head) {
    MXMACA_ASSIGN_OR_RETURN(ids.final_norm_weight,
                            store->Register(NormWeight("decoder.final_layernorm.weight", h)));
    if (layer_norm) {
      MXMACA_ASSIGN_OR_RETURN(ids.final_norm_bias,
                              store->Register(Bias("decoder.final_layernorm.bias", h)));
    }
    if (config.tied_embeddings()) {
      if (ids.word_embeddings < 0) {
        ParameterSpec word =
            Weight("embedding.word_embeddings.weight", {config.padded_vocab_size, h}, std);
        word.tied = true;
        MXMACA_ASSIGN_OR_RETURN(ids.word_embeddings, store->Register(word));
      }
      ids.output_weight = ids.word_embeddings;
    } else {
      MXMACA_ASSIGN_OR_RETURN(
          ids.output_weight,
          store->Register(Weight("output_layer.weight", {config.padded_vocab_size, h}, std)));
    }
  }
  return ids;
}

}  // namespace mxmaca::layers
