// layers/stage_memory.cc
#include "layers/stage_memory.h"

#include <algorithm>
#include <cstdio>

namespace mxmaca::layers {

namespace {

constexpr int64_t kF32 = 4;
constexpr int64_t kI32 = 4;

// Bytes one layer keeps after a training Forward with ForwardKeep::kAll (or kNoProbs).
int64_t FullLayerBytes(const GptConfig& c, int64_t b, int64_t s, bool keep_probs) {
  const int64_t t = b * s, h = c.hidden_size, np = c.num_attention_heads, ng = c.query_groups(),
                hn = c.head_dim();
  const bool ln = c.normalization == Normalization::kLayerNorm;
  int64_t elems = 4 * t * h;                          // input, ln1_out, residual2, ln2_out
  elems += (ln ? 4 : 2) * t;                          // ln1/ln2 rstd (+ mean with LayerNorm)
  elems += b * np * s * hn;                           // q
  elems += 2 * b * ng * s * hn;                       // k, v
  if (keep_probs) elems += b * np * s * s;            // softmax probabilities
  elems += t * c.attention_projection_size();         // context
  elems += t * c.fc1_size() + t * c.ffn_hidden_size;  // fc1_out, act_out
  return elems * kF32;
}

}  // namespace

int64_t StashBytesPerMicroBatch(const GptConfig& c, const StageLayout& layout,
                                int64_t micro_batch_size, bool reset_attention_mask) {
  const int64_t b = micro_batch_size, s = c.seq_length, t = b * s, h = c.hidden_size;
  int64_t bytes = 0;
  if (reset_attention_mask) bytes += t * kI32;  // doc_start
  if (layout.has_embedding) {
    bytes += t * kI32;  // tokens
    if (c.position_embedding_type == PositionEmbeddingType::kLearnedAbsolute) {
      bytes += t * kI32;  // position ids
    }
  }

  // Transformer layers, chunked as GptStage::Create does.
  const int64_t n = layout.num_layers();
  const int64_t r = std::min(c.recompute_num_layers, n);
  const bool full = c.recompute_granularity == RecomputeGranularity::kFull;
  const bool selective = c.recompute_granularity == RecomputeGranularity::kSelective;
  const int64_t whole_layer = FullLayerBytes(c, b, s, /*keep_probs=*/!selective);
  const int64_t input_only = t * h * kF32;
  if (full && c.recompute_method == RecomputeMethod::kUniform) {
    // Chunks of max(r, 1) layers, each keeping its first layer's input.
    const int64_t chunk = std::max<int64_t>(r, 1);
    bytes += (n + chunk - 1) / chunk * input_only;
  } else if (full) {
    // Block: the first r layers checkpointed one by one, the rest kept whole.
    bytes += r * input_only + (n - r) * whole_layer;
  } else {
    bytes += n * whole_layer;
  }

  if (layout.has_loss_head) {
    const bool ln = c.normalization == Normalization::kLayerNorm;
    int64_t elems = 2 * t * h;         // final_input, lnf_out
    elems += (ln ? 2 : 1) * t;         // lnf rstd (+ mean)
    // logits, unless the loss head runs in chunks (layers/chunked_loss_head.h): then
    // only a [chunk, VP] scratch lives during a call (a transient, not counted).
    if (!c.chunked_loss_head(t, c.padded_vocab_size)) elems += t * c.padded_vocab_size;
    elems += 2 * t;                    // lse, loss_mask
    bytes += elems * kF32 + t * kI32;  // + labels
  }
  return bytes;
}

int64_t CountStageParameters(const GptConfig& c, const StageLayout& layout) {
  const int64_t h = c.hidden_size, vp = c.padded_vocab_size;
  const bool ln = c.normalization == Normalization::kLayerNorm;
  const bool bias = c.add_bias_linear;
  int64_t n = 0;
  if (layout.has_embedding) {
    n += vp * h;
    if (c.position_embedding_type == PositionEmbeddingType::kLearnedAbsolute) {
      n += c.max_position_embeddings * h;
    }
  }
  int64_t per_layer = (ln ? 4 : 2) * h;                             // two norms
  per_layer += c.qkv_size() * h + (c.qkv_has_bias() ? c.qkv_size() : 0);        // linear_qkv
  if (c.qk_layernorm) per_layer += (ln ? 4 : 2) * c.head_dim();      // q/k_layernorm
  per_layer += h * c.attention_projection_size() + (bias ? h : 0);  // linear_proj
  per_layer += c.fc1_size() * h + (bias ? c.fc1_size() : 0);        // linear_fc1
  per_layer += h * c.ffn_hidden_size + (bias ? h : 0);              // linear_fc2
  n += layout.num_layers() * per_layer;
  if (layout.has_loss_head) {
    n += (ln ? 2 : 1) * h;                                           // final norm
    if (!c.tied_embeddings() || !layout.has_embedding) n += vp * h;  // output layer / tied copy
  }
  return n;
}

StageMemoryEstimate operator+(const StageMemoryEstimate& a, const StageMemoryEstimate& b) {
  StageMemoryEstimate s;
  s.parameter_bytes = a.parameter_bytes + b.parameter_bytes;
  s.gradient_bytes = a.gradient_bytes + b.gradient_bytes;
  s.optimizer_bytes = a.optimizer_bytes + b.optimizer_bytes;
  s.activation_bytes = a.activation_bytes + b.activation_bytes;
  s.stashed_microbatches = a.stashed_microbatches + b.stashed_microbatches;
  return s;
}

StageMemoryEstimate EstimateStageMemory(const GptConfig& config, const StageLayout& layout,
                                        int64_t num_parameters, int64_t micro_batch_size,
                                        int64_t stashed_microbatches, int64_t data_parallel_size,
                                        bool distributed_optimizer) {
  StageMemoryEstimate e;
  e.parameter_bytes = num_parameters * kF32;
  e.gradient_bytes = num_parameters * kF32;
  const int64_t dp = std::max<int64_t>(data_parallel_size, 1);
  const int64_t owned = distributed_optimizer ? (num_parameters + dp - 1) / dp : num_parameters;
  e.optimizer_bytes = 2 * owned * kF32;
  e.stashed_microbatches = stashed_microbatches;
  e.activation_bytes =
      stashed_microbatches * StashBytesPerMicroBatch(config, layout, micro_batch_size);
  return e;
}

std::string FormatStageMemory(int rank, int chunk_count, const StageMemoryEstimate& e) {
  auto mb = [](int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); };
  char line[320];
  std::snprintf(line, sizeof(line),
                "pipeline rank %d (%d chunk%s): parameters %.2f MB, gradients %.2f MB, "
                "optimizer %.2f MB, activations %.2f MB (%lld micro-batch%s stashed), "
                "total %.2f MB",
                rank, chunk_count, chunk_count == 1 ? "" : "s", mb(e.parameter_bytes),
                mb(e.gradient_bytes), mb(e.optimizer_bytes), mb(e.activation_bytes),
                static_cast<long long>(e.stashed_microbatches),
                e.stashed_microbatches == 1 ? "" : "es", mb(e.total()));
  return line;
}

}  // namespace mxmaca::layers
