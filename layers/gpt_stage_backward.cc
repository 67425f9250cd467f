// layers/gpt_stage_backward.cc: GptStage's backward-input (B) and backward-weight (W)
// (gpt_stage.h): recomputation, the weight-gradient sinks of the CPU backend and the
// micro-batch order of gradient accumulation.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/elementwise.h"
#include "layers/gpt_stage.h"
#include "layers/modules/embedding.h"

namespace mxmaca::layers {

namespace cpu = ::mxmaca::kernels::cpu;

namespace {

// DirectSink: each tensor's micro-batch gradient in its own zeroed buffer, added to the
// arena at End (grad += g, elementwise). Buffers come from and return to `pool` (the
// stage's), so their pages are reused across tensors and micro-batches.
class DirectSink : public WeightGradSink {
 public:
  DirectSink(ParameterStore* store, const kernels::ExecContext& ctx,
             std::vector<std::vector<float>>* pool)
      : store_(store), ctx_(ctx), pool_(pool) {}
  ~DirectSink() override {
    for (auto& [id, buf] : open_) pool_->push_back(std::move(buf));
  }
  float* Begin(int id) override {
    auto [it, inserted] = open_.try_emplace(id);
    if (inserted) {
      if (!pool_->empty()) {
        it->second = std::move(pool_->back());
        pool_->pop_back();
      }
      it->second.assign(store_->info(id).numel, 0.0f);
    }
    return it->second.data();
  }
  void End(int id) override {
    auto it = open_.find(id);
    float* g = store_->grad(id);
    cpu::Add(ctx_, g, it->second.data(), g, store_->info(id).numel);
    pool_->push_back(std::move(it->second));
    open_.erase(it);
  }

 private:
  ParameterStore* store_;
  kernels::ExecContext ctx_;
  std::vector<std::vector<float>>* pool_;
  absl::flat_hash_map<int, std::vector<float>> open_;
};

// PendingSink: the micro-batch gradient into an arena-shaped zeroed buffer, added to the
// arena later (GptStage::RetireInOrder) with the same elementwise grad += g.
class PendingSink : public WeightGradSink {
 public:
  PendingSink(const ParameterStore* store, float* pending) : store_(store), pending_(pending) {}
  float* Begin(int id) override { return pending_ + store_->info(id).arena_offset; }
  void End(int) override {}

