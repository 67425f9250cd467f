// layers/gpt_stage_device.cc: GptStage on a device backend (gpt_stage.h "Backends"):
// CreateOnDevice, the device arenas and per-op buffers, the micro-batch slots, the
// gradient sink over the device arena, and the arena-wide operations (transfers, zero,
// norm, scale, AdamW) that both backends share.
#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "layers/gpt_stage.h"
#include "layers/gpt_stage_device_state.h"

namespace mxmaca::layers {

namespace {

constexpr int64_t kAlignFloats = 64;  // 256 bytes: every buffer of a slot starts aligned

int64_t RoundUp(int64_t n) { return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

// FloatCarver: hands out consecutive 256-byte-aligned pieces of one allocation (or, with
// base == nullptr, only counts how many floats the pieces need).
class FloatCarver {
 public:
  explicit FloatCarver(float* base) : base_(base) {}
  float* Take(int64_t n) {
    float* p = base_ == nullptr ? nullptr : base_ + used_;
    used_ += RoundUp(std::max<int64_t>(n, 1));
    return p;
  }
  int32_t* TakeInts(int64_t n) { return reinterpret_cast<int32_t*>(Take(n)); }
  int64_t used() const { return used_; }

 private:
  float* base_;
  int64_t used_ = 0;
};

// A slot's dropout keys: [0] the embedding's, then per local layer i its three
// (LayerDropoutKeyIndex order).
int NumSlotKeys(int num_layers) { return 1 + 3 * num_layers; }
int SlotKeyIndex(int local_layer, DropoutSite site) {
  if (local_layer < 0) return 0;
  return 1 + 3 * local_layer + LayerDropoutKeyIndex(site);
}

}  // namespace

GptStage::~GptStage() {
  if (device_ != nullptr) {
    (void)kernels_->Synchronize();
    device_->slots.clear();  // their host buffers return to tracker_ while it exists
  }
  for (void* p : backend_allocations_) kernels_->Free(p);
}

absl::StatusOr<std::unique_ptr<GptStage>> GptStage::CreateOnDevice(
    const GptConfig& config, const StageLayout& layout, device::DeviceKernels* kernels,
    const DeviceStageOptions& options, const TensorParallelContext* tp) {
  if (kernels == nullptr) return absl::InvalidArgumentError("device stage: no DeviceKernels");
  MXMACA_RETURN_IF_ERROR(config.Validate());
  if (config.moe != nullptr) {
    return absl::InvalidArgumentError(
        "the device backend has no MoE layers yet (--num-experts); use --device cpu");
  }
  if (config.apply_residual_connection_post_layernorm) {
    return absl::InvalidArgumentError(
        "--apply-residual-connection-post-layernorm is not supported");
  }
  DeviceStageOptions opts = options;
  if (opts.seq_length == 0) opts.seq_length = config.seq_length;
  if (opts.micro_batch_size <= 0 || opts.seq_length <= 0 || opts.seq_length > config.seq_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device stage: slot size micro_batch_size ", opts.micro_batch_size, " x seq_length ",
        opts.seq_length, ", expected both > 0 and seq_length <= --seq-length ", config.seq_length));
  }
  if (opts.fused_attention && !kernels->has_fused_attention(config.head_dim())) {
    return absl::InvalidArgumentError(
        absl::StrCat("device stage: fused attention requested but the ", kernels->name(),
                     " backend has none for head dim ", config.head_dim()));
  }
  TensorParallelContext device_tp;
  if (tp != nullptr) device_tp = *tp;
  device_tp.device = kernels;  // its collectives stage device tensors through the host
  MXMACA_ASSIGN_OR_RETURN(
      std::unique_ptr<GptStage> stage,
      CreateOn(config, layout, opts.arena_multiple, &device_tp, nullptr, nullptr, kernels));
  stage->InitializeParameters();
  MXMACA_RETURN_IF_ERROR(stage->InitDevice(opts));
  return stage;
}

