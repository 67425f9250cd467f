// data/gpt_batch.h: a GPT micro-batch from dataset samples: tokens, labels, loss mask,
// position ids and per-query document starts (Megatron-Core gpt_dataset.py
// GPTDataset.__getitem__ and _get_ltor_masks_and_position_ids, core_v0.15.0).
//
// Shapes: B = micro-batch size, S = sequence length; every array is [B, S] row-major.
// Instead of Megatron's [B, 1, S, S] boolean attention mask, the attention kernel takes
// doc_start: query (b, i) may attend to keys j with doc_start[b, i] <= j <= i. Without
// --reset-attention-mask doc_start is 0 (plain causal mask); with it, it is the first
// position after the last end-of-document token before i, which is exactly the causal
// mask with Megatron's blocks `attention_mask[(e + 1):, :(e + 1)] = 0` for each EOD e.
#ifndef MXMACA_DATA_GPT_BATCH_H_
#define MXMACA_DATA_GPT_BATCH_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace mxmaca::data {

// GptMicroBatch: one micro-batch, all arrays [b, s] row-major.
struct GptMicroBatch {
  int64_t b = 0;
  int64_t s = 0;
  std::vector<int32_t> tokens;        // sample[0 .. s-1]
  std::vector<int32_t> labels;        // sample[1 .. s]
  std::vector<int32_t> position_ids;  // 0..s-1, restarting after each EOD if reset
  std::vector<int32_t> doc_start;     // first visible key per query (see above)
  std::vector<float> loss_mask;       // 1, or 0 where tokens == eod and eod_mask_loss
};

// BuildGptMicroBatch: from `samples` [b, s + 1] (b consecutive dataset samples of
// s + 1 tokens) builds the micro-batch. `eod` is the tokenizer's end-of-document id;
// eod_mask_loss zeroes the loss where the *input* token is EOD (as Megatron does);
// reset_position_ids restarts positions at 0 after each EOD; reset_attention_mask keeps
// queries from attending across an EOD. Precondition (checked, aborts with a message:
// callers size the buffer): samples.size() == b * (s + 1), b >= 0, s >= 1.
GptMicroBatch BuildGptMicroBatch(absl::Span<const int32_t> samples, int64_t b, int64_t s,
                                 int32_t eod, bool eod_mask_loss, bool reset_position_ids,
                                 bool reset_attention_mask);

}  // namespace mxmaca::data

#endif  // MXMACA_DATA_GPT_BATCH_H_
