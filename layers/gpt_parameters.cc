// layers/gpt_parameters.cc
#include "layers/gpt_parameters.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "layers/moe/moe_layer.h"

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
// NormWeight: 1, or 0 with --apply-layernorm-1p (the weight stores gamma - 1;
// Megatron-Core FusedLayerNorm.reset_parameters / TE's zero_centered_gamma init).
ParameterSpec NormWeight(std::string name, int64_t n, bool zero_centered) {
  return {std::move(name), {n}, zero_centered ? ParameterInit::kZeros : ParameterInit::kOnes,
          0.0f, false, false};
}

// VocabWeight: a [V_pad, h] tensor whose rows are the vocabulary (word embeddings, output
// layer): rows past the true vocabulary are padding (ParameterSpec::vocab_rows).
ParameterSpec VocabWeight(std::string name, const GptConfig& config, float std) {
  ParameterSpec spec = Weight(std::move(name), {config.padded_vocab_size, config.hidden_size}, std);
  spec.vocab_rows = config.vocab_size;
  spec.save_padding_rows = config.softmax_over_padded_vocab;
  return spec;
}

// Split: how a tensor is divided over the TP ranks (tensor_parallel.h).
enum class Split { kReplicated, kRows, kColumns, kGateUpRows };

// RegisterSplit: registers TP rank `r` of `p`'s shard of `spec`. kRows: dim 0 split
// (column-parallel weights and biases, vocab rows); kColumns: dim 1 split (row-parallel
// weights); kGateUpRows: dim 0 = [gate; up], the same rows of each (shard_chunks 2).
absl::StatusOr<int> RegisterSplit(ParameterStore* store, const ParameterSpec& spec, Split split,
                                  int r, int p) {
  if (p == 1 || split == Split::kReplicated) return store->Register(spec);
  std::vector<int64_t> offset(spec.shape.size(), 0), shape = spec.shape;
  int64_t chunks = 1;
  switch (split) {
    case Split::kReplicated:
      break;
    case Split::kRows:
      shape[0] = spec.shape[0] / p;
      offset[0] = r * shape[0];
      break;
    case Split::kColumns:
      shape[1] = spec.shape[1] / p;
      offset[1] = r * shape[1];
      break;
    case Split::kGateUpRows:
      chunks = 2;
      shape[0] = spec.shape[0] / p;  // f/p rows of gate and f/p of up
      offset[0] = r * (spec.shape[0] / 2 / p);
      break;
  }
  return store->RegisterShard(spec, offset, shape, chunks);
}

}  // namespace

