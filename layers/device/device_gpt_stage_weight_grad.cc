// layers/device/device_gpt_stage_weight_grad.cc: DeviceGptStage's backward-weight (W)
// and device optimizer (see device_gpt_stage.h "Gradient accumulation").
#include <functional>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "layers/device/device_gpt_stage.h"
#include "layers/device/device_gpt_stage_internal.h"

namespace mxmaca::layers::device {

using internal::RoundUp;

// ---- backward-weight ----

absl::Status DeviceGptStage::BackwardWeight(int64_t micro_batch_id) {
  Slot* slot = FindSlot(micro_batch_id);
  if (slot == nullptr || !slot->training) {
    return absl::NotFoundError(
        absl::StrCat("device stage: no stash for micro-batch ", micro_batch_id));
  }
  if (slot->phase != Slot::Phase::kBackwardInputDone) {
    return absl::FailedPreconditionError(absl::StrCat("BackwardWeight of micro-batch ",
                                                      micro_batch_id, " before its BackwardInput"));
  }
  if (forward_order_.empty() || forward_order_.front() != micro_batch_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device stage: W of micro-batch ", micro_batch_id, " before W of micro-batch ",
        forward_order_.empty() ? -1 : forward_order_.front(),
        ": the device backend adds weight gradients in forward order (no --dynamic-pipeline)"));
  }
  MXMACA_RETURN_IF_ERROR(RunSegment("W", *slot, [&] { return BackwardWeightSegment(slot); }));
  MXMACA_RETURN_IF_ERROR(kernels_->Synchronize());
  forward_order_.pop_front();
  slot->busy = false;
  return absl::OkStatus();
}

absl::Status DeviceGptStage::AccumulateInto(int id,
                                            const std::function<absl::Status(float*)>& accumulate) {
  if (options_.gradient_accumulation_fusion) return accumulate(device_grad(id));
  const int64_t n = store_.info(id).numel;
  MXMACA_RETURN_IF_ERROR(kernels_->Zero(grad_temp_, 4 * n));
  MXMACA_RETURN_IF_ERROR(accumulate(grad_temp_));
  return kernels_->Add(device_grad(id), grad_temp_, device_grad(id), n);
}

// dW [out, in] += dy^T x; dbias [out] += column sums of dy.
absl::Status DeviceGptStage::LinearWeightGrad(const float* dy, const float* x, int64_t t,
                                              int64_t in, int64_t out, int w_id, int b_id) {
  DeviceKernels& k = *kernels_;
  const bool fused = options_.gradient_accumulation_fusion;
  MXMACA_RETURN_IF_ERROR(AccumulateInto(w_id, [&](float* dw) {
    return k.Gemm(true, false, out, in, t, 1.0f, dy, out, x, in, fused ? 1.0f : 0.0f, dw, in);
  }));
  if (b_id < 0) return absl::OkStatus();
  // BiasGrad overwrites: always through the temporary.
  MXMACA_RETURN_IF_ERROR(k.BiasGrad(dy, t, out, grad_temp_));
  return k.Add(device_grad(b_id), grad_temp_, device_grad(b_id), out);
}

// Norm weight gradients (the kernels accumulate): without fusion gamma goes through
// grad_temp_ and beta through grad_temp_ + the 256-byte-aligned h, each then added.
absl::Status DeviceGptStage::NormWeightGrad(const float* dy, const float* x, const float* mean,
                                            const float* rstd, int64_t t, int w_id, int b_id) {
  DeviceKernels& k = *kernels_;
  const int64_t h = config_.hidden_size;
  const bool ln = config_.normalization == Normalization::kLayerNorm;
  if (options_.gradient_accumulation_fusion) {
    if (ln) {
      return k.LayerNormBackwardWeight(dy, x, mean, rstd, t, h, device_grad(w_id),
                                       device_grad(b_id));
    }
    return k.RmsNormBackwardWeight(dy, x, rstd, t, h, device_grad(w_id));
  }
  float* dg = grad_temp_;
  float* db = grad_temp_ + RoundUp(h);
  MXMACA_RETURN_IF_ERROR(k.Zero(grad_temp_, 4 * (RoundUp(h) + h)));
  if (ln) {
    MXMACA_RETURN_IF_ERROR(k.LayerNormBackwardWeight(dy, x, mean, rstd, t, h, dg, db));
  } else {
    MXMACA_RETURN_IF_ERROR(k.RmsNormBackwardWeight(dy, x, rstd, t, h, dg));
  }
  MXMACA_RETURN_IF_ERROR(k.Add(device_grad(w_id), dg, device_grad(w_id), h));
  if (ln) MXMACA_RETURN_IF_ERROR(k.Add(device_grad(b_id), db, device_grad(b_id), h));
  return absl::OkStatus();
}