absl::StatusOr<float*> GptStage::AllocateBackend(int64_t floats) {
  MXMACA_ASSIGN_OR_RETURN(void* p, kernels_->Allocate(std::max<int64_t>(floats, 1) * 4));
  backend_allocations_.push_back(p);
  return static_cast<float*>(p);
}

const DeviceStageOptions& GptStage::device_options() const { return device_->options; }

absl::Status GptStage::InitDevice(const DeviceStageOptions& options) {
  device_ = std::make_unique<DeviceState>();
  DeviceState& d = *device_;
  d.options = options;
  const int64_t n = store_.arena_elements();
  d.arena_bytes = 2 * 4 * n;  // parameters and gradients (+2 x once AdamWStep ran)
  MXMACA_ASSIGN_OR_RETURN(params_, AllocateBackend(n));
  MXMACA_ASSIGN_OR_RETURN(grads_, AllocateBackend(n));
  MXMACA_RETURN_IF_ERROR(kernels_->Zero(grads_, 4 * n));
  // grad_temp: every tensor without fusion; with it only the 1-D ones (bias gradients,
  // which BiasGrad overwrites, and the norms'). At most two are open at once.
  int64_t temp = 2 * RoundUp(config_.hidden_size), widest = 0;
  for (int i = 0; i < store_.size(); ++i) {
    const ParameterInfo& info = store_.info(i);
    if (!options.gradient_accumulation_fusion || info.spec.shape.size() == 1) {
      temp = std::max(temp, info.numel);
      widest = std::max(widest, RoundUp(info.numel));
    }
  }
  d.grad_temp_floats = std::max(temp, 2 * widest);
  MXMACA_ASSIGN_OR_RETURN(d.grad_temp, AllocateBackend(d.grad_temp_floats));
  MXMACA_ASSIGN_OR_RETURN(float* partials, AllocateBackend(2 * std::max(store_.size(), 1)));
  d.norm_partials = reinterpret_cast<double*>(partials);
  const bool tied_here = ids_.output_weight >= 0 && ids_.output_weight == ids_.word_embeddings &&
                         layout_.has_embedding && layout_.has_loss_head;
  if (tied_here) {
    MXMACA_ASSIGN_OR_RETURN(d.tied_temp, AllocateBackend(store_.info(ids_.word_embeddings).numel));
  }
  // The per-op buffers for the largest micro-batch (no TP: T rows everywhere).
  const int64_t b = options.micro_batch_size, s = options.seq_length, t = b * s,
                h = config_.hidden_size, np = config_.num_attention_heads,
                ng = config_.query_groups(), hn = config_.head_dim(),
                pj = config_.attention_projection_size();
  FloatCarver count(nullptr);
  auto carve = [&](FloatCarver& cv) {
    auto bind = [&](ScratchBuffer& buffer, int64_t floats) {
      buffer.Bind(cv.Take(floats), floats);
    };
    bind(grad_a_, t * h);
    bind(grad_b_, t * h);
    bind(gamma_scratch_, h);
    // transformer_layer.h LayerScratch's sizes.
    bind(scratch_.a, t * std::max({config_.qkv_size(), h, config_.ffn_hidden_size, pj}));
    bind(scratch_.b, t * std::max(pj, h));
    bind(scratch_.c, t * h);
    bind(scratch_.d, t * std::max(pj, h));
    bind(scratch_.e, 2 * b * ng * s * hn);
    bind(scratch_.gamma, std::max(h, hn));
    bind(scratch_.delta, b * np * s);
    bind(sp_full_, t * h);
    bind(sp_local_, t * h);
    d.rope_positions = cv.TakeInts(t);
    d.local_targets = cv.TakeInts(t);
    d.stage_output = cv.Take(t * h);
    d.token_losses = cv.Take(t);
    d.loss_grad = cv.Take(t);
  };
  carve(count);
  MXMACA_ASSIGN_OR_RETURN(float* scratch_base, AllocateBackend(count.used()));
  FloatCarver cv(scratch_base);
  carve(cv);
  d.scratch_bytes = 4 * (count.used() + d.grad_temp_floats +
                         (tied_here ? store_.info(ids_.word_embeddings).numel : 0));
  const bool selective = config_.recompute_granularity == RecomputeGranularity::kSelective;
  if (selective && !options.fused_attention) {
    // No micro-batch keeps its attention probabilities from F to B (B recomputes them),
    // and ops run one at a time: one [b, np, s, s] buffer for every slot's layers.
    MXMACA_ASSIGN_OR_RETURN(d.shared_probs, AllocateBackend(b * np * s * s));
    d.scratch_bytes += 4 * b * np * s * s;
  }
  if (!options.fused_attention) {
    MXMACA_RETURN_IF_ERROR(
        kernels_->ReserveAttentionScratch(device::AttentionDims{b, s, np, ng, hn}));
  }
  return UploadParameters();
}

