// api/convert/hf_tensor_map.h: MXMACA's logical tensors (Megatron-Core names, layers/
// gpt_parameters.h) to Hugging Face's state-dict names and back.
//
// Dims: V = true vocabulary, h = hidden, L = layers, np = heads, ng = query groups,
// hn = head dim, f = ffn hidden, P = max positions.
//
// Llama / Mistral (LlamaForCausalLM), per layer i:
//   model.embed_tokens.weight [V, h]       = embedding.word_embeddings.weight rows [0, V)
//   model.layers.i.input_layernorm.weight [h]
//   model.layers.i.self_attn.{q,k,v}_proj.weight [np hn, h], [ng hn, h], [ng hn, h]
//       = linear_qkv.weight [(np + 2 ng) hn, h] seen as [ng, np/ng + 2, hn, h]: group g's
//         np/ng query heads go to q rows [g np/ng hn, (g+1) np/ng hn), its k head to k
//         rows [g hn, (g+1) hn), its v head likewise (q/k need no RoPE permutation: both
//         rotate the two halves of each head)
//   model.layers.i.self_attn.o_proj.weight [h, np hn]  = linear_proj.weight
//   model.layers.i.post_attention_layernorm.weight [h] = pre_mlp_layernorm.weight
//   model.layers.i.mlp.{gate,up}_proj.weight [f, h]    = linear_fc1.weight [2f, h] rows
//       [0, f) and [f, 2f) (SwiGLU's [gate; up])
//   model.layers.i.mlp.down_proj.weight [h, f]         = linear_fc2.weight
//   (with --add-bias-linear the matching .bias vectors, split the same way; Qwen2's
//   --add-qkv-bias alone: q/k/v_proj.bias only)
//   Qwen3 (--qk-layernorm): model.layers.i.self_attn.{q,k}_norm.weight [hn]
//       = self_attention.{q,k}_layernorm.weight
//   model.norm.weight [h] = decoder.final_layernorm.weight
//   lm_head.weight [V, h] = output_layer.weight rows [0, V) (untied only; absent when tied)
// Mixtral (MixtralForCausalLM): as Llama without biases, the MLP replaced on every layer by
// (E experts, fe = --moe-ffn-hidden-size; MXMACA's names from layers/moe/moe_layer.h):
//   model.layers.i.block_sparse_moe.gate.weight [E, h]  = decoder.layers.i.mlp.router.weight
//   model.layers.i.block_sparse_moe.experts.x.w1.weight [fe, h] (gate proj)
//       = decoder.layers.i.mlp.experts.linear_fc1.weight<x> [2fe, h] rows [0, fe)
//   model.layers.i.block_sparse_moe.experts.x.w3.weight [fe, h] (up proj)   rows [fe, 2fe)
//   model.layers.i.block_sparse_moe.experts.x.w2.weight [h, fe] (down proj)
//       = decoder.layers.i.mlp.experts.linear_fc2.weight<x>
// Qwen3-MoE (Qwen3MoeForCausalLM): as Qwen3 (q_norm / k_norm, no biases), the MLP replaced on
// every layer by
//   model.layers.i.mlp.gate.weight [E, h]                  = decoder.layers.i.mlp.router.weight
//   model.layers.i.mlp.experts.x.gate_proj.weight [fe, h]  = linear_fc1.weight<x> rows [0, fe)
//   model.layers.i.mlp.experts.x.up_proj.weight [fe, h]    = linear_fc1.weight<x> rows [fe, 2fe)
//   model.layers.i.mlp.experts.x.down_proj.weight [h, fe]  = linear_fc2.weight<x>
// GPT-2 (GPT2LMHeadModel; Conv1D weights are [in, out], the transpose of Megatron's):
//   transformer.wte.weight [V, h], transformer.wpe.weight [P, h]
//   transformer.h.i.ln_1.{weight,bias} [h]             = input_layernorm
//   transformer.h.i.attn.c_attn.weight [h, 3h]         = ([q; k; v] of linear_qkv)^T with
//       q, k, v each [np hn, h] ungrouped as above (ng = np); .bias [3h] likewise
//   transformer.h.i.attn.c_proj.{weight [h, h] = linear_proj^T, bias [h]}
//   transformer.h.i.ln_2.{weight,bias}                 = pre_mlp_layernorm
//   transformer.h.i.mlp.c_fc.{weight [h, f] = linear_fc1^T, bias [f]}
//   transformer.h.i.mlp.c_proj.{weight [f, h] = linear_fc2^T, bias [h]}
//   transformer.ln_f.{weight,bias} = final_layernorm; no lm_head (tied)
#ifndef MXMACA_API_CONVERT_HF_TENSOR_MAP_H_
#define MXMACA_API_CONVERT_HF_TENSOR_MAP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/convert/hf_config.h"
#include "api/convert/hf_safetensors.h"
#include "layers/gpt_config.h"

namespace mxmaca::api::convert {

// MegatronTensor: a logical tensor under its Megatron-Core name (no "model/" prefix),
// full shape, fp32 values in C order. Vocabulary tensors hold the V true rows.
struct MegatronTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// MegatronTensorShapes: every parameter `config` has under its Megatron-Core name, in
// gpt_parameters.h's order, with vocabulary tensors as [V, h] (their logical rows) and the
// output layer only when untied; a MoE layer's MLP as moe_layer.h registers it (router,
// then every expert 0..E-1 — all of them, whatever the expert-parallel size — then the
// shared expert).
std::vector<std::pair<std::string, std::vector<int64_t>>> MegatronTensorShapes(
    const layers::GptConfig& config);

// TensorFetch: the values of Megatron tensor `name` of shape `shape` (C order).
using TensorFetch = std::function<absl::StatusOr<std::vector<float>>(
    const std::string& name, const std::vector<int64_t>& shape)>;

// ToHfTensors: the Hugging Face state dict of `config` in layout `architecture` (after
// ChooseHfModelType), built from `fetch`; `names` gets the state-dict order. Errors: the
// fetch's.
absl::StatusOr<HfTensors> ToHfTensors(const layers::GptConfig& config, HfArchitecture architecture,
                                      const TensorFetch& fetch, std::vector<std::string>* names);

// FromHfTensors: the Megatron tensors of `config` (MegatronTensorShapes' order) from a
// Hugging Face state dict (`hf` is consumed). GPT-2 names are accepted with or without the
// "transformer." prefix; the attention-mask buffers (attn.bias, attn.masked_bias) and
// rotary_emb.inv_freq are ignored. Errors naming `source` and the key: InvalidArgument for
// a missing tensor, a tensor of the wrong shape ("... has [768, 2304], expected [768,
// 2304]"), a tensor the model has no place for, lm_head.weight with tied embeddings.
absl::StatusOr<std::vector<MegatronTensor>> FromHfTensors(const layers::GptConfig& config,
                                                          HfArchitecture architecture, HfTensors hf,
                                                          const std::string& source);

}  // namespace mxmaca::api::convert

#endif  // MXMACA_API_CONVERT_HF_TENSOR_MAP_H_