absl::Status DeviceGptStage::BackwardWeightSegment(Slot* slot) {
  DeviceKernels& k = *kernels_;
  const int64_t t = slot->b * slot->s, h = config_.hidden_size, vp = config_.padded_vocab_size;
  const bool fused = options_.gradient_accumulation_fusion;
  const bool tied_here = embed_temp_ != nullptr;
  if (layout_.has_loss_head) {
    // Output layer: dW [VP, h] = dlogits^T lnf_out. Tied with this stage's embedding: the
    // embedding's W adds its part to the same micro-batch buffer first (gpt_stage.cc).
    if (tied_here && !fused) {
      MXMACA_RETURN_IF_ERROR(k.Gemm(true, false, vp, h, t, 1.0f, slot->logits, vp, slot->lnf_out, h,
                                    0.0f, embed_temp_, h));
    } else {
      MXMACA_RETURN_IF_ERROR(AccumulateInto(ids_.output_weight, [&](float* dw) {
        return k.Gemm(true, false, vp, h, t, 1.0f, slot->logits, vp, slot->lnf_out, h,
                      fused ? 1.0f : 0.0f, dw, h);
      }));
    }
    MXMACA_RETURN_IF_ERROR(NormWeightGrad(slot->d_lnf_out, slot->final_input, slot->lnf_mean,
                                          slot->lnf_rstd, t, ids_.final_norm_weight,
                                          ids_.final_norm_bias));
  }
  for (int i = static_cast<int>(slot->layers.size()) - 1; i >= 0; --i) {
    MXMACA_RETURN_IF_ERROR(LayerBackwardWeight(slot, i));
  }
  if (layout_.has_embedding) {
    if (tied_here && !fused) {
      MXMACA_RETURN_IF_ERROR(
          k.EmbeddingBackward(slot->tokens, t, slot->d_embedding, h, embed_temp_));
      const int64_t n = store_.info(ids_.word_embeddings).numel;
      MXMACA_RETURN_IF_ERROR(k.Add(device_grad(ids_.word_embeddings), embed_temp_,
                                   device_grad(ids_.word_embeddings), n));
    } else {
      MXMACA_RETURN_IF_ERROR(AccumulateInto(ids_.word_embeddings, [&](float* dw) {
        return k.EmbeddingBackward(slot->tokens, t, slot->d_embedding, h, dw);
      }));
    }
    if (ids_.position_embeddings >= 0) {
      MXMACA_RETURN_IF_ERROR(AccumulateInto(ids_.position_embeddings, [&](float* dp) {
        return k.EmbeddingBackward(slot->positions, t, slot->d_embedding, h, dp);
      }));
    }
  }
  return absl::OkStatus();
}

absl::Status DeviceGptStage::LayerBackwardWeight(Slot* slot, int i) {
  const GptConfig& c = config_;
  const LayerParameterIds& id = ids_.layers[i];
  LayerBuffers& l = slot->layers[i];
  const int64_t t = slot->b * slot->s, h = c.hidden_size, qkv_n = c.qkv_size(),
                pj = c.attention_projection_size(), f = c.ffn_hidden_size, f1 = c.fc1_size();
  MXMACA_RETURN_IF_ERROR(LinearWeightGrad(l.d_fc2, l.act_out, t, f, h, id.fc2_weight, id.fc2_bias));
  MXMACA_RETURN_IF_ERROR(
      LinearWeightGrad(l.d_fc1, l.ln2_out, t, h, f1, id.fc1_weight, id.fc1_bias));
  MXMACA_RETURN_IF_ERROR(NormWeightGrad(l.d_ln2_out, l.residual2, l.ln2_mean, l.ln2_rstd, t,
                                        id.mlp_norm_weight, id.mlp_norm_bias));
  MXMACA_RETURN_IF_ERROR(
      LinearWeightGrad(l.d_proj, l.context, t, pj, h, id.proj_weight, id.proj_bias));
  MXMACA_RETURN_IF_ERROR(
      LinearWeightGrad(l.d_qkv, l.ln1_out, t, h, qkv_n, id.qkv_weight, id.qkv_bias));
  return NormWeightGrad(l.d_ln1_out, l.input, l.ln1_mean, l.ln1_rstd, t, id.input_norm_weight,
                        id.input_norm_bias);
}

// ---- optimizer ----

absl::Status DeviceGptStage::ZeroGrads() {
  return kernels_->Zero(grads_, 4 * store_.arena_elements());
}

absl::StatusOr<double> DeviceGptStage::GradNormSquared(const std::function<bool(int)>& counts) {
  const int n = store_.size();
  for (int i = 0; i < n; ++i) {
    MXMACA_RETURN_IF_ERROR(
        kernels_->SumSquares(device_grad(i), store_.info(i).numel, norm_partials_ + i));
  }
  std::vector<double> partials(n);
  MXMACA_RETURN_IF_ERROR(kernels_->CopyToHost(partials.data(), norm_partials_, 8 * n));
  MXMACA_RETURN_IF_ERROR(kernels_->Synchronize());
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    if (counts == nullptr || counts(i)) sum += partials[i];
  }
  return sum;
}

absl::Status DeviceGptStage::ScaleGrads(float factor) {
  return kernels_->Scale(grads_, store_.arena_elements(), factor);
}

absl::Status DeviceGptStage::AdamWStep(float lr, float weight_decay, float beta1, float beta2,
                                       float eps, int64_t step) {
  if (exp_avg_ == nullptr) {  // the first device step: zeroed moments
    const int64_t n = store_.arena_elements();
    MXMACA_ASSIGN_OR_RETURN(exp_avg_, AllocateFloats(n));
    MXMACA_ASSIGN_OR_RETURN(exp_avg_sq_, AllocateFloats(n));
    MXMACA_RETURN_IF_ERROR(kernels_->Zero(exp_avg_, 4 * n));
    MXMACA_RETURN_IF_ERROR(kernels_->Zero(exp_avg_sq_, 4 * n));
    arena_bytes_ += 2 * 4 * n;
  }
  for (int i = 0; i < store_.size(); ++i) {
    const ParameterInfo& info = store_.info(i);
    const int64_t off = info.arena_offset;
    MXMACA_RETURN_IF_ERROR(kernels_->AdamWStep(params_ + off, grads_ + off, exp_avg_ + off,
                                               exp_avg_sq_ + off, info.numel, lr, beta1, beta2, eps,
                                               info.spec.weight_decay ? weight_decay : 0.0f, step));
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::layers::device
