// api/convert/hf_config.h: a GptConfig as a Hugging Face config.json and back, for the
// three layouts `mxmaca convert` writes: GPT-2 (GPT2LMHeadModel), Llama (LlamaForCausalLM;
// Mistral's MistralForCausalLM is the same layout, without a sliding window) and Mixtral
// (MixtralForCausalLM: Mistral's attention and norms, a MoE block on every layer).
//
// GPT-2 (transformers' GPT2Config): LayerNorm, learned absolute positions, biases on every
// linear, GELU (activation_function "gelu_new" = Megatron's tanh GELU, "gelu" = erf), multi-
// head attention, tied embeddings. Llama (LlamaConfig / MistralConfig): RMSNorm, RoPE
// rotating the two halves of each head (Megatron-Core's default, not --rotary-interleaved),
// SwiGLU (hidden_act "silu"), GQA (num_key_value_heads), tied or untied embeddings,
// attention_bias + mlp_bias for --add-bias-linear (both or neither). Mixtral
// (MixtralConfig; modeling_mixtral.py MixtralSparseMoeBlock): Llama's attention and norms
// without biases, and on every layer a router gate [E, h] whose logits go through a softmax
// over all E experts, top-k (num_experts_per_tok), the k weights renormalised to sum 1 —
// exp(l_i) / sum_{j in top-k} exp(l_j), which is Megatron's default TopKRouter (top-k on the
// logits, softmax over the k) — and E SwiGLU experts w2(silu(w1 x) * w3 x) of
// intermediate_size, dropless (no capacity, no shared expert). Qwen2 (Qwen2Config,
// modeling_qwen2.py): Llama's layout with biases on q, k and v and none on o or the MLP
// (Megatron's --disable-bias-linear --add-qkv-bias); use_sliding_window false. Qwen3
// (Qwen3Config, modeling_qwen3.py): Llama's layout without biases plus q_norm / k_norm, an
// RMSNorm over each head's head_dim channels of q and k before RoPE (Megatron's
// --qk-layernorm with RMSNorm). Qwen3-MoE (Qwen3MoeConfig, modeling_qwen3_moe.py
// Qwen3MoeSparseMoeBlock): Qwen3's attention and norms and on every layer a router gate
// [E, h]: softmax over all E experts, top-k, renormalised to sum 1 when norm_topk_prob
// (Megatron's default router, as Mixtral) or not (softmax then top-k: Megatron's
// --moe-router-pre-softmax), E SwiGLU experts of moe_intermediate_size (mlp.experts.x.
// gate_proj / up_proj / down_proj), dropless, no shared expert (decoder_sparse_step 1,
// mlp_only_layers []).
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
enum class HfArchitecture { kGpt2, kLlama, kMixtral, kQwen3Moe };

// IsMoEArchitecture: Mixtral or Qwen3-MoE (a MoE block on every layer).
inline bool IsMoEArchitecture(HfArchitecture a) {
  return a == HfArchitecture::kMixtral || a == HfArchitecture::kQwen3Moe;
}

// HfModelType: a layout and the config.json model_type naming it ("gpt2", "llama",
// "mistral", "qwen2", "qwen3" (both the Llama layout), "mixtral", "qwen3_moe").
struct HfModelType {
  HfArchitecture architecture = HfArchitecture::kLlama;
  std::string model_type = "llama";
};