absl::StatusOr<GptParameterIds> RegisterGptParameters(const GptConfig& config,
                                                      const StageLayout& layout,
                                                      ParameterStore* store, int tp_rank,
                                                      int tp_size) {
  MXMACA_RETURN_IF_ERROR(config.Validate());
  if (tp_size < 1 || tp_rank < 0 || tp_rank >= tp_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor parallel rank ", tp_rank, " of ", tp_size, " is out of range"));
  }
  for (const auto& [what, v] :
       {std::pair<const char*, int64_t>{"--num-attention-heads", config.num_attention_heads},
        {"--num-query-groups (query groups)", config.query_groups()},
        {"--ffn-hidden-size", config.ffn_hidden_size},
        {"padded vocabulary size", config.padded_vocab_size}}) {
    if (v % tp_size != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " ", v, " is not divisible by --tensor-model-parallel-size ", tp_size));
    }
  }
  const int r = tp_rank, p = tp_size;
  const Split fc1_split = config.swiglu ? Split::kGateUpRows : Split::kRows;
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
    ParameterSpec word = VocabWeight("embedding.word_embeddings.weight", config, std);
    word.tied = config.tied_embeddings();
    MXMACA_ASSIGN_OR_RETURN(ids.word_embeddings, RegisterSplit(store, word, Split::kRows, r, p));
    if (config.position_embedding_type == PositionEmbeddingType::kLearnedAbsolute) {
      MXMACA_ASSIGN_OR_RETURN(ids.position_embeddings,
                              store->Register(Weight("embedding.position_embeddings.weight",
                                                     {config.max_position_embeddings, h}, std)));
    }
  }
  for (int64_t l = layout.first_layer; l < layout.last_layer; ++l) {
    LayerParameterIds ids_l;
    auto name = [l](const char* suffix) { return LayerParameterName(l, suffix); };
    MXMACA_ASSIGN_OR_RETURN(ids_l.input_norm_weight,
                            store->Register(NormWeight(name("input_layernorm.weight"), h, config.apply_layernorm_1p)));
    if (layer_norm) {
      MXMACA_ASSIGN_OR_RETURN(ids_l.input_norm_bias,
                              store->Register(Bias(name("input_layernorm.bias"), h)));
    }
    MXMACA_ASSIGN_OR_RETURN(
        ids_l.qkv_weight,
        RegisterSplit(store,
                      Weight(name("self_attention.linear_qkv.weight"), {config.qkv_size(), h}, std),
                      Split::kRows, r, p));
    if (config.qkv_has_bias()) {
      MXMACA_ASSIGN_OR_RETURN(
          ids_l.qkv_bias,
          RegisterSplit(store, Bias(name("self_attention.linear_qkv.bias"), config.qkv_size()),
                        Split::kRows, r, p));
    }
    if (config.qk_layernorm) {
      // Megatron-Core SelfAttention: q_layernorm / k_layernorm over hidden_size_per_head,
      // replicated on every TP rank (their gradients are summed over TP).
      const int64_t hn = config.head_dim();
      MXMACA_ASSIGN_OR_RETURN(ids_l.q_norm_weight,
                              store->Register(NormWeight(name("self_attention.q_layernorm.weight"),
                                                         hn, config.apply_layernorm_1p)));
      if (layer_norm) {
        MXMACA_ASSIGN_OR_RETURN(ids_l.q_norm_bias,
                                store->Register(Bias(name("self_attention.q_layernorm.bias"), hn)));
      }
      MXMACA_ASSIGN_OR_RETURN(ids_l.k_norm_weight,
                              store->Register(NormWeight(name("self_attention.k_layernorm.weight"),
                                                         hn, config.apply_layernorm_1p)));
      if (layer_norm) {
        MXMACA_ASSIGN_OR_RETURN(ids_l.k_norm_bias,
                                store->Register(Bias(name("self_attention.k_layernorm.bias"), hn)));
      }
    }
    MXMACA_ASSIGN_OR_RETURN(ids_l.proj_weight,
                            RegisterSplit(store,
                                          Weight(name("self_attention.linear_proj.weight"),
                                                 {h, config.attention_projection_size()}, out_std),
                                          Split::kColumns, r, p));
    if (bias) {
      MXMACA_ASSIGN_OR_RETURN(ids_l.proj_bias,
                              store->Register(Bias(name("self_attention.linear_proj.bias"), h)));
    }
    MXMACA_ASSIGN_OR_RETURN(ids_l.mlp_norm_weight,
                            store->Register(NormWeight(name("pre_mlp_layernorm.weight"), h, config.apply_layernorm_1p)));
    if (layer_norm) {
      MXMACA_ASSIGN_OR_RETURN(ids_l.mlp_norm_bias,
                              store->Register(Bias(name("pre_mlp_layernorm.bias"), h)));
    }
    if (config.is_moe_layer(l)) {
      // A MoE layer's MLP: router and experts (layers/moe/moe_layer.h), replicated on every
      // TP rank (expert-parallel size 1).
      MXMACA_RETURN_IF_ERROR(moe::RegisterMoEParameters(
          *config.moe, l, store,
          config.moe->experts_after_dense ? moe::MoEParameterParts::kAllButRoutedExperts
                                          : moe::MoEParameterParts::kAll));
      ids.layers.push_back(ids_l);
      continue;
    }
    MXMACA_ASSIGN_OR_RETURN(
        ids_l.fc1_weight,
        RegisterSplit(store, Weight(name("mlp.linear_fc1.weight"), {config.fc1_size(), h}, std),
                      fc1_split, r, p));
    if (bias) {
      MXMACA_ASSIGN_OR_RETURN(
          ids_l.fc1_bias, RegisterSplit(store, Bias(name("mlp.linear_fc1.bias"), config.fc1_size()),
                                        fc1_split, r, p));
    }
    MXMACA_ASSIGN_OR_RETURN(
        ids_l.fc2_weight,
        RegisterSplit(store,
                      Weight(name("mlp.linear_fc2.weight"), {h, config.ffn_hidden_size}, out_std),
                      Split::kColumns, r, p));
    if (bias) {
      MXMACA_ASSIGN_OR_RETURN(ids_l.fc2_bias,
                              store->Register(Bias(name("mlp.linear_fc2.bias"), h)));
    }
    ids.layers.push_back(ids_l);
  }
  if (layout.has_loss_head) {
    MXMACA_ASSIGN_OR_RETURN(ids.final_norm_weight,
                            store->Register(NormWeight("decoder.final_layernorm.weight", h, config.apply_layernorm_1p)));
    if (layer_norm) {
      MXMACA_ASSIGN_OR_RETURN(ids.final_norm_bias,
                              store->Register(Bias("decoder.final_layernorm.bias", h)));
    }
    if (config.tied_embeddings()) {
      if (ids.word_embeddings < 0) {
        ParameterSpec word = VocabWeight("embedding.word_embeddings.weight", config, std);
        word.tied = true;
        MXMACA_ASSIGN_OR_RETURN(ids.word_embeddings,
                                RegisterSplit(store, word, Split::kRows, r, p));
      }
      ids.output_weight = ids.word_embeddings;
    } else {
      MXMACA_ASSIGN_OR_RETURN(
          ids.output_weight,
          RegisterSplit(store, VocabWeight("output_layer.weight", config, std),
                        Split::kRows, r, p));
    }
  }
  return ids;
}

int CrossStageTiedEmbedding(const GptConfig& config, const StageLayout& layout,
                            const GptParameterIds& ids) {
  if (!config.tied_embeddings()) return -1;
  if (layout.has_embedding == layout.has_loss_head) return -1;  // both ends here, or neither
  return ids.word_embeddings;
}

bool IsTiedEmbeddingCopy(const StageLayout& layout, const GptParameterIds& ids, int param) {
  return !layout.has_embedding && param >= 0 && param == ids.word_embeddings;
}

}  // namespace mxmaca::layers