 private:
  const ParameterStore* store_;
  float* pending_;
};

}  // namespace

absl::Status GptStage::RecomputeChunk(const Chunk& chunk, MicroBatchStash* st) {
  const int64_t tl = local_tokens(st->b, st->s), h = config_.hidden_size;
  const bool selective = config_.recompute_granularity == RecomputeGranularity::kSelective;
  for (int i = chunk.begin; i < chunk.end; ++i) {
    const LayerCall call = MakeCall(*st, i, true);
    float* out;
    if (i + 1 < chunk.end) {
      st->layers[i + 1].input.Allocate(&tracker_, tl * h);
      out = st->layers[i + 1].input.data();
    } else {
      // The chunk's output was passed on in F already: computed again and discarded.
      out = device_ != nullptr ? DeviceStageOutput() : recompute_discard_.Get(tl * h);
    }
    MXMACA_RETURN_IF_ERROR(layers_[i].Forward(call, &st->layers[i], out,
                                              selective ? ForwardKeep::kNoProbs : ForwardKeep::kAll,
                                              &scratch_));
  }
  return absl::OkStatus();
}

absl::Status GptStage::EmbeddingBackwardWeight(MicroBatchStash* st, WeightGradSink* sink) {
  // d_embedding is the full [T, h] (gathered under SP), the same on every TP rank.
  const int64_t t = st->b * st->s, h = config_.hidden_size;
  float* dw = sink->Begin(ids_.word_embeddings);
  MXMACA_RETURN_IF_ERROR(modules::WordEmbeddingBackward(*kernels_, VocabRowsOf(), st->tokens.data(),
                                                        st->d_embedding.data(), t, h, dw));
  sink->End(ids_.word_embeddings);
  if (ids_.position_embeddings >= 0) {
    float* dp = sink->Begin(ids_.position_embeddings);
    MXMACA_RETURN_IF_ERROR(modules::PositionEmbeddingBackward(*kernels_, st->position_ids.data(),
                                                              st->d_embedding.data(), t, h, dp));
    sink->End(ids_.position_embeddings);
  }
  st->d_embedding.Free();
  st->tokens.Free();
  st->position_ids.Free();
  return absl::OkStatus();
}

modules::VocabRows GptStage::VocabRowsOf() const {
  return modules::VocabRows{tp_.size > 1, vocab_.start, vocab_.rows};
}

std::unique_ptr<WeightGradSink> GptStage::MakeSink(MicroBatchStash* st, bool direct) {
  if (device_ != nullptr) return MakeDeviceSink(*st, direct);
  if (direct) return std::make_unique<DirectSink>(&store_, ctx_, &sink_pool_);
  st->pending_grads.AllocateZeroed(&tracker_, static_cast<int64_t>(store_.grads_arena().size()));
  return std::make_unique<PendingSink>(&store_, st->pending_grads.data());
}

absl::Status GptStage::RetireInOrder() {
  while (!forward_order_.empty()) {
    const int64_t id = forward_order_.front();
    MicroBatchStash* st = FindStash(id);
    if (st == nullptr || st->phase != MicroBatchStash::Phase::kWeightGradPending) break;
    if (device_ != nullptr) {
      const int64_t n = store_.arena_elements();
      MXMACA_RETURN_IF_ERROR(kernels_->Add(grads_, DevicePendingGrads(*st), grads_, n));
    } else {
      absl::Span<float> arena = store_.grads_arena();
      cpu::Add(ctx_, arena.data(), st->pending_grads.data(), arena.data(),
               static_cast<int64_t>(arena.size()));
    }
    forward_order_.pop_front();
    ReleaseStash(id);
  }
  return absl::OkStatus();
}

// RetireWeightGrads: after W (or fused B+W) of `st`: its gradient is in the arena (direct)
// or pending until the earlier micro-batches' are.
absl::Status GptStage::RetireWeightGrads(MicroBatchStash* st, bool direct) {
  st->doc_start.Free();
  if (!direct) {
    st->phase = MicroBatchStash::Phase::kWeightGradPending;
    return absl::OkStatus();
  }
  const int64_t id = st->micro_batch_id;
  forward_order_.pop_front();
  ReleaseStash(id);
  return RetireInOrder();
}

absl::Status GptStage::RunBackward(int64_t micro_batch_id, absl::Span<const float> d_output,
                                   float loss_grad_scale, std::vector<float>* d_input, bool fused) {
  MicroBatchStash* st = FindStash(micro_batch_id);
  if (st == nullptr) {
    return absl::NotFoundError(absl::StrCat("no stash for micro-batch ", micro_batch_id,
                                            " (Forward not run, or W already done)"));
  }
  if (st->phase != MicroBatchStash::Phase::kForwardDone) {
    return absl::FailedPreconditionError(
        absl::StrCat("BackwardInput of micro-batch ", micro_batch_id, " already ran"));
  }
  const int64_t t = st->b * st->s, tl = local_tokens(st->b, st->s), h = config_.hidden_size;
  if (!layout_.has_loss_head && static_cast<int64_t>(d_output.size()) != tl * h) {
    return absl::InvalidArgumentError(
        absl::StrCat("d_output: got ", d_output.size(), " elements, expected ", tl * h));
  }
  MXMACA_RETURN_IF_ERROR(EnsureCpAttention(st->b));
  const bool direct = !forward_order_.empty() && forward_order_.front() == micro_batch_id;
  std::unique_ptr<WeightGradSink> sink;
  if (fused) sink = MakeSink(st, direct);

  // The inputs where the backend reads them, before the segment: the incoming gradient
  // (into the first of the two buffers B alternates between), or the loss gradient.
  float* grad_a = grad_a_.Get(tl * h);
  float* grad_b = grad_b_.Get(tl * h);
  MXMACA_RETURN_IF_ERROR(PrepareRopePositions(st->b, st->s));
  const float* dloss = nullptr;
  if (layout_.has_loss_head) {
    st->loss_grad_scale = loss_grad_scale;
    dloss_.resize(t);
    for (int64_t i = 0; i < t; ++i) dloss_[i] = loss_grad_scale * st->loss_mask.data()[i];
    float* backend_dloss = device_ != nullptr ? DeviceLossGrad() : dloss_.data();
    MXMACA_RETURN_IF_ERROR(Upload(backend_dloss, dloss_.data(), 4 * t));
    dloss = backend_dloss;
  } else {
    MXMACA_RETURN_IF_ERROR(Upload(grad_a, d_output.data(), 4 * tl * h));
  }
  // Fused B+W is its own segment ("BW"), and so is W into a pending buffer: each does
  // other device work than the plain op on the same slot.
  const char* op = !fused ? "B" : direct ? "BW" : "BW-pending";
  MXMACA_RETURN_IF_ERROR(RunSegment(op, *st, [&] {
    return BackwardCompute(st, dloss, grad_a, grad_b, fused ? sink.get() : nullptr);
  }));
  // Each layer's B swaps the two buffers: the stage's input gradient is in grad_a after
  // an even number of layers.
  const float* d_last = layers_.size() % 2 == 0 ? grad_a : grad_b;
  if (d_input != nullptr) {
    if (layout_.has_embedding) {
      d_input->clear();
    } else {
      d_input->resize(tl * h);
      MXMACA_RETURN_IF_ERROR(Download(d_input->data(), d_last, 4 * tl * h));
    }
  }
  MXMACA_RETURN_IF_ERROR(kernels_->Synchronize());
  if (sink != nullptr) MXMACA_RETURN_IF_ERROR(sink->status());
  MXMACA_RETURN_IF_ERROR(tracker_.cap_error());
  st->phase = MicroBatchStash::Phase::kBackwardInputDone;
  if (fused) return RetireWeightGrads(st, direct);
  return absl::OkStatus();
}

absl::Status GptStage::BackwardCompute(MicroBatchStash* st, const float* dloss, float* grad_a,
                                       float* grad_b, WeightGradSink* sink) {
  const int64_t micro_batch_id = st->micro_batch_id;
  const int64_t t = st->b * st->s, tl = local_tokens(st->b, st->s), h = config_.hidden_size;
  const bool fused = sink != nullptr;
  float* d_cur = grad_a;
  float* d_next = grad_b;
  if (layout_.has_loss_head) {
    tracker_.set_activity("the backward of the loss head", -1, micro_batch_id);
    MXMACA_RETURN_IF_ERROR(HeadBackwardInput(st, dloss, d_cur, sink));
    if (fused) MXMACA_RETURN_IF_ERROR(HeadBackwardWeight(st, sink, st->loss_head_chunked));
  }
  for (auto chunk = chunks_.rbegin(); chunk != chunks_.rend(); ++chunk) {
    if (chunk->recompute) {
      tracker_.set_activity("the recomputation", layout_.first_layer + chunk->begin,
                            micro_batch_id);
      MXMACA_RETURN_IF_ERROR(RecomputeChunk(*chunk, st));
    }
    for (int i = chunk->end - 1; i >= chunk->begin; --i) {
      const LayerCall call = MakeCall(*st, i, true);
      MXMACA_RETURN_IF_ERROR(tracker_.cap_error());
      tracker_.set_activity("the backward", call.global_layer, micro_batch_id);
      MXMACA_RETURN_IF_ERROR(
          layers_[i].BackwardInput(call, &st->layers[i], d_cur, d_next, &scratch_));
      std::swap(d_cur, d_next);
      if (fused) MXMACA_RETURN_IF_ERROR(layers_[i].BackwardWeight(call, &st->layers[i], sink));
    }
  }
  if (!layout_.has_embedding) return absl::OkStatus();
  // d_embedding: the gradient of the embedding sum, full [T, h] (under SP the local
  // rows' dropout backward, then gathered: the conjugate of the forward scatter).
  st->d_embedding.Allocate(&tracker_, t * h);
  float* local = tp_.sp() ? sp_local_.Get(tl * h) : st->d_embedding.data();
  if (config_.hidden_dropout > 0.0f) {
    kernels::RngKey host_key;
    MXMACA_RETURN_IF_ERROR(StageDropoutBackward(d_cur, local, *st, &host_key));
  } else {
    MXMACA_RETURN_IF_ERROR(kernels_->CopyDeviceToDevice(local, d_cur, 4 * tl * h));
  }
  if (tp_.sp()) {
    MXMACA_RETURN_IF_ERROR(
        GatherFromSequenceParallelRegion(tp_, local, st->b, st->s, h, st->d_embedding.data()));
  }
  if (fused) MXMACA_RETURN_IF_ERROR(EmbeddingBackwardWeight(st, sink));
  return absl::OkStatus();
}

absl::Status GptStage::BackwardInput(int64_t micro_batch_id, absl::Span<const float> d_output,
                                     float loss_grad_scale, std::vector<float>* d_input) {
  return RunBackward(micro_batch_id, d_output, loss_grad_scale, d_input, /*fused=*/false);
}

absl::Status GptStage::Backward(int64_t micro_batch_id, absl::Span<const float> d_output,
                                float loss_grad_scale, std::vector<float>* d_input) {
  return RunBackward(micro_batch_id, d_output, loss_grad_scale, d_input, /*fused=*/true);
}

absl::Status GptStage::BackwardWeight(int64_t micro_batch_id) {
  MicroBatchStash* st = FindStash(micro_batch_id);
  if (st == nullptr) {
    return absl::NotFoundError(absl::StrCat("no stash for micro-batch ", micro_batch_id));
  }
  if (st->phase != MicroBatchStash::Phase::kBackwardInputDone) {
    return absl::FailedPreconditionError(
        absl::StrCat("BackwardWeight of micro-batch ", micro_batch_id,
                     st->phase == MicroBatchStash::Phase::kForwardDone ? " before its BackwardInput"
                                                                       : " ran twice"));
  }
  const bool direct = !forward_order_.empty() && forward_order_.front() == micro_batch_id;
  std::unique_ptr<WeightGradSink> sink = MakeSink(st, direct);
  tracker_.set_activity("the weight gradient", -1, micro_batch_id);
  MXMACA_RETURN_IF_ERROR(RunSegment(direct ? "W" : "W-pending", *st, [&]() -> absl::Status {
    if (layout_.has_loss_head) MXMACA_RETURN_IF_ERROR(HeadBackwardWeight(st, sink.get()));
    for (int i = static_cast<int>(layers_.size()) - 1; i >= 0; --i) {
      MXMACA_RETURN_IF_ERROR(
          layers_[i].BackwardWeight(MakeCall(*st, i, true), &st->layers[i], sink.get()));
    }
    if (layout_.has_embedding) MXMACA_RETURN_IF_ERROR(EmbeddingBackwardWeight(st, sink.get()));
    return sink->status();
  }));
  MXMACA_RETURN_IF_ERROR(kernels_->Synchronize());
  MXMACA_RETURN_IF_ERROR(sink->status());
  MXMACA_RETURN_IF_ERROR(tracker_.cap_error());
  return RetireWeightGrads(st, direct);
}

}  // namespace mxmaca::layers
