// layers/gpt_parameters.h: the logical parameters of a GPT pipeline stage, registered in
// a ParameterStore under Megatron-Core's names, with Megatron's initialisation.
//
// Names (MEGATRON_FORMATS.md, "GPT parameter names"; megatron/core/models/gpt/gpt_model.py
// with the local transformer-layer spec), shape, init, weight decay:
//   embedding.word_embeddings.weight              [V_pad, h]        normal(0, std)   decay
//   embedding.position_embeddings.weight          [max_pos, h]      normal(0, std)   decay
//       (learned_absolute only)
//   decoder.layers.N.input_layernorm.weight       [h]               1                no decay
//   decoder.layers.N.input_layernorm.bias         [h]               0                no decay
//       (LayerNorm only, as every norm bias)
//   decoder.layers.N.self_attention.linear_qkv.weight  [(np + 2 ng) hn, h]  normal(0, std)
//       rows grouped per query group: [ng, np/ng + 2, hn] = the group's query heads, k, v
//   decoder.layers.N.self_attention.linear_qkv.bias    [(np + 2 ng) hn]     0
//   decoder.layers.N.self_attention.linear_proj.weight [h, np hn]  normal(0, std / sqrt(2 L))
//   decoder.layers.N.self_attention.linear_proj.bias   [h]         0
//   decoder.layers.N.pre_mlp_layernorm.{weight,bias}   [h]         1 / 0
//   decoder.layers.N.mlp.linear_fc1.weight        [f or 2f, h]      normal(0, std)
//       (SwiGLU: rows [gate; up])
//   decoder.layers.N.mlp.linear_fc1.bias          [f or 2f]         0
//   decoder.layers.N.mlp.linear_fc2.weight        [h, f]            normal(0, std / sqrt(2 L))
//   decoder.layers.N.mlp.linear_fc2.bias          [h]               0
//   decoder.final_layernorm.{weight,bias}         [h]               1 / 0
//   output_layer.weight                           [V_pad, h]        normal(0, std)   (untied only)
// Biases of linears exist only with add_bias_linear (linear_qkv.bias also with add_qkv_bias).
// std = --init-method-std, L = --num-layers (megatron/core/utils.py init_method_normal,
// scaled_init_method_normal). No-decay: biases and 1-D tensors (_get_param_groups).
//
// Deviation from Megatron: N is the GLOBAL layer number. Megatron's checkpoints number
// layers locally within each pipeline stage; global numbers make a tensor's name (and so
// its initial values, a function of the name) independent of the pipeline layout; a
// checkpoint converter renumbers.
// With tied embeddings, a last stage that does not hold the embedding (pipeline
// parallelism) registers "embedding.word_embeddings.weight" itself (flag tied): its
// initial values equal the first stage's copy because they are a function of the name.
// That copy is the duplicate: after the trainer sums the two copies' gradients (Megatron's
// embedding group all-reduce), the global grad norm counts the tensor once, on the stage
// with has_embedding.
#ifndef MXMACA_LAYERS_GPT_PARAMETERS_H_
#define MXMACA_LAYERS_GPT_PARAMETERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "layers/gpt_config.h"
#include "layers/parameter_store.h"

namespace mxmaca::layers {

// StageLayout: the part of the model one pipeline stage owns.
struct StageLayout {
  int64_t first_layer = 0;    // global index of the first transformer layer
  int64_t last_layer = 0;     // one past the last (first_layer <= last_layer <= L)
  bool has_embedding = true;  // first stage: word (and position) embeddings
  bool has_loss_head = true;  // last stage: final norm, output layer, cross-entropy
  int64_t num_layers() const { return last_layer - first_layer; }
};

// LayerParameterIds: indices into the ParameterStore of one transformer layer's tensors;
// -1 where the tensor does not exist (biases without add_bias_linear, norm biases for
// RMSNorm).
struct LayerParameterIds {
  int input_norm_weight = -1, input_norm_bias = -1;
  int qkv_weight = -1, qkv_bias = -1;
  // --qk-layernorm: self_attention.{q,k}_layernorm.{weight,bias} [hn] (bias for LayerNorm).
  int q_norm_weight = -1, q_norm_bias = -1, k_norm_weight = -1, k_norm_bias = -1;
  int proj_weight = -1, proj_bias = -1;
  int mlp_norm_weight = -1, mlp_norm_bias = -1;
  int fc1_weight = -1, fc1_bias = -1;
  int fc2_weight = -1, fc2_bias = -1;
};

// GptParameterIds: the stage's tensors; -1 where absent on this stage.
struct GptParameterIds {
  int word_embeddings = -1;  // embedding.word_embeddings.weight (also the output layer when tied)
  int position_embeddings = -1;           // embedding.position_embeddings.weight
  std::vector<LayerParameterIds> layers;  // local layer i = global layer first_layer + i
  int final_norm_weight = -1, final_norm_bias = -1;
  int output_weight = -1;  // output_layer.weight, or == word_embeddings when tied
};

// LayerParameterName: "decoder.layers.<layer>.<suffix>".
std::string LayerParameterName(int64_t layer, const std::string& suffix);

// RegisterGptParameters: registers the stage's tensors (in the order of the table above)
// in `store` (not yet finalized). With tensor parallelism (tp_size > 1) each tensor is
// registered as TP rank `tp_rank`'s shard (full shape, shard offsets; the split of
// layers/tensor_parallel.h), so ParameterStore::Initialize gives every rank the slice of
// the single-device tensor. InvalidArgument for an invalid config or layout
// (first_layer > last_layer, last_layer > L), a TP rank out of [0, tp_size), or heads,
// query groups, ffn size or padded vocab not divisible by tp_size; errors of
// ParameterStore::Register.
absl::StatusOr<GptParameterIds> RegisterGptParameters(const GptConfig& config,
                                                      const StageLayout& layout,
                                                      ParameterStore* store, int tp_rank = 0,
                                                      int tp_size = 1);

// CrossStageTiedEmbedding: the index of the word embeddings a stage shares with ANOTHER
// stage (Megatron's embedding group: with tied embeddings, the first stage's table and
// the last stage's copy, whose gradients the trainer sums); -1 with untied embeddings, on
// a stage holding both ends, and on a middle stage.
int CrossStageTiedEmbedding(const GptConfig& config, const StageLayout& layout,
                            const GptParameterIds& ids);

// IsTiedEmbeddingCopy: parameter `param` is the last stage's copy of the tied word
// embeddings (a stage without the embedding that registered them): not counted in the
// global grad norm and not written to checkpoints.
bool IsTiedEmbeddingCopy(const StageLayout& layout, const GptParameterIds& ids, int param);

}  // namespace mxmaca::layers

#endif  // MXMACA_LAYERS_GPT_PARAMETERS_H_
