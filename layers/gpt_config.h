// layers/gpt_config.h: the configuration of a Megatron-Core GPT (pre-norm decoder).
//
// GptConfig is a plain struct that the trainer fills from MegatronArgs; each field names
// the Megatron-LM flag it comes from (megatron/training/arguments.py, core_v0.15.0) and
// keeps Megatron's default. Derived sizes (kv_channels when 0, the QKV width, the rotary
// dimension) are computed by the accessors below, never stored twice.
#ifndef MXMACA_LAYERS_GPT_CONFIG_H_
#define MXMACA_LAYERS_GPT_CONFIG_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/exec_context.h"
#include "kernels/rope_frequencies.h"

namespace mxmaca::layers {

namespace moe {
struct MoELayerConfig;  // layers/moe/moe_layer.h
}  // namespace moe

// PositionEmbeddingType: --position-embedding-type.
enum class PositionEmbeddingType { kLearnedAbsolute, kRope, kNone };
// Normalization: --normalization.
enum class Normalization { kLayerNorm, kRmsNorm };
// RecomputeGranularity: --recompute-granularity (absent = kNone).
enum class RecomputeGranularity { kNone, kFull, kSelective };
// RecomputeMethod: --recompute-method (only with granularity full).
enum class RecomputeMethod { kUniform, kBlock };

// Parse*: Megatron's spellings ("learned_absolute" | "rope" | "none"; "LayerNorm" |
// "RMSNorm"; "full" | "selective"; "uniform" | "block"). Any other value is
// InvalidArgument naming the value and the choices.
absl::StatusOr<PositionEmbeddingType> ParsePositionEmbeddingType(const std::string& s);
absl::StatusOr<Normalization> ParseNormalization(const std::string& s);
absl::StatusOr<RecomputeGranularity> ParseRecomputeGranularity(const std::string& s);
absl::StatusOr<RecomputeMethod> ParseRecomputeMethod(const std::string& s);

// GptConfig: one GPT model. Sizes are counts, dropouts probabilities in [0, 1).
struct GptConfig {
  int64_t num_layers = 0;       // --num-layers (L)
  int64_t hidden_size = 0;      // --hidden-size (h)
  int64_t ffn_hidden_size = 0;  // --ffn-hidden-size (f; Megatron's default 4h, set by the trainer)
  int64_t num_attention_heads = 0;  // --num-attention-heads (np)
  // --num-query-groups with --group-query-attention (ng); 0 = np (multi-head attention).
  int64_t num_query_groups = 0;
  int64_t kv_channels = 0;  // --kv-channels (hn); 0 = h / np
  int64_t seq_length = 0;   // --seq-length (s)
  // --max-position-embeddings (rows of the learned position table).
  int64_t max_position_embeddings = 0;
  int64_t vocab_size = 0;  // real vocabulary size V (tokenizer)
  // V_pad (--make-vocab-size-divisible-by x TP; MEGATRON_FORMATS.md).
  int64_t padded_vocab_size = 0;
  // --softmax-over-padded-vocab (MXMACA's flag). false (default): the cross-entropy's
  // softmax runs over the V real columns only; padded columns get zero gradient and the
  // loss does not depend on V_pad, hence not on TP (a deviation from Megatron). true:
  // Megatron's behaviour: all V_pad columns enter the softmax (max, sum of exps) and get
  // their softmax gradient, so the loss depends on V_pad, i.e. on TP. Training and eval
  // losses only; inference logits are [b, V_pad] either way.
  bool softmax_over_padded_vocab = false;
  // --position-embedding-type.
  PositionEmbeddingType position_embedding_type = PositionEmbeddingType::kLearnedAbsolute;
  float rotary_base = 10000.0f;                             // --rotary-base
  float rotary_percent = 1.0f;                              // --rotary-percent
  // --rotary-interleaved: RoPE rotates adjacent pairs (x0, x1), (x2, x3), ... instead of
  // the two halves (kernels/cpu/rope.h RopeFrequencies::interleaved).
  bool rotary_interleaved = false;
  // Long-context RoPE (kernels/cpu/rope.h RopeFrequencies): --use-rope-scaling (Llama 3.x
  // frequency scaling) with --rope-scaling-factor; --rotary-seq-len-interpolation-factor
  // (positions divided by it; 0 = none).
  bool rope_scaling = false;
  float rope_scaling_factor = 8.0f;
  float rotary_seq_len_interpolation_factor = 0.0f;
  Normalization normalization = Normalization::kLayerNorm;  // --normalization
  float norm_epsilon = 1e-5f;                               // --norm-epsilon
  // --apply-layernorm-1p (Megatron-Core layernorm_zero_centered_gamma): every norm's weight
  // w stores gamma - 1, starts at 0 and is applied as x_hat * (1 + w) (+ b for LayerNorm).
  // LayerNorm and RMSNorm alike, as Megatron's default Transformer Engine norms do
  // (Megatron's --transformer-impl local refuses it for RMSNorm: torch_norm.py).
  bool apply_layernorm_1p = false;
  // --qk-layernorm (Megatron-Core SelfAttention q_layernorm / k_layernorm): a norm of the
  // --normalization type over each head's hn values of q and of k, after the linear_qkv
  // split and before RoPE; weights [hn] replicated over TP, gradients summed over TP.
  bool qk_layernorm = false;
  bool swiglu = false;  // --swiglu (linear_fc1 produces [gate; up], 2f wide)
  // GELU as Megatron's fused bias-GELU computes it: the tanh approximation
  // (megatron/core/fusions/fused_bias_gelu.py). Megatron uses it when --bias-gelu-fusion is
  // on (its default; off with --no-bias-gelu-fusion) and the MLP has biases and no SwiGLU;
  // the trainer sets it to bias_gelu_fusion && add_bias_linear && !swiglu for Megatron's
  // numerics. false: the exact erf GELU (F.gelu's default). Ignored with SwiGLU.
  bool gelu_tanh_approximation = false;
  bool untie_embeddings_and_output_weights = false;  // --untie-embeddings-and-output-weights
  bool add_bias_linear = true;                       // false with --disable-bias-linear
  // --add-qkv-bias: linear_qkv has a bias even without add_bias_linear (Megatron-Core's
  // attention.py: bias=add_bias_linear or add_qkv_bias; Qwen2). Megatron's validate_args
  // sets it whenever add_bias_linear is on; qkv_has_bias() is the rule.
  bool add_qkv_bias = false;
  float hidden_dropout = 0.1f;     // --hidden-dropout (embedding, after linear_proj and fc2)
  float attention_dropout = 0.1f;  // --attention-dropout (on the softmax probabilities)
  float init_method_std = 0.02f;   // --init-method-std
  uint64_t seed = 1234;            // --seed (weights and dropout masks)
  // --recompute-granularity, --recompute-method, --recompute-num-layers.
  RecomputeGranularity recompute_granularity = RecomputeGranularity::kNone;
  RecomputeMethod recompute_method = RecomputeMethod::kUniform;
  int64_t recompute_num_layers = 1;
  kernels::Precision precision = kernels::Precision::kFp32;  // kBf16 with --bf16 (GEMM inputs)
  int num_threads = 1;  // CPU threads per kernel call (not a Megatron flag)
  // Tokens per chunk of the loss head (not a flag; layers/chunked_loss_head.h): a last
  // stage whose micro-batch holds more tokens than this, and whose whole [T, VP/TP] fp32
  // logits would take more than loss_chunk_min_logits_bytes, computes the output layer and
  // the cross-entropy chunk by chunk and never holds the whole logits; 0 = never. Below the
  // byte threshold the whole logits are kept (no recomputation: the chunked head runs the
  // output GEMM 4-5 times per micro-batch instead of 3, which costs more than it saves
  // for short sequences — the KJV job's 2,048 x 50,304 logits are 412 MB).
  int64_t loss_chunk_tokens = 1024;
  int64_t loss_chunk_min_logits_bytes = int64_t{512} << 20;
  // chunked_loss_head: whether a last stage with `tokens` tokens and `vocab_rows` local
  // vocabulary rows runs the loss head in chunks (the rule above).
  bool chunked_loss_head(int64_t tokens, int64_t vocab_rows) const {
    return loss_chunk_tokens > 0 && tokens > loss_chunk_tokens &&
           tokens * vocab_rows * 4 > loss_chunk_min_logits_bytes;
  }
  // --apply-residual-connection-post-layernorm: only false is supported (Validate says so).
  bool apply_residual_connection_post_layernorm = false;
  // Mixture of Experts (--num-experts): moe_layers[l] is true where global layer l's MLP
  // is a MoELayer (--moe-layer-freq); `moe` holds that layer's flags
  // (layers/moe/moe_layer.h). Empty / null: a dense model.
  std::vector<bool> moe_layers;
  std::shared_ptr<const moe::MoELayerConfig> moe;
  bool is_moe_layer(int64_t layer) const {
    return moe != nullptr && layer >= 0 && layer < static_cast<int64_t>(moe_layers.size()) &&
           moe_layers[static_cast<size_t>(layer)];
  }

