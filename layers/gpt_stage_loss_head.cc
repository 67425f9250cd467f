// layers/gpt_stage_loss_head.cc: GptStage's loss head backward (gpt_stage.h): the
// vocab-parallel cross-entropy gradient, the output layer's input and weight gradients
// (whole or in sequence chunks, layers/chunked_loss_head.h) and the final norm's.
#include <vector>

#include "base/status_macros.h"
#include "kernels/cpu/cross_entropy.h"
#include "layers/chunked_loss_head.h"
#include "layers/gpt_stage.h"
#include "layers/modules/linear.h"
#include "layers/modules/norm.h"

namespace mxmaca::layers {

namespace cpu = ::mxmaca::kernels::cpu;

absl::Status GptStage::HeadBackwardInput(MicroBatchStash* st, const float* dloss,
                                         float* d_final_input, WeightGradSink* fused_sink) {
  const int64_t t = st->b * st->s, tl = local_tokens(st->b, st->s), h = config_.hidden_size,
                vl = vocab_.rows;
  const bool ln = config_.normalization == Normalization::kLayerNorm;
  // dloss [T]: dL/d(token loss), on the backend (RunBackward; W of a chunked head
  // recomputes it from st->loss_grad_scale).
  if (st->loss_head_chunked) {
    // The chunks' gradients are computed below, chunk by chunk.
  } else if (tp_.size == 1) {
    MXMACA_RETURN_IF_ERROR(kernels_->CrossEntropyBackward(st->logits.data(), st->labels.data(),
                                                          st->lse.data(), dloss, t, vl,
                                                          vocab_.softmax, st->logits.data()));
  } else {
    // Shard-local targets (-1: not in this shard) with the global logsumexp: exactly the
    // vocab-parallel gradient (cross_entropy.h).
    std::vector<int32_t> local_targets(t), host_labels;
    const int32_t* labels = st->labels.data();
    if (device_ != nullptr) {  // the labels to the host (TP on a device: no segment graphs)
      host_labels.resize(t);
      MXMACA_RETURN_IF_ERROR(Download(host_labels.data(), st->labels.data(), 4 * t));
      MXMACA_RETURN_IF_ERROR(kernels_->Synchronize());
      labels = host_labels.data();
    }
    for (int64_t i = 0; i < t; ++i) {
      const int64_t c = labels[i] - vocab_.start;
      local_targets[i] = c >= 0 && c < vocab_.real ? static_cast<int32_t>(c) : -1;
    }
    if (device_ == nullptr) {
      cpu::CrossEntropyBackward(ctx_, st->logits.data(), local_targets.data(), st->lse.data(),
                                dloss, t, vl, vocab_.softmax, st->logits.data());
    } else {
      // The same gradient by the backend's kernel (a target of -1 matches no column).
      int32_t* targets = DeviceLocalTargets();
      MXMACA_RETURN_IF_ERROR(Upload(targets, local_targets.data(), 4 * t));
      MXMACA_RETURN_IF_ERROR(kernels_->CrossEntropyBackward(st->logits.data(), targets,
                                                            st->lse.data(), dloss, t, vl,
                                                            vocab_.softmax, st->logits.data()));
      MXMACA_RETURN_IF_ERROR(kernels_->Synchronize());
    }
  }
  if (!st->loss_head_chunked) st->lse.Free();
  // Output layer's input gradient: partial over the vocab shards, summed over TP
  // (reduce-scattered to this rank's rows with SP).
  st->d_lnf_out.Allocate(&tracker_, tl * h);
  float* partial = tp_.sp() ? sp_full_.Get(t * h) : st->d_lnf_out.data();
  if (st->loss_head_chunked) {
    // Fused B+W: the output weight's gradient in the same pass over the chunks (one
    // recomputation of the logits instead of two); HeadBackwardWeight then skips it.
    float* dw = fused_sink != nullptr ? fused_sink->Begin(ids_.output_weight) : nullptr;
    MXMACA_RETURN_IF_ERROR(
        ChunkedLossHeadBackward(ctx_, tp_, vocab_, config_.loss_chunk_tokens, t, h,
                                st->lnf_out.data(), backend_param(ids_.output_weight),
                                st->labels.data(), st->lse.data(), dloss, partial, dw, &tracker_));
    if (fused_sink != nullptr &&
        !(ids_.output_weight == ids_.word_embeddings && layout_.has_embedding)) {
      fused_sink->End(ids_.output_weight);
    }
  } else {
    MXMACA_RETURN_IF_ERROR(modules::LinearBackwardInput(
        *kernels_, st->logits.data(), backend_param(ids_.output_weight), t, h, vl, partial));
  }
  if (tp_.sp()) {
    MXMACA_RETURN_IF_ERROR(
        ReduceScatterToSequenceParallelRegion(tp_, partial, st->b, st->s, h, st->d_lnf_out.data()));
  } else {
    MXMACA_RETURN_IF_ERROR(ReduceFromTensorParallelRegion(tp_, partial, t * h));
  }
  return modules::Norm(config_).BackwardInput(
      *kernels_, st->d_lnf_out.data(), st->final_input.data(),
      backend_param(ids_.final_norm_weight), ln ? st->lnf_mean.data() : nullptr,
      st->lnf_rstd.data(), tl, h, d_final_input, gamma_scratch_.Get(h));
}

absl::Status GptStage::HeadBackwardWeight(MicroBatchStash* st, WeightGradSink* sink,
                                          bool output_weight_done) {
  const int64_t t = st->b * st->s, tl = local_tokens(st->b, st->s), h = config_.hidden_size,
                vl = vocab_.rows;
  const bool ln = config_.normalization == Normalization::kLayerNorm;
  // Tied with this stage's embedding: the embedding's W adds its part before End.
  const bool tied_here = ids_.output_weight == ids_.word_embeddings && layout_.has_embedding;
  if (!output_weight_done) {
    float* dw = sink->Begin(ids_.output_weight);
    if (st->loss_head_chunked) {
      dloss_.resize(t);
      for (int64_t i = 0; i < t; ++i) dloss_[i] = st->loss_grad_scale * st->loss_mask.data()[i];
      MXMACA_RETURN_IF_ERROR(ChunkedLossHeadBackward(
          ctx_, tp_, vocab_, config_.loss_chunk_tokens, t, h, st->lnf_out.data(),
          backend_param(ids_.output_weight), st->labels.data(), st->lse.data(), dloss_.data(),
          nullptr, dw, &tracker_));
    } else {
      MXMACA_RETURN_IF_ERROR(
          modules::LinearBackwardWeight(*kernels_, st->logits.data(), st->lnf_out.data(), t, h, vl,
                                        dw, nullptr, sink->accumulates(ids_.output_weight)));
    }
    if (!tied_here) sink->End(ids_.output_weight);
  }
  float* dg = sink->Begin(ids_.final_norm_weight);
  float* db = ln ? sink->Begin(ids_.final_norm_bias) : nullptr;
  MXMACA_RETURN_IF_ERROR(modules::Norm(config_).BackwardWeight(
      *kernels_, st->d_lnf_out.data(), st->final_input.data(), ln ? st->lnf_mean.data() : nullptr,
      st->lnf_rstd.data(), tl, h, dg, db));
  if (tp_.sp()) {
    // This rank's rows only: sum over TP so every rank holds the same gradient.
    MXMACA_RETURN_IF_ERROR(AllReduceSum(tp_, dg, h));
    if (db != nullptr) MXMACA_RETURN_IF_ERROR(AllReduceSum(tp_, db, h));
  }
  sink->End(ids_.final_norm_weight);
  if (ln) sink->End(ids_.final_norm_bias);
  for (StashBuffer<float>* buf : {&st->logits, &st->lse, &st->lnf_out, &st->lnf_mean, &st->lnf_rstd,
                                  &st->d_lnf_out, &st->final_input, &st->loss_mask}) {
    buf->Free();
  }
  st->labels.Free();
  return absl::OkStatus();
}

}  // namespace mxmaca::layers
