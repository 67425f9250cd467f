// mxmaca/model_spec.h (api/public/): a model as an ordered graph of layer specs (public API).
//
// Defines LayerSpec (one node: Embedding, TransformerLayer, FinalNorm, OutputLayer or
// Loss), ModelSpec (the ordered graph, with the ModelSpec::Gpt builder for the common
// case) and Validate (which graphs the runtime can run today). The runtime partitions
// the graph into pipeline stages (one stage actor per stage and virtual chunk); the
// spec says *what* the model is, ParallelConfig (parallel_config.h) says *how* it is
// laid out.
//
// The model is Megatron-Core's GPT (megatron/core/models/gpt/gpt_model.py, core_v0.15.0):
//   tokens [b, s] -> Embedding -> TransformerLayer x L -> FinalNorm -> OutputLayer
//   -> Loss (cross-entropy over the vocabulary, mean over tokens)
// with b = micro-batch, s = sequence, h = hidden, V = vocabulary. Each field names the
// Megatron flag it becomes (Job::MegatronArgs() prints the whole command line) and keeps
// Megatron's default.
#ifndef MXMACA_API_PUBLIC_MODEL_SPEC_H_
#define MXMACA_API_PUBLIC_MODEL_SPEC_H_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"

namespace mxmaca {

// PositionEmbedding: --position-embedding-type (learned_absolute | rope | none).
enum class PositionEmbedding { kLearnedAbsolute, kRope, kNone };

// Normalization: --normalization (LayerNorm | RMSNorm).
enum class Normalization { kLayerNorm, kRmsNorm };

// Activation: the MLP's activation.
//   kGeluTanh: tanh-approximated GELU, what Megatron's default fused bias-GELU computes
//              (megatron/core/fusions/fused_bias_gelu.py); needs add_bias_linear.
//   kGelu:     exact (erf) GELU (--no-bias-gelu-fusion, or any GELU without biases).
//   kSwiGlu:   SwiGLU (--swiglu): linear_fc1 produces [gate; up], 2 x ffn wide.
enum class Activation { kGeluTanh, kGelu, kSwiGlu };

// EmbeddingSpec: word embeddings [V, h] plus, for kLearnedAbsolute, position embeddings
// [max_position_embeddings, h]. Embedding dropout is the layers' hidden_dropout (as in
// Megatron, one flag). The hidden size is the transformer layers'.
struct EmbeddingSpec {
  // V, the real vocabulary size. 0 = the tokenizer's (TrainerOptions::tokenizer). An
  // explicit V is only possible with the NullTokenizer, whose --vocab-size is then V - 1
  // (Megatron's NullTokenizer adds the end-of-document id).
  int64_t vocab_size = 0;
  // --make-vocab-size-divisible-by: V is padded to a multiple of this x TP.
  int64_t make_vocab_size_divisible_by = 128;
  // --max-position-embeddings; 0 = the sequence length (TrainerOptions::seq_length).
  int64_t max_position_embeddings = 0;
  PositionEmbedding position_embedding = PositionEmbedding::kLearnedAbsolute;
  int64_t rotary_base = 10000;  // --rotary-base (kRope only; an int, as Megatron's)
  double rotary_percent = 1.0;  // --rotary-percent, in (0, 1] (kRope only)
};

// TransformerLayerSpec: one pre-norm decoder layer: x + Attn(Norm(x)), then
// x + MLP(Norm(x)); activations [s, b, h] in and out.
struct TransformerLayerSpec {
  int64_t hidden_size = 0;          // --hidden-size (h), > 0
  int64_t num_attention_heads = 0;  // --num-attention-heads (np), > 0
  // --num-query-groups (ng, grouped-query attention); 0 = np (multi-head attention).
  int64_t num_query_groups = 0;
  int64_t kv_channels = 0;      // --kv-channels (hn); 0 = h / np
  int64_t ffn_hidden_size = 0;  // --ffn-hidden-size (f); 0 = Megatron's default (4h; SwiGLU rule)
  Normalization normalization = Normalization::kLayerNorm;
  double norm_epsilon = 1e-5;  // --norm-epsilon, > 0
  Activation activation = Activation::kGeluTanh;
  double hidden_dropout = 0.1;     // --hidden-dropout, in [0, 1)
  double attention_dropout = 0.1;  // --attention-dropout, in [0, 1)
  bool add_bias_linear = true;     // false = --disable-bias-linear