// ---- slots ----

absl::StatusOr<MicroBatchStash*> GptStage::AcquireSlot(int64_t micro_batch_id) {
  for (DeviceState::Slot& slot : device_->slots) {
    if (slot.busy) continue;
    slot.busy = true;
    slot.stash->micro_batch_id = micro_batch_id;
    slot.stash->phase = MicroBatchStash::Phase::kForwardDone;
    return slot.stash.get();
  }
  // A new slot (all are in flight): every buffer of the stash, at this slot shape.
  const DeviceStageOptions& o = device_->options;
  const int64_t b = o.micro_batch_size, s = o.seq_length, t = b * s, h = config_.hidden_size,
                np = config_.num_attention_heads, ng = config_.query_groups(),
                hn = config_.head_dim(), pj = config_.attention_projection_size(),
                f = config_.ffn_hidden_size, f1 = config_.fc1_size(), qkv = config_.qkv_size(),
                vp = config_.padded_vocab_size;
  const int nl = static_cast<int>(layout_.num_layers());
  DeviceState::Slot slot;
  slot.stash = std::make_unique<MicroBatchStash>();
  MicroBatchStash* st = slot.stash.get();
  st->layers.resize(nl);
  auto carve = [&](FloatCarver& cv) {
    auto bind = [&](auto& buffer, int64_t n) {
      using T = std::remove_pointer_t<decltype(buffer.data())>;
      buffer.Bind(reinterpret_cast<T*>(cv.Take(n)), n);
    };
    bind(st->tokens, t);
    bind(st->position_ids, t);
    bind(st->doc_start, t);
    bind(st->labels, t);
    slot.dropout_keys =
        reinterpret_cast<kernels::RngKey*>(cv.Take(4 * NumSlotKeys(nl)));  // 16-byte keys
    if (layout_.has_embedding) bind(st->d_embedding, t * h);
    for (LayerStash& l : st->layers) {
      bind(l.input, t * h);
      bind(l.ln1_out, t * h);
      bind(l.ln1_mean, t);
      bind(l.ln1_rstd, t);
      bind(l.q, b * np * s * hn);
      bind(l.k, b * ng * s * hn);
      bind(l.v, b * ng * s * hn);
      if (config_.qk_layernorm) {
        const int64_t nq = b * np * s, nk = b * ng * s;
        bind(l.q_pre, nq * hn);
        bind(l.k_pre, nk * hn);
        bind(l.q_mean, nq);
        bind(l.q_rstd, nq);
        bind(l.k_mean, nk);
        bind(l.k_rstd, nk);
        bind(l.d_q_norm, nq * hn);
        bind(l.d_k_norm, nk * hn);
      }
      if (device_->shared_probs != nullptr) {
        l.probs.Bind(device_->shared_probs, b * np * s * s);  // selective recomputation
      } else {
        bind(l.probs, o.fused_attention ? b * np * s : b * np * s * s);
      }
      bind(l.context, t * pj);
      bind(l.residual2, t * h);
      bind(l.ln2_out, t * h);
      bind(l.ln2_mean, t);
      bind(l.ln2_rstd, t);
      bind(l.fc1_out, t * f1);
      bind(l.act_out, t * f);
      bind(l.d_fc2, t * h);
      bind(l.d_fc1, t * f1);
      bind(l.d_ln2_out, t * h);
      bind(l.d_proj, t * h);
      bind(l.d_qkv, t * qkv);
      bind(l.d_ln1_out, t * h);
    }
    if (layout_.has_loss_head) {
      bind(st->final_input, t * h);
      bind(st->lnf_out, t * h);
      bind(st->lnf_mean, t);
      bind(st->lnf_rstd, t);
      bind(st->logits, t * vp);
      bind(st->lse, t);
      bind(st->d_lnf_out, t * h);
    }
    // Not bound: loss_mask stays host memory (only the host reads it: the loss sum and
    // the loss gradient), pending_grads is never used (W runs in forward order).
  };
  FloatCarver count(nullptr);
  carve(count);
  const int64_t bytes = 4 * count.used();
  const int64_t held = bytes * static_cast<int64_t>(device_->slots.size());
  if (device_->cap_bytes > 0 && held + bytes > device_->cap_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of memory: shard ", device_->cap_shard, ": allocating ", bytes,
                     " bytes for the slot of micro-batch ", micro_batch_id, " would use ",
                     held + bytes, " of the ", device_->cap_bytes,
                     "-byte cap (--memory-cap-per-shard; ", held, " bytes already held)"));
  }
  MXMACA_ASSIGN_OR_RETURN(float* base, AllocateBackend(count.used()));
  device_->slot_bytes = bytes;
  FloatCarver cv(base);
  carve(cv);
  st->slot = static_cast<int>(device_->slots.size());
  st->micro_batch_id = micro_batch_id;
  slot.busy = true;
  device_->slots.push_back(std::move(slot));
  return st;
}

