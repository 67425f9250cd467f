// layers/device/device_gpt_stage_weight_grad.cc: DeviceGptStage's backward-weight (W)
// and device optimizer (see device_gpt_stage.h "Gradient accumulation").
#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "layers/device/device_gpt_stage.h"
#include "layers/device/device_gpt_stage_internal.h"
#include "layers/modules/embedding.h"
#include "layers/modules/linear.h"
#include "layers/modules/norm.h"

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

// GradSink: transformer_layer.h's WeightGradSink over the device gradient arena. Each
// tensor's micro-batch gradient goes to a zeroed piece of grad_temp_ and is added to the
// arena at End (GptStage's DirectSink, the same elementwise grad += g); with gradient
// accumulation fusion the 2-D weights are the arena itself (accumulates: beta = 1). At
// most two tensors are open at once (weight and bias, gamma and beta); the pieces are
// reused once all are closed (the device runs the adds before later work in stream
// order). Errors of the enqueued Zero / Add calls are kept and returned by status().
class DeviceGptStage::GradSink : public WeightGradSink {
 public:
  explicit GradSink(DeviceGptStage* stage) : stage_(stage) {}
  float* Begin(int id) override {
    if (accumulates(id)) return stage_->device_grad(id);
    for (const Open& o : open_) {
      if (o.id == id) return o.buffer;
    }
    const int64_t n = stage_->store_.info(id).numel;
    if (used_ + RoundUp(n) > stage_->grad_temp_floats_) {
      Fail(absl::InternalError(absl::StrCat("device stage: gradient temporary of ",
                                            stage_->grad_temp_floats_, " floats too small for ",
                                            stage_->store_.info(id).spec.name)));
      return stage_->grad_temp_;
    }
    float* buffer = stage_->grad_temp_ + used_;
    used_ += RoundUp(n);
    open_.push_back({id, buffer});
    Fail(stage_->kernels_->Zero(buffer, 4 * n));
    return buffer;
  }
  void End(int id) override {
    if (accumulates(id)) return;
    for (size_t i = 0; i < open_.size(); ++i) {
      if (open_[i].id != id) continue;
      const int64_t n = stage_->store_.info(id).numel;
      float* g = stage_->device_grad(id);
      Fail(stage_->kernels_->Add(g, open_[i].buffer, g, n));
      open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
    if (open_.empty()) used_ = 0;
  }
  bool accumulates(int id) const override {
    return stage_->options_.gradient_accumulation_fusion &&
           stage_->store_.info(id).spec.shape.size() == 2;
  }
  const absl::Status& status() const { return status_; }

 private:
  struct Open {
    int id;
    float* buffer;
  };
  void Fail(absl::Status s) {
    if (status_.ok() && !s.ok()) status_ = std::move(s);
  }
  DeviceGptStage* stage_;
  std::vector<Open> open_;
  int64_t used_ = 0;
  absl::Status status_;
};

absl::Status DeviceGptStage::BackwardWeightSegment(Slot* slot) {
  DeviceKernels& k = *kernels_;
  const int64_t t = slot->b * slot->s, h = config_.hidden_size, vp = config_.padded_vocab_size;
  const bool fused = options_.gradient_accumulation_fusion;
  const bool tied_here = embed_temp_ != nullptr;
  if (layout_.has_loss_head) {
    // Output layer: dW [VP, h] = dlogits^T lnf_out. Tied with this stage's embedding: the
    // embedding's W adds its part to the same micro-batch buffer first (gpt_stage.cc).
    if (tied_here && !fused) {
      MXMACA_RETURN_IF_ERROR(modules::LinearBackwardWeight(k, slot->logits, slot->lnf_out, t, h, vp,
                                                           embed_temp_, nullptr));
    } else {
      MXMACA_RETURN_IF_ERROR(AccumulateInto(ids_.output_weight, [&](float* dw) {
        return modules::LinearBackwardWeight(k, slot->logits, slot->lnf_out, t, h, vp, dw, nullptr,
                                             fused);
      }));
    }
    GradSink sink(this);
    const bool ln = config_.normalization == Normalization::kLayerNorm;
    float* dg = sink.Begin(ids_.final_norm_weight);
    float* db = ln ? sink.Begin(ids_.final_norm_bias) : nullptr;
    MXMACA_RETURN_IF_ERROR(modules::Norm(config_).BackwardWeight(
        k, slot->d_lnf_out, slot->final_input, slot->lnf_mean, slot->lnf_rstd, t, h, dg, db));
    sink.End(ids_.final_norm_weight);
    if (ln) sink.End(ids_.final_norm_bias);
    MXMACA_RETURN_IF_ERROR(sink.status());
  }

  for (int i = static_cast<int>(slot->layers.size()) - 1; i >= 0; --i) {
    GradSink sink(this);
    MXMACA_RETURN_IF_ERROR(
        layers_[i].BackwardWeight(LayerCallFor(*slot, i, true), &slot->layers[i], &sink));
    MXMACA_RETURN_IF_ERROR(sink.status());
  }
  if (layout_.has_embedding) {
    if (tied_here && !fused) {
      MXMACA_RETURN_IF_ERROR(modules::WordEmbeddingBackward(k, modules::VocabRows{}, slot->tokens,
                                                            slot->d_embedding, t, h, embed_temp_));
      const int64_t n = store_.info(ids_.word_embeddings).numel;
      MXMACA_RETURN_IF_ERROR(k.Add(device_grad(ids_.word_embeddings), embed_temp_,
                                   device_grad(ids_.word_embeddings), n));
    } else {
      MXMACA_RETURN_IF_ERROR(AccumulateInto(ids_.word_embeddings, [&](float* dw) {
        return modules::WordEmbeddingBackward(k, modules::VocabRows{}, slot->tokens,
                                              slot->d_embedding, t, h, dw);
      }));
    }
    if (ids_.position_embeddings >= 0) {
      MXMACA_RETURN_IF_ERROR(AccumulateInto(ids_.position_embeddings, [&](float* dp) {
        return modules::PositionEmbeddingBackward(k, slot->positions, slot->d_embedding, t, h, dp);
      }));
    }
  }
  return absl::OkStatus();
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