  // Derived sizes.
  int64_t query_groups() const {
    return num_query_groups > 0 ? num_query_groups : num_attention_heads;
  }
  int64_t head_dim() const {
    return kv_channels > 0 ? kv_channels : hidden_size / num_attention_heads;
  }
  // Width of linear_qkv's output: (np + 2 ng) hn.
  int64_t qkv_size() const { return (num_attention_heads + 2 * query_groups()) * head_dim(); }
  // Width of linear_proj's input: np hn.
  int64_t attention_projection_size() const { return num_attention_heads * head_dim(); }
  // Width of linear_fc1's output: 2f with SwiGLU, else f.
  int64_t fc1_size() const { return swiglu ? 2 * ffn_hidden_size : ffn_hidden_size; }
  // Rotated dims per head (Megatron's RotaryEmbedding: kv_channels * rotary_percent).
  int64_t rotary_dim() const {
    return static_cast<int64_t>(static_cast<double>(head_dim()) * rotary_percent);
  }
  // The RoPE angles (kernels/rope_frequencies.h): --rotary-base, --use-rope-scaling,
  // --rope-scaling-factor, --rotary-seq-len-interpolation-factor, --rotary-interleaved.
  kernels::RopeFrequencies rope_frequencies() const {
    kernels::RopeFrequencies f;
    f.base = rotary_base;
    f.llama3_scaling = rope_scaling;
    f.interleaved = rotary_interleaved;
    f.scaling_factor = rope_scaling_factor;
    f.seq_len_interpolation_factor = rotary_seq_len_interpolation_factor;
    return f;
  }
  // Whether linear_qkv has a bias: add_bias_linear || add_qkv_bias.
  bool qkv_has_bias() const { return add_bias_linear || add_qkv_bias; }
  bool tied_embeddings() const { return !untie_embeddings_and_output_weights; }

  // Validate: InvalidArgument naming the first offending field and value (non-positive
  // sizes, np % ng != 0, V > V_pad, odd or out-of-range rotary dim, dropout outside
  // [0, 1), unsupported post-layernorm residual, recompute_num_layers < 1 with full
  // recompute).
  absl::Status Validate() const;
};

}  // namespace mxmaca::layers

#endif  // MXMACA_LAYERS_GPT_CONFIG_H_