MicroBatchStash* GptStage::FindSlot(int64_t micro_batch_id) {
  for (DeviceState::Slot& slot : device_->slots) {
    if (slot.busy && slot.stash->micro_batch_id == micro_batch_id) return slot.stash.get();
  }
  return nullptr;
}

void GptStage::ReleaseSlot(const MicroBatchStash* st) {
  for (DeviceState::Slot& slot : device_->slots) {
    if (slot.stash.get() == st) slot.busy = false;
  }
}

absl::Status GptStage::UploadDropoutKeys(MicroBatchStash* st) {
  const int nl = static_cast<int>(layers_.size());
  std::vector<kernels::RngKey>& keys = device_->host_keys;
  keys.assign(NumSlotKeys(nl), kernels::RngKey{});
  keys[SlotKeyIndex(-1, DropoutSite::kEmbedding)] =
      DropoutKey(config_.seed, -1, DropoutSite::kEmbedding, st->iteration, st->micro_batch_id);
  for (int i = 0; i < nl; ++i) {
    for (DropoutSite site :
         {DropoutSite::kAttentionProbs, DropoutSite::kAttentionOutput, DropoutSite::kMlpOutput}) {
      keys[SlotKeyIndex(i, site)] = DropoutKey(config_.seed, layout_.first_layer + i, site,
                                               st->iteration, st->micro_batch_id);
    }
  }
  // `keys` outlives the copy: every op ends with a Synchronize.
  return kernels_->CopyToDevice(device_->slots[st->slot].dropout_keys, keys.data(),
                                static_cast<int64_t>(sizeof(kernels::RngKey) * keys.size()));
}

const kernels::RngKey* GptStage::SlotDropoutKeys(const MicroBatchStash& st, int local_layer) const {
  if (device_ == nullptr || st.slot < 0) return nullptr;
  return device_->slots[st.slot].dropout_keys +
         SlotKeyIndex(local_layer,
                      local_layer < 0 ? DropoutSite::kEmbedding : DropoutSite::kAttentionProbs);
}

const int32_t* GptStage::DeviceRopePositions() const { return device_->rope_positions; }
float* GptStage::DeviceStageOutput() { return device_->stage_output; }
float* GptStage::DeviceTokenLosses(StageOutput* output) {
  return device_ != nullptr ? device_->token_losses : output->token_losses.data();
}
float* GptStage::DeviceLossGrad() { return device_->loss_grad; }
int32_t* GptStage::DeviceLocalTargets() { return device_->local_targets; }

