// layers/context_parallel/cp_batch.h: one context-parallel rank's part of a GPT
// micro-batch, and the rule that reduces the language-model loss over the CP ranks.
//
// Slicing (Megatron-Core megatron/core/utils.py get_batch_on_this_cp_rank): the full
// micro-batch (data/gpt_batch.h, every array [b, s]) is built once on the full sequence,
// then CP rank r keeps chunks r and 2 CP - 1 - r of every array (cp_layout.h). Nothing is
// recomputed after slicing, so position ids keep their ORIGINAL values (RoPE sees the
// true positions), doc_start keeps the original first key position of each query's
// document (--reset-attention-mask), and a label is still the token that follows its
// input in the original sample — labels never cross a document boundary or a chunk
// boundary by being re-derived from the local tokens.
//
// Loss (Megatron pretrain_gpt.py loss_func): each rank forms
//   loss_sum = sum_i loss_i * mask_i,   tokens = sum_i mask_i
// over its b s_local tokens, the pairs are summed over the CP ranks (Megatron all-reduces
// [loss_sum, tokens] over the CP / data-parallel-with-CP group) and the loss is
// loss_sum / tokens. A rank whose tokens are all masked contributes (0, 0) — never NaN,
// even when its per-token losses are not finite (masked tokens are skipped, not
// multiplied by 0) — and a micro-batch with no unmasked token anywhere has loss 0.
#ifndef MXMACA_LAYERS_CONTEXT_PARALLEL_CP_BATCH_H_
#define MXMACA_LAYERS_CONTEXT_PARALLEL_CP_BATCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "data/gpt_batch.h"
#include "layers/context_parallel/cp_layout.h"
#include "transport/communicator.h"
#include "transport/process_group.h"

namespace mxmaca::layers::cp {

// SliceMicroBatchForCpRank: CP rank `rank`'s part of `batch`: a GptMicroBatch with the
// same b and s = s_local = batch.s / CP whose arrays are the rank's two chunks of the
// original ones (see above). doc_start stays empty if it is empty in `batch`.
// Errors: InvalidArgument when batch.s != layout.seq, rank is outside [0, CP), b < 1, or
// an array's length is not b s (naming the array and both lengths).
absl::StatusOr<data::GptMicroBatch> SliceMicroBatchForCpRank(const CpLayout& layout, int64_t rank,
                                                             const data::GptMicroBatch& batch);

// CpLossPart: one rank's (or the reduced) loss numerator and denominator.
struct CpLossPart {
  double loss_sum = 0.0;  // sum of loss * mask over unmasked tokens (nats)
  double tokens = 0.0;    // sum of mask (the count of unmasked tokens for a 0/1 mask)

  // Mean: loss_sum / tokens, or 0 when tokens == 0 (nothing to average, never NaN).
  double Mean() const { return tokens > 0.0 ? loss_sum / tokens : 0.0; }
};

// LocalLossPart: this rank's part from per-token losses [n] (fp32, e.g. [b, s_local]
// cross-entropy) and the loss mask [n]; tokens with mask 0 are skipped. Sums in index
// order in double. Errors: InvalidArgument when the lengths differ or a mask value is
// negative or not finite.
absl::StatusOr<CpLossPart> LocalLossPart(const std::vector<float>& per_token_loss,
                                         const std::vector<float>& loss_mask);

// ReduceCpLossParts: the sum of every CP rank's part, in group-rank order (what the
// all-reduce computes, in double).
CpLossPart ReduceCpLossParts(const std::vector<CpLossPart>& parts);

// AllReduceCpLoss: sums `part` over `group` (the CP group, or the data-parallel-with-CP
// group) with Communicator::AllReduceSum of the fp32 pair [loss_sum, tokens] (the
// in-process backend sums in group-rank order), blocking the calling thread until it
// completes. Every member must call it. fp32 keeps the token count exact up to 2^24.
// Errors: the Communicator's error for the all-reduce; DeadlineExceeded after `timeout`.
absl::StatusOr<CpLossPart> AllReduceCpLoss(transport::Communicator* comm,
                                           const transport::ProcessGroup& group,
                                           const CpLossPart& part,
                                           absl::Duration timeout = absl::Minutes(5));

}  // namespace mxmaca::layers::cp

#endif  // MXMACA_LAYERS_CONTEXT_PARALLEL_CP_BATCH_H_
