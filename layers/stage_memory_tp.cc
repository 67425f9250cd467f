// layers/stage_memory_tp.cc
#include "layers/stage_memory_tp.h"

#include <algorithm>

namespace mxmaca::layers {

namespace {

constexpr int64_t kF32 = 4;
constexpr int64_t kI32 = 4;

// Bytes one layer keeps after a training Forward with ForwardKeep::kAll (or kNoProbs) on
// a TP rank: t = T, tl = local rows, per-rank widths from np_l, ng_l, f_l.
int64_t TpLayerBytes(const GptConfig& c, int p, int64_t b, int64_t s, int64_t tl, bool keep_probs) {
  const int64_t t = b * s, h = c.hidden_size, hn = c.head_dim();
  const int64_t np_l = c.num_attention_heads / p, ng_l = c.query_groups() / p,
                f_l = c.ffn_hidden_size / p, f1_l = c.fc1_size() / p;
  const bool ln = c.normalization == Normalization::kLayerNorm;
  int64_t elems = 2 * tl * h;                 // input, residual2 (local rows)
  elems += 2 * t * h;                         // ln1_out, ln2_out (gathered under SP)
  elems += (ln ? 4 : 2) * tl;                 // ln1/ln2 rstd (+ mean)
  elems += b * np_l * s * hn;                 // q
  elems += 2 * b * ng_l * s * hn;             // k, v
  if (keep_probs) elems += b * np_l * s * s;  // softmax probabilities
  elems += t * np_l * hn;                     // context
  elems += t * f1_l + t * f_l;                // fc1_out, act_out
  return elems * kF32;
}

}  // namespace

int64_t StashBytesPerMicroBatchTp(const GptConfig& c, const StageLayout& layout,
                                  int64_t micro_batch_size, int tp_size, bool sequence_parallel,
                                  bool reset_attention_mask) {
  const int p = std::max(tp_size, 1);
  const bool sp = p > 1 && sequence_parallel;
  const int64_t b = micro_batch_size, s = c.seq_length, t = b * s, h = c.hidden_size;
  const int64_t tl = sp ? b * (s / p) : t;
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
  const int64_t whole_layer = TpLayerBytes(c, p, b, s, tl, /*keep_probs=*/!selective);
  const int64_t input_only = tl * h * kF32;
  if (full && c.recompute_method == RecomputeMethod::kUniform) {
    const int64_t chunk = std::max<int64_t>(r, 1);
    bytes += (n + chunk - 1) / chunk * input_only;
  } else if (full) {
    bytes += r * input_only + (n - r) * whole_layer;
  } else {
    bytes += n * whole_layer;
  }

  if (layout.has_loss_head) {
    const bool ln = c.normalization == Normalization::kLayerNorm;
    int64_t elems = tl * h + t * h;          // final_input (local), lnf_out (gathered)
    elems += (ln ? 2 : 1) * tl;              // lnf rstd (+ mean)
    // Logits of this rank's vocab shard, unless the loss head runs in chunks.
    if (!c.chunked_loss_head(t, c.padded_vocab_size / p)) {
      elems += t * (c.padded_vocab_size / p);
    }
    elems += 2 * t;                          // lse, loss_mask
    bytes += elems * kF32 + t * kI32;        // + labels
  }
  return bytes;
}

}  // namespace mxmaca::layers