absl::Status GptStage::RunDeviceSegment(const char* op, const MicroBatchStash& st,
                                        const device::Segment& segment) {
  // TP: the collectives inside the segment copy through the host and synchronise, which
  // a CUDA graph cannot capture: eager.
  if (!device_->runner || tp_.size > 1) return segment();
  // A graph launch enqueues outside DeviceKernels: the device must be current on this
  // thread (the stage actor's strand may run on any pool thread).
  MXMACA_RETURN_IF_ERROR(kernels_->MakeCurrent());
  return device_->runner(device::SegmentInfo{op, st.slot, st.b, st.s, !st.doc_start.empty()},
                         segment);
}

void GptStage::set_segment_runner(device::SegmentRunner runner) {
  if (device_ != nullptr) device_->runner = std::move(runner);
}
int GptStage::num_slots() const {
  return device_ != nullptr ? static_cast<int>(device_->slots.size()) : 0;
}
int64_t GptStage::slot_bytes() const { return device_ != nullptr ? device_->slot_bytes : 0; }
int64_t GptStage::device_bytes() const {
  if (device_ == nullptr) return 0;
  return device_->arena_bytes + device_->scratch_bytes +
         device_->slot_bytes * static_cast<int64_t>(device_->slots.size());
}

// ---- weight gradients on the device ----

// DeviceGradSink: transformer_layer.h's WeightGradSink over the device gradient arena.
// Each tensor's micro-batch gradient goes to a zeroed piece of grad_temp and is added to
// the arena at End (the CPU backend's DirectSink: the same elementwise grad += g); with
// gradient accumulation fusion the 2-D weights are the arena itself (accumulates: beta =
// 1). At most two tensors are open at once besides the tied output/embedding weight,
// which has a buffer of its own (tied_temp); the pieces are reused once all are closed
// (the device runs the adds before later work in stream order). Errors of the enqueued
// Zero / Add calls are kept and returned by status().
class GptStage::DeviceGradSink : public WeightGradSink {
 public:
  explicit DeviceGradSink(GptStage* stage) : stage_(stage), d_(*stage->device_) {}
  float* Begin(int id) override {
    if (accumulates(id)) return stage_->backend_grad(id);
    const int64_t n = stage_->store_.info(id).numel;
    if (d_.tied_temp != nullptr && id == stage_->ids_.word_embeddings) {
      if (!tied_open_) Fail(stage_->kernels_->Zero(d_.tied_temp, 4 * n));
      tied_open_ = true;
      return d_.tied_temp;
    }
    for (const Open& o : open_) {
      if (o.id == id) return o.buffer;
    }
    if (used_ + RoundUp(n) > d_.grad_temp_floats) {
      Fail(absl::InternalError(absl::StrCat("device stage: gradient temporary of ",
                                            d_.grad_temp_floats, " floats too small for ",
                                            stage_->store_.info(id).spec.name)));
      return d_.grad_temp;
    }
    float* buffer = d_.grad_temp + used_;
    used_ += RoundUp(n);
    open_.push_back({id, buffer});
    Fail(stage_->kernels_->Zero(buffer, 4 * n));
    return buffer;
  }
  void End(int id) override {
    if (accumulates(id)) return;
    const int64_t n = stage_->store_.info(id).numel;
    float* g = stage_->backend_grad(id);
    if (d_.tied_temp != nullptr && id == stage_->ids_.word_embeddings) {
      Fail(stage_->kernels_->Add(g, d_.tied_temp, g, n));
      tied_open_ = false;
      return;
    }
    for (size_t i = 0; i < open_.size(); ++i) {
      if (open_[i].id != id) continue;
      Fail(stage_->kernels_->Add(g, open_[i].buffer, g, n));
      open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
    if (open_.empty()) used_ = 0;
  }
  bool accumulates(int id) const override {
    return d_.options.gradient_accumulation_fusion &&
           stage_->store_.info(id).spec.shape.size() == 2;
  }
  absl::Status status() const override { return status_; }

 private:
  struct Open {
    int id;
    float* buffer;
  };
  void Fail(absl::Status s) {
    if (status_.ok() && !s.ok()) status_ = std::move(s);
  }
  GptStage* stage_;
  const DeviceState& d_;
  std::vector<Open> open_;
  int64_t used_ = 0;
  bool tied_open_ = false;
  absl::Status status_;
};

// DevicePendingSink: W of a micro-batch that is not the oldest awaiting W: its gradient
// into its slot's zeroed arena-shaped pending buffer, added to the arena in forward order
// by RetireInOrder (the CPU backend's PendingSink, the same elementwise grad += g).
class GptStage::DevicePendingSink : public WeightGradSink {
 public:
  DevicePendingSink(const ParameterStore* store, float* pending, absl::Status zeroed)
      : store_(store), pending_(pending), status_(std::move(zeroed)) {}
  float* Begin(int id) override { return pending_ + store_->info(id).arena_offset; }
  void End(int) override {}
  absl::Status status() const override { return status_; }