// ChooseHfModelType: the Hugging Face model type for `config`: `requested` is "gpt2",
// "llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3_moe" or "auto" (qwen3_moe for MoE
// models with --qk-layernorm, mixtral for other MoE models, else
// gpt2 for LayerNorm with learned positions, else qwen3 with --qk-layernorm, else qwen2 with
// q/k/v-only biases, else llama). qwen2 requires exactly --add-qkv-bias without
// --add-bias-linear, qwen3 --qk-layernorm with RMSNorm and no biases; the others refuse
// --qk-layernorm.
// Errors (InvalidArgument naming the value and what the target expects, e.g.
// "--normalization is RMSNorm but gpt2 expects LayerNorm"): anything the target's modeling
// code cannot express — MoE (--num-experts) for gpt2 / llama / mistral, a dense model for
// mixtral, --apply-layernorm-1p, --qk-layernorm, --rotary-interleaved, --use-rope-scaling
// or --rotary-seq-len-interpolation-factor other than for llama / qwen2 / qwen3 (there:
// rope_scaling llama3 / linear; not both), --rotary-percent below 1; for gpt2 untied
// embeddings, GQA, --kv-channels other than h / np, no biases, SwiGLU, RoPE; for llama
// LayerNorm, learned positions, no SwiGLU, --add-qkv-bias without --add-bias-linear (that
// is Qwen2's layout); for mixtral what llama refuses plus biases (--add-bias-linear,
// --add-qkv-bias), dense layers (--moe-layer-freq), a shared expert
// (--moe-shared-expert-intermediate-size), --moe-router-score-function sigmoid,
// --moe-router-pre-softmax, group-limited routing (--moe-router-num-groups), a
// --moe-router-topk-scaling-factor other than 1, --moe-router-enable-expert-bias, a
// capacity factor (--moe-expert-capacity-factor: token dropping), sinkhorn load balancing
// (its weights are not renormalised over the top-k); an unknown `requested`.
absl::StatusOr<HfModelType> ChooseHfModelType(const layers::GptConfig& config,
                                              const std::string& requested);

// HfExportNotes: lines saying which training-only settings of `config` the export of type
// `type` does not carry or carries approximately (mixtral: --moe-z-loss-coeff, a
// seq_aux_loss / global_aux_loss written as router_aux_loss_coef, and a dense
// --ffn-hidden-size other than --moe-ffn-hidden-size, unused when every layer is MoE, which
// config.json cannot state); empty for the others.
std::vector<std::string> HfExportNotes(const layers::GptConfig& config, const HfModelType& type);

// HfConfigJson: config.json for `config` as `type` (after ChooseHfModelType), with
// torch_dtype "float32" or "bfloat16" from `dtype`. Floats (eps, rope_theta) are written
// with the shortest decimal that reads back as the same fp32 value. Mixtral also gets
// num_local_experts (--num-experts), num_experts_per_tok (--moe-router-topk),
// intermediate_size = --moe-ffn-hidden-size, router_aux_loss_coef = --moe-aux-loss-coeff
// (0 with load-balancing type none), output_router_logits false, router_jitter_noise 0,
// sliding_window null. (The two aux losses are normalised differently: Megatron's is per
// layer, divided by k, summed over layers; transformers' load_balancing_loss_func takes
// the means over all layers' tokens at once and does not divide by k. The coefficient is
// copied as it is; only training with it is affected, not the model's outputs.)
nlohmann::json HfConfigJson(const layers::GptConfig& config, const HfModelType& type,
                            HfDtype dtype);

// MegatronArgvFromHfConfig: the `mxmaca train` model flags equivalent to a config.json
// (--num-layers, --hidden-size, ..., --tokenizer-type NullTokenizer --vocab-size V - 1 so
// the model has V = vocab_size tokens), with --seq-length `seq_length` (0:
// min(max_position_embeddings, 4096)). Sets *type. Errors (InvalidArgument naming the
// config.json field, its value and what is expected): a model_type other than gpt2 /
// llama / mistral / mixtral, a missing or mistyped field, and what MXMACA cannot run
// (mixtral also: num_experts_per_tok above num_local_experts, a router_jitter_noise other
// than 0): hidden_act other than silu (llama), activation_function other than
// gelu_new / gelu_pytorch_tanh / gelu (gpt2), a rope_scaling other than llama3 with
// Megatron's fixed bands (low 1, high 4, original 8192) or linear with a whole factor,
// a sliding_window, a rope_theta that is
// not a whole number, attention_bias without mlp_bias or the reverse, untied gpt2 embeddings,
// scale_attn_by_inverse_layer_idx, cross-attention. Mixtral's flags add --num-experts E
// --moe-router-topk k --moe-ffn-hidden-size f (and --ffn-hidden-size f)
// --moe-router-score-function softmax --moe-router-load-balancing-type aux_loss
// --moe-aux-loss-coeff router_aux_loss_coef (default 0.001, MixtralConfig's); no capacity
// factor (dropless), --moe-layer-freq 1 (every layer), not pre-softmax: the router
// ChooseHfModelType accepts.
absl::StatusOr<std::vector<std::string>> MegatronArgvFromHfConfig(const nlohmann::json& hf,
                                                                  int64_t seq_length,
                                                                  HfModelType* type);

}  // namespace mxmaca::api::convert

#endif  // MXMACA_API_CONVERT_HF_CONFIG_H_
