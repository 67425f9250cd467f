// layers/stage_memory_tp.h: the activation stash of ONE tensor-parallel rank of a stage —
// the TP-aware counterpart of StashBytesPerMicroBatch (layers/stage_memory.h), which
// estimates the unsplit stage.
//
// It mirrors what a TP rank's GptStage::Forward (training) leaves in a MicroBatchStash
// (layers/gpt_stage.cc RunForward / EmbeddingForward, layers/transformer_layer.cc
// Forward with LocalLayerConfig's widths); stage_memory_tp_test checks it byte for byte
// against GptStage::StashBytes of TP ranks run on threads. Same scope as the TP-1 formula:
// the stash from F until B starts (B's gradient buffers, recomputation and pending
// gradients are not counted).
//
// p = TP size, T = b s tokens, Tl = local rows = T / p with sequence parallelism (each
// rank holds s/p positions of every sequence), else T; h = hidden; np/p, ng/p query
// heads / groups per rank, hn head dim; f/p ffn per rank, f1/p = f/p or 2f/p (SwiGLU);
// VP/p vocab rows per rank. Per layer kept whole (no recomputation), fp32 elements:
//   input, residual2                       2 Tl h
//   ln1_out, ln2_out                       2 T h   (full rows: with SP the gathered norm
//                                                    outputs are kept for W, tensor_parallel.h)
//   ln1/ln2 rstd (+ mean with LayerNorm)   2 Tl (+ 2 Tl)
//   q; k, v                                b (np/p) s hn; 2 b (ng/p) s hn
//   probs (not with selective recompute)   b (np/p) s s
//   context                                T (np/p) hn
//   fc1_out, act_out                       T f1/p + T f/p
// Full recomputation keeps each recomputed chunk's first input only (Tl h), as TP 1 does.
// Embedding stage: tokens (T int32), position ids (T int32, learned positions): the full
// [b, s] on every rank. Loss-head stage: final_input (Tl h), lnf_out (T h, gathered),
// lnf rstd (+ mean) (Tl each), logits (T VP/p: this rank's vocab shard; none when
// T > GptConfig::loss_chunk_tokens, the chunked loss head), lse, loss_mask
// (T each), labels (T int32). --reset-attention-mask: doc_start (T int32).
// Without SP only the per-rank widths shrink; the [T, h] activations (input, residuals,
// norm outputs) are replicated on every TP rank, which is what SP removes.
#ifndef MXMACA_LAYERS_STAGE_MEMORY_TP_H_
#define MXMACA_LAYERS_STAGE_MEMORY_TP_H_

#include <cstdint>

#include "layers/gpt_config.h"
#include "layers/gpt_parameters.h"

namespace mxmaca::layers {

// StashBytesPerMicroBatchTp: bytes of one micro-batch's training stash on ONE TP rank
// (every rank holds the same amount) of a stage with `layout`, right after its F, for
// micro-batches of `micro_batch_size` sequences of config.seq_length tokens, with
// `tp_size` TP ranks and --sequence-parallel = `sequence_parallel` (ignored when
// tp_size == 1). tp_size == 1 gives StashBytesPerMicroBatch exactly.
// Expects a config that passes Validate() and ValidateTensorParallelConfig(config,
// tp_size, sequence_parallel), tp_size >= 1, and a layout inside [0, num_layers]
// (no checks: pure arithmetic, like StashBytesPerMicroBatch).
int64_t StashBytesPerMicroBatchTp(const GptConfig& config, const StageLayout& layout,
                                  int64_t micro_batch_size, int tp_size, bool sequence_parallel,
                                  bool reset_attention_mask = false);

}  // namespace mxmaca::layers

#endif  // MXMACA_LAYERS_STAGE_MEMORY_TP_H_