 private:
  const ParameterStore* store_;
  float* pending_;
  absl::Status status_;
};

std::unique_ptr<WeightGradSink> GptStage::MakeDeviceSink(const MicroBatchStash& st, bool direct) {
  if (direct) return std::make_unique<DeviceGradSink>(this);
  DeviceState::Slot& slot = device_->slots[st.slot];
  const int64_t n = store_.arena_elements();
  absl::Status status;
  if (slot.pending_grads == nullptr) {
    absl::StatusOr<float*> pending = AllocateBackend(n);
    if (!pending.ok()) {
      return std::make_unique<DevicePendingSink>(&store_, device_->grad_temp, pending.status());
    }
    slot.pending_grads = *pending;
    device_->arena_bytes += 4 * n;
  }
  status = kernels_->Zero(slot.pending_grads, 4 * n);
  return std::make_unique<DevicePendingSink>(&store_, slot.pending_grads, std::move(status));
}

float* GptStage::DevicePendingGrads(const MicroBatchStash& st) {
  return device_->slots[st.slot].pending_grads;
}

void GptStage::SetMemoryCap(int64_t cap_bytes, std::string shard) {
  if (device_ == nullptr) {
    tracker_.SetCap(cap_bytes, std::move(shard));
    return;
  }
  device_->cap_bytes = cap_bytes;
  device_->cap_shard = std::move(shard);
}

// ---- the arenas (both backends) ----

float* GptStage::backend_param(int id) {
  return device_ != nullptr ? params_ + store_.info(id).arena_offset : store_.param(id);
}
float* GptStage::backend_grad(int id) {
  return device_ != nullptr ? grads_ + store_.info(id).arena_offset : store_.grad(id);
}

absl::Status GptStage::UploadParameters() {
  if (device_ == nullptr) return absl::OkStatus();
  absl::Span<float> host = store_.params_arena();
  MXMACA_RETURN_IF_ERROR(
      kernels_->CopyToDevice(params_, host.data(), static_cast<int64_t>(host.size()) * 4));
  return kernels_->Synchronize();
}

absl::Status GptStage::DownloadParameters() {
  if (device_ == nullptr) return absl::OkStatus();
  absl::Span<float> host = store_.params_arena();
  MXMACA_RETURN_IF_ERROR(
      kernels_->CopyToHost(host.data(), params_, static_cast<int64_t>(host.size()) * 4));
  return kernels_->Synchronize();
}

absl::Status GptStage::DownloadGradients() {
  if (device_ == nullptr) return absl::OkStatus();
  absl::Span<float> host = store_.grads_arena();
  MXMACA_RETURN_IF_ERROR(
      kernels_->CopyToHost(host.data(), grads_, static_cast<int64_t>(host.size()) * 4));
  return kernels_->Synchronize();
}

absl::Status GptStage::DownloadGradient(int id) {
  if (device_ == nullptr) return absl::OkStatus();
  MXMACA_RETURN_IF_ERROR(Download(store_.grad(id), backend_grad(id), 4 * store_.info(id).numel));
  return kernels_->Synchronize();
}

absl::Status GptStage::UploadGradient(int id) {
  if (device_ == nullptr) return absl::OkStatus();
  MXMACA_RETURN_IF_ERROR(Upload(backend_grad(id), store_.grad(id), 4 * store_.info(id).numel));
  return kernels_->Synchronize();
}

absl::Status GptStage::ZeroGrads() {
  float* base = device_ != nullptr ? grads_ : store_.grads_arena().data();
  return kernels_->Zero(base, 4 * store_.arena_elements());
}

absl::StatusOr<double> GptStage::GradNormSquared(const std::function<bool(int)>& counts) {
  std::vector<GradBucket> ranges;
  for (int i = 0; i < store_.size(); ++i) {
    if (counts != nullptr && !counts(i)) continue;
    const ParameterInfo& info = store_.info(i);
    ranges.push_back({info.arena_offset, info.arena_offset + info.numel});
  }
  return GradSumSquares(ranges);
}

absl::StatusOr<double> GptStage::GradSumSquares(absl::Span<const GradBucket> ranges) {
  const int64_t n = store_.arena_elements();
  for (const GradBucket& r : ranges) {
    if (r.begin < 0 || r.end < r.begin || r.end > n) {
      return absl::InvalidArgumentError(absl::StrCat("GradSumSquares: range [", r.begin, ", ",
                                                     r.end, ") outside the gradient arena of ", n,
                                                     " elements"));
    }
  }
  // One fp64 partial per range, in batches of the partials buffer's size.
  const size_t cap = static_cast<size_t>(std::max(store_.size(), 1));
  host_norm_partials_.assign(cap, 0.0);
  double* partials = device_ != nullptr ? device_->norm_partials : host_norm_partials_.data();
  const float* grads = device_ != nullptr ? grads_ : store_.grads_arena().data();
  double sum = 0.0;
  for (size_t begin = 0; begin < ranges.size(); begin += cap) {
    const size_t end = std::min(ranges.size(), begin + cap);
    for (size_t k = begin; k < end; ++k) {
      MXMACA_RETURN_IF_ERROR(
          kernels_->SumSquares(grads + ranges[k].begin, ranges[k].size(), partials + (k - begin)));
    }
    MXMACA_RETURN_IF_ERROR(
        Download(host_norm_partials_.data(), partials, static_cast<int64_t>(8 * (end - begin))));
    MXMACA_RETURN_IF_ERROR(kernels_->Synchronize());
    for (size_t k = begin; k < end; ++k) sum += host_norm_partials_[k - begin];
  }
  return sum;
}

absl::Status GptStage::ScaleGrads(float factor) {
  float* base = device_ != nullptr ? grads_ : store_.grads_arena().data();
  return kernels_->Scale(base, store_.arena_elements(), factor);
}

absl::Status GptStage::AllocateMoments() {
  if (exp_avg_ != nullptr) return absl::OkStatus();
  const int64_t n = store_.arena_elements();
  MXMACA_ASSIGN_OR_RETURN(exp_avg_, AllocateBackend(n));
  MXMACA_ASSIGN_OR_RETURN(exp_avg_sq_, AllocateBackend(n));
  MXMACA_RETURN_IF_ERROR(kernels_->Zero(exp_avg_, 4 * n));
  MXMACA_RETURN_IF_ERROR(kernels_->Zero(exp_avg_sq_, 4 * n));
  if (device_ != nullptr) device_->arena_bytes += 2 * 4 * n;
  return absl::OkStatus();
}

absl::Status GptStage::AdamWStep(float lr, float weight_decay, float beta1, float beta2, float eps,
                                 int64_t step) {
  MXMACA_RETURN_IF_ERROR(AllocateMoments());  // the first step: zeroed moments
  for (int i = 0; i < store_.size(); ++i) {
    const ParameterInfo& info = store_.info(i);
    const int64_t off = info.arena_offset;
    MXMACA_RETURN_IF_ERROR(kernels_->AdamWStep(backend_param(i), backend_grad(i), exp_avg_ + off,
                                               exp_avg_sq_ + off, info.numel, lr, beta1, beta2, eps,
                                               info.spec.weight_decay ? weight_decay : 0.0f, step));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> GptStage::OptimizerTensorOffsets(
    const AdamWOptimizer& optimizer) {
  const float* host = store_.params_arena().data();
  const int64_t n = store_.arena_elements();
  std::vector<int64_t> offsets;
  for (const OptimizerTensor& t : optimizer.tensors()) {
    const int64_t off = t.param - host;
    absl::StatusOr<int> id = store_.Index(t.name);
    if (off < 0 || off + t.numel > n || t.flat_offset != 0 || !id.ok() ||
        store_.info(*id).arena_offset != off || store_.info(*id).numel != t.numel) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the optimizer's tensor ", t.name, " (", t.numel, " elements from element ",
          t.flat_offset,
          ") is not a whole tensor of this stage's parameters: training state "
          "on the device needs one optimizer tensor per parameter (not the distributed "
          "optimizer's shards)"));
    }
    offsets.push_back(off);
  }
  return offsets;
}

