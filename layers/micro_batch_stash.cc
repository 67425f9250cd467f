// layers/micro_batch_stash.cc
#include "layers/micro_batch_stash.h"

namespace mxmaca::layers {

int64_t LayerStash::bytes() const {
  return input.bytes() + ln1_out.bytes() + ln1_mean.bytes() + ln1_rstd.bytes() + q.bytes() +
         k.bytes() + v.bytes() + probs.bytes() + context.bytes() + residual2.bytes() +
         ln2_out.bytes() + ln2_mean.bytes() + ln2_rstd.bytes() + fc1_out.bytes() +
         act_out.bytes() + d_qkv.bytes() + d_ln1_out.bytes() + d_proj.bytes() +
         d_ln2_out.bytes() + d_fc1.bytes() + d_fc2.bytes();
}

void LayerStash::FreeAllButInput() {
  for (StashBuffer<float>* buf :
       {&ln1_out, &ln1_mean, &ln1_rstd, &q, &k, &v, &probs, &context, &residual2, &ln2_out,
        &ln2_mean, &ln2_rstd, &fc1_out, &act_out, &d_qkv, &d_ln1_out, &d_proj, &d_ln2_out,
        &d_fc1, &d_fc2}) {
    buf->Free();
  }
}

void LayerStash::FreeAll() {
  FreeAllButInput();
  input.Free();
}

int64_t MicroBatchStash::bytes() const {
  int64_t n = tokens.bytes() + position_ids.bytes() + doc_start.bytes() + labels.bytes() +
              loss_mask.bytes() + d_embedding.bytes() + final_input.bytes() +
              lnf_out.bytes() + lnf_mean.bytes() + lnf_rstd.bytes() + logits.bytes() +
              lse.bytes() + d_lnf_out.bytes() + pending_grads.bytes();
  for (const LayerStash& l : layers) n += l.bytes();
  return n;
}

}  // namespace mxmaca::layers
