// layers/stage_memory.h: per-stage memory by formula — parameters, gradients, optimizer
// state and the activations stashed for in-flight micro-batches — without allocating.
//
// The stash formula mirrors what GptStage::Forward (training) leaves in a MicroBatchStash
// (layers/gpt_stage.cc RunForward, layers/transformer_layer.cc Forward,
// layers/micro_batch_stash.h); stage_memory_test checks it byte for byte against
// GptStage::StashBytes after Forward. It is the stash from F until B starts: B frees the
// forward tensors W does not need and adds the gradients W needs (per layer a net change
// of 4 T h minus the attention probabilities, which can be positive), full
// recomputation re-materialises a chunk during B, and a W that runs ahead of an earlier
// micro-batch's keeps an arena-sized pending gradient; none of that is counted here.
//
// T = b s tokens (s = config.seq_length), h = hidden, np / ng / hn = query heads, query
// groups, head dim, f = ffn hidden, f1 = f or 2f (SwiGLU), VP = padded vocab. All stash
// tensors are fp32 (4 bytes) except token ids, position ids, labels and doc_start (int32).
// Per layer kept whole (no recomputation), in elements:
//   input, ln1_out, residual2, ln2_out     4 T h
//   ln1/ln2 mean (LayerNorm only), rstd    2 T (+ 2 T with LayerNorm)
//   q                                      b np s hn
//   k, v                                   2 b ng s hn
//   probs (not with selective recompute)   b np s s
//   context                                T np hn
//   fc1_out, act_out                       T f1 + T f
// A layer under full recomputation keeps only its input (T h) if it is the first layer
// of a recomputed chunk (--recompute-method uniform: chunks of --recompute-num-layers
// layers; block: the first --recompute-num-layers layers of the stage, one by one), and
// nothing otherwise. Embedding stage: tokens (T int32), position ids (T int32, learned
// absolute positions only). Loss-head stage: final_input, lnf_out (2 T h), lnf mean
// (LayerNorm) and rstd (T each), logits (T VP; none when T > GptConfig::loss_chunk_tokens,
// the chunked loss head), lse (T), loss_mask (T), labels (T int32).
// --reset-attention-mask: doc_start (T int32).
//
// Dropout masks are not stored: they are a function of (seed, layer, site, iteration,
// micro-batch, element) (layers/transformer_layer.h DropoutKey) and regenerated in B, so
// they add 0 bytes whatever the dropout probability; the attention probabilities are
// stashed before dropout and are counted above.
#ifndef MXMACA_LAYERS_STAGE_MEMORY_H_
#define MXMACA_LAYERS_STAGE_MEMORY_H_

#include <cstdint>
#include <string>

#include "layers/gpt_config.h"
#include "layers/gpt_parameters.h"

namespace mxmaca::layers {

// StashBytesPerMicroBatch: bytes of one micro-batch's stash on a stage with `layout` (the
// whole StageLayout: layers, has_embedding, has_loss_head) right after its training F,
// for micro-batches of `micro_batch_size` sequences of config.seq_length tokens;
// `reset_attention_mask` adds the doc_start copy. Expects a config that passes Validate()
// and a layout inside [0, num_layers] (no checks: pure arithmetic).
int64_t StashBytesPerMicroBatch(const GptConfig& config, const StageLayout& layout,
                                int64_t micro_batch_size, bool reset_attention_mask = false);

// CountStageParameters: elements of the stage's parameters as RegisterGptParameters
// registers them (no arena padding): embeddings on the embedding stage, each layer's
// norms / linears (biases with add_bias_linear, norm biases with LayerNorm), and on the
// loss-head stage the final norm plus output_layer.weight (untied) or a copy of the word
// embeddings (tied, when the stage has no embedding).
int64_t CountStageParameters(const GptConfig& config, const StageLayout& layout);

// StageMemoryEstimate: bytes held by one stage (or, summed with +, one pipeline rank's
// chunks).
struct StageMemoryEstimate {
  int64_t parameter_bytes = 0;   // fp32 parameters (4 per parameter)
  int64_t gradient_bytes = 0;    // fp32 gradient arena (4 per parameter)
  int64_t optimizer_bytes = 0;   // AdamW exp_avg + exp_avg_sq (8 per parameter, / dp
                                 // rounded up with the distributed optimizer)
  int64_t activation_bytes = 0;  // stashed_microbatches x StashBytesPerMicroBatch
  int64_t stashed_microbatches = 0;
  int64_t total() const {
    return parameter_bytes + gradient_bytes + optimizer_bytes + activation_bytes;
  }
};

// operator+: field-wise sum (a rank's chunks; stashed_microbatches add up too).
StageMemoryEstimate operator+(const StageMemoryEstimate& a, const StageMemoryEstimate& b);

// EstimateStageMemory: the estimate for a stage with `num_parameters` parameters (e.g.
// CountStageParameters or ParameterStore::num_elements), `stashed_microbatches`
// micro-batches in flight at the peak (e.g. the schedule simulator's
// PeakStashedMicrobatches for this stage), and `data_parallel_size` DP ranks sharing the
// optimizer state when `distributed_optimizer` (Megatron's --use-distributed-optimizer
// shards it over DP: ceil(num_parameters / dp) parameters' state per rank). Buffers that
// only live during one call (layer scratch, gradient buffers of B) are not included.
StageMemoryEstimate EstimateStageMemory(const GptConfig& config, const StageLayout& layout,
                                        int64_t num_parameters, int64_t micro_batch_size,
                                        int64_t stashed_microbatches, int64_t data_parallel_size,
                                        bool distributed_optimizer);

// FormatStageMemory: one log line, in MB of 2^20 bytes as Megatron's memory reports:
// "pipeline rank R (C chunks): parameters X MB, gradients X MB, optimizer X MB,
// activations X MB (N micro-batches stashed), total X MB".
std::string FormatStageMemory(int rank, int chunk_count, const StageMemoryEstimate& estimate);

}  // namespace mxmaca::layers

#endif  // MXMACA_LAYERS_STAGE_MEMORY_H_
