// api/convert/hf_config.h: a GptConfig as a Hugging Face config.json and back, for the
// two layouts `mxmaca convert` writes: GPT-2 (GPT2LMHeadModel) and Llama (LlamaForCausalLM;
// Mistral's MistralForCausalLM is the same layout, without a sliding window).
//
// GPT-2 (transformers' GPT2Config): LayerNorm, learned absolute positions, biases on every
// linear, GELU (activation_function "gelu_new" = Megatron's tanh GELU, "gelu" = erf), multi-
// head attention, tied embeddings. Llama (LlamaConfig / MistralConfig): RMSNorm, RoPE
// rotating the two halves of each head (Megatron-Core's default, not --rotary-interleaved),
// SwiGLU (hidden_act "silu"), GQA (num_key_value_heads), tied or untied embeddings,
// attention_bias + mlp_bias for --add-bias-linear (both or neither).
#ifndef MXMACA_API_CONVERT_HF_CONFIG_H_
#define MXMACA_API_CONVERT_HF_CONFIG_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/convert/hf_safetensors.h"
#include "layers/gpt_config.h"

namespace mxmaca::api::convert {

// HfArchitecture: the tensor layout (hf_tensor_map.h).
enum class HfArchitecture { kGpt2, kLlama };

// HfModelType: a layout and the config.json model_type naming it ("gpt2", "llama",
// "mistral").
struct HfModelType {
  HfArchitecture architecture = HfArchitecture::kLlama;
  std::string model_type = "llama";
};

// ChooseHfModelType: the Hugging Face model type for `config`: `requested` is "gpt2",
// "llama", "mistral" or "auto" (gpt2 for LayerNorm with learned positions, else llama).
// Errors (InvalidArgument naming the value and what the target expects, e.g.
// "--normalization is RMSNorm but gpt2 expects LayerNorm"): anything the target's modeling
// code cannot express — MoE (--num-experts; Unimplemented: Mixtral is not written yet),
// --apply-layernorm-1p, --qk-layernorm, --rotary-interleaved, --use-rope-scaling,
// --rotary-seq-len-interpolation-factor, --rotary-percent below 1; for gpt2 untied
// embeddings, GQA, --kv-channels other than h / np, no biases, SwiGLU, RoPE; for llama
// LayerNorm, learned positions, no SwiGLU, --add-qkv-bias without --add-bias-linear (that
// is Qwen2's layout); an unknown `requested`.
absl::StatusOr<HfModelType> ChooseHfModelType(const layers::GptConfig& config,
                                              const std::string& requested);

// HfConfigJson: config.json for `config` as `type` (after ChooseHfModelType), with
// torch_dtype "float32" or "bfloat16" from `dtype`. Floats (eps, rope_theta) are written
// with the shortest decimal that reads back as the same fp32 value.
nlohmann::json HfConfigJson(const layers::GptConfig& config, const HfModelType& type,
                            HfDtype dtype);

// MegatronArgvFromHfConfig: the `mxmaca train` model flags equivalent to a config.json
// (--num-layers, --hidden-size, ..., --tokenizer-type NullTokenizer --vocab-size V - 1 so
// the model has V = vocab_size tokens), with --seq-length `seq_length` (0:
// min(max_position_embeddings, 4096)). Sets *type. Errors (InvalidArgument naming the
// config.json field, its value and what is expected): a model_type other than gpt2 /
// llama / mistral (mixtral: Unimplemented), a missing or mistyped field, and what MXMACA
// cannot run: hidden_act other than silu (llama), activation_function other than
// gelu_new / gelu_pytorch_tanh / gelu (gpt2), rope_scaling, a sliding_window, a rope_theta that is
// not a whole number, attention_bias without mlp_bias or the reverse, untied gpt2 embeddings,
// scale_attn_by_inverse_layer_idx, cross-attention.
absl::StatusOr<std::vector<std::string>> MegatronArgvFromHfConfig(const nlohmann::json& hf,
                                                                  int64_t seq_length,
                                                                  HfModelType* type);

}  // namespace mxmaca::api::convert

#endif  // MXMACA_API_CONVERT_HF_CONFIG_H_