  friend bool operator==(const TransformerLayerSpec& a, const TransformerLayerSpec& b);
  friend bool operator!=(const TransformerLayerSpec& a, const TransformerLayerSpec& b) {
    return !(a == b);
  }
};

// FinalNormSpec: the norm after the last layer. Megatron uses the layers' norm type and
// epsilon; a different one is not supported (Validate says so).
struct FinalNormSpec {
  Normalization normalization = Normalization::kLayerNorm;
  double norm_epsilon = 1e-5;
};

// OutputLayerSpec: logits [s, b, V_pad] = hidden x W^T. tied = true shares W with the word
// embeddings (Megatron's default); false = --untie-embeddings-and-output-weights.
struct OutputLayerSpec {
  bool tied = true;
};

// LossSpec: vocab-parallel cross-entropy. Megatron averages over the tokens of each
// micro-batch; calculate_per_token_loss = --calculate-per-token-loss (over all tokens of
// the global batch).
struct LossSpec {
  bool calculate_per_token_loss = false;
};

// LayerSpec: one node of the graph.
using LayerSpec =
    std::variant<EmbeddingSpec, TransformerLayerSpec, FinalNormSpec, OutputLayerSpec, LossSpec>;

// LayerKindName: "Embedding", "TransformerLayer", "FinalNorm", "OutputLayer" or "Loss".
const char* LayerKindName(const LayerSpec& layer);

// GptShape: the common GPT in one struct, for ModelSpec::Gpt. Zero means "Megatron's
// default" where the field says so.
struct GptShape {
  int64_t num_layers = 0;               // L >= 1
  int64_t hidden_size = 0;              // h
  int64_t num_attention_heads = 0;      // np
  int64_t num_query_groups = 0;         // ng; 0 = np
  int64_t ffn_hidden_size = 0;          // f; 0 = Megatron's default
  int64_t vocab_size = 0;               // V; 0 = the tokenizer's
  int64_t max_position_embeddings = 0;  // 0 = the sequence length
  PositionEmbedding position_embedding = PositionEmbedding::kLearnedAbsolute;
  Normalization normalization = Normalization::kLayerNorm;
  Activation activation = Activation::kGeluTanh;
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;
  bool add_bias_linear = true;
  bool tied_embeddings = true;
};

// ModelSpec: an ordered list of layers, run front to back (forward) and back to front
// (backward). Cheap to copy.
class ModelSpec {
 public:
  ModelSpec() = default;

  // Gpt: Embedding, `shape.num_layers` identical TransformerLayers, FinalNorm (the layers'
  // norm), OutputLayer, Loss. Does not validate (call Validate, or let CreateJob).
  static ModelSpec Gpt(const GptShape& shape);

  // Add: appends `layer`; returns *this for chaining.
  ModelSpec& Add(LayerSpec layer);

  const std::vector<LayerSpec>& layers() const { return layers_; }

  // NumTransformerLayers: how many TransformerLayer nodes the graph has (L).
  int64_t NumTransformerLayers() const;

  // Validate: OK when the runtime can run this graph. Today that is exactly
  //   [0] Embedding, [1..L] L >= 1 identical TransformerLayers, [L+1] FinalNorm with the
  //   layers' norm, [L+2] OutputLayer, [L+3] Loss
  // with positive sizes, h divisible by np (unless kv_channels is set), np divisible by
  // ng, dropouts in [0, 1), epsilon > 0, rotary_percent in (0, 1], kGeluTanh only with
  // biases. Errors: InvalidArgument "layer <i> (<kind>): <problem>", naming what is not
  // supported yet (e.g. heterogeneous transformer layers, a layer out of order, a second
  // embedding). Checks that need the tokenizer or the sequence length (V, positions) are
  // made when the job is created or run.
  absl::Status Validate() const;

  // Embedding / Layer / FinalNorm / Output / Loss: the nodes of a valid graph (call
  // Validate first; on an invalid graph they return default-constructed specs).
  EmbeddingSpec Embedding() const;
  TransformerLayerSpec Layer() const;  // the (identical) transformer layer
  OutputLayerSpec Output() const;
  LossSpec Loss() const;

 private:
  std::vector<LayerSpec> layers_;
};

}  // namespace mxmaca

#endif  // MXMACA_API_PUBLIC_MODEL_SPEC_H_