absl::Status GptStage::StepOptimizer(AdamWOptimizer& optimizer, double lr, double decoupled_lr,
                                     double weight_decay) {
  if (device_ == nullptr) {
    return absl::FailedPreconditionError(
        "StepOptimizer: this stage is on the CPU backend, whose optimizer steps the host "
        "parameters (AdamWOptimizer::Step)");
  }
  MXMACA_ASSIGN_OR_RETURN(const std::vector<int64_t> offsets, OptimizerTensorOffsets(optimizer));
  const std::vector<OptimizerTensor>& tensors = optimizer.tensors();
  if (!moments_from_optimizer_) {
    // The optimizer's moments (zeros, or a loaded checkpoint's) become the device's.
    MXMACA_RETURN_IF_ERROR(AllocateMoments());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const int64_t bytes = 4 * tensors[i].numel;
      MXMACA_RETURN_IF_ERROR(Upload(exp_avg_ + offsets[i], optimizer.exp_avg(i).data(), bytes));
      MXMACA_RETURN_IF_ERROR(
          Upload(exp_avg_sq_ + offsets[i], optimizer.exp_avg_sq(i).data(), bytes));
    }
    moments_from_optimizer_ = true;
  }
  const AdamWOptions& o = optimizer.options();
  const int64_t step = optimizer.step() + 1;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const OptimizerTensor& t = tensors[i];
    const int64_t off = offsets[i];
    // AdamWOptimizer::Step's arguments, cast as it casts them.
    MXMACA_RETURN_IF_ERROR(kernels_->AdamWStep(
        params_ + off, grads_ + off, exp_avg_ + off, exp_avg_sq_ + off, t.numel,
        static_cast<float>(t.is_decoupled_lr ? decoupled_lr : lr), o.beta1, o.beta2, o.eps,
        t.apply_weight_decay ? static_cast<float>(weight_decay) : 0.0f, step));
  }
  optimizer.set_step(step);
  return absl::OkStatus();
}

absl::Status GptStage::DownloadOptimizerState(AdamWOptimizer& optimizer) {
  if (device_ == nullptr) return absl::OkStatus();
  MXMACA_RETURN_IF_ERROR(DownloadParameters());
  if (!moments_from_optimizer_) return absl::OkStatus();  // never stepped here
  MXMACA_ASSIGN_OR_RETURN(const std::vector<int64_t> offsets, OptimizerTensorOffsets(optimizer));
  for (size_t i = 0; i < offsets.size(); ++i) {
    const int64_t bytes = 4 * optimizer.tensors()[i].numel;
    MXMACA_RETURN_IF_ERROR(Download(optimizer.exp_avg(i).data(), exp_avg_ + offsets[i], bytes));
    MXMACA_RETURN_IF_ERROR(
        Download(optimizer.exp_avg_sq(i).data(), exp_avg_sq_ + offsets[i], bytes));
  }
  return kernels_->Synchronize();
}

}  // namespace mxmaca::layers
