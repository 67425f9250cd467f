// data/gpt_batch.cc: see gpt_batch.h.
#include "data/gpt_batch.h"

#include <cstdio>
#include <cstdlib>

namespace mxmaca::data {

GptMicroBatch BuildGptMicroBatch(absl::Span<const int32_t> samples, int64_t b, int64_t s,
                                 int32_t eod, bool eod_mask_loss, bool reset_position_ids,
                                 bool reset_attention_mask) {
  if (b < 0 || s < 1 || static_cast<int64_t>(samples.size()) != b * (s + 1)) {
    std::fprintf(stderr, "BuildGptMicroBatch: %zu tokens given for b=%lld samples of s+1=%lld\n",
                 samples.size(), static_cast<long long>(b), static_cast<long long>(s + 1));
    std::abort();
  }
  GptMicroBatch batch;
  batch.b = b;
  batch.s = s;
  const size_t n = static_cast<size_t>(b * s);
  batch.tokens.resize(n);
  batch.labels.resize(n);
  batch.position_ids.resize(n);
  batch.doc_start.resize(n);
  batch.loss_mask.resize(n);
  for (int64_t row = 0; row < b; ++row) {
    const int32_t* sample = samples.data() + row * (s + 1);
    const int64_t base = row * s;
    // The first position of the current document (after the last EOD seen).
    int64_t start = 0;
    for (int64_t i = 0; i < s; ++i) {
      const int32_t token = sample[i];
      batch.tokens[base + i] = token;
      batch.labels[base + i] = sample[i + 1];
      batch.loss_mask[base + i] = (eod_mask_loss && token == eod) ? 0.0f : 1.0f;
      batch.position_ids[base + i] = static_cast<int32_t>(reset_position_ids ? i - start : i);
      batch.doc_start[base + i] = static_cast<int32_t>(reset_attention_mask ? start : 0);
      // An EOD ends its document: it belongs to the positions before it.
      if (token == eod) start = i + 1;
    }
  }
  return batch;
}

}  // namespace mxmaca::data
