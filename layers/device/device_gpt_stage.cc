// layers/device/device_gpt_stage.cc
#include "layers/device/device_gpt_stage.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "layers/device/device_gpt_stage_internal.h"
#include "layers/modules/embedding.h"
#include "layers/modules/linear.h"
#include "layers/modules/norm.h"
#include "layers/transformer_layer.h"

namespace mxmaca::layers::device {

namespace {

absl::Status CheckIds(const char* what, absl::Span<const int32_t> ids, int64_t limit) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= limit) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, "[", i, "] = ", ids[i], ", expected in [0, ", limit, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSize(const char* what, size_t got, int64_t want) {
  if (static_cast<int64_t>(got) != want) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", got, " elements, expected ", want));
  }
  return absl::OkStatus();
}

}  // namespace

using internal::FloatCarver;
using internal::KeyIndex;
using internal::NumKeys;
using internal::RoundUp;

DeviceGptStage::DeviceGptStage(const GptConfig& config, const StageLayout& layout,
                               DeviceKernels* kernels, const DeviceStageOptions& options)
    : config_(config), layout_(layout), kernels_(kernels), options_(options) {}

DeviceGptStage::~DeviceGptStage() {
  if (kernels_ == nullptr) return;
  (void)kernels_->Synchronize();
  for (void* p : allocations_) kernels_->Free(p);
}

absl::StatusOr<std::unique_ptr<DeviceGptStage>> DeviceGptStage::Create(
    const GptConfig& config, const StageLayout& layout, DeviceKernels* kernels,
    const DeviceStageOptions& options) {
  if (kernels == nullptr) return absl::InvalidArgumentError("device stage: no DeviceKernels");
  MXMACA_RETURN_IF_ERROR(config.Validate());
  if (config.moe != nullptr) {
    return absl::InvalidArgumentError(
        "the device backend has no MoE layers yet (--num-experts); use --device cpu");
  }
  if (config.recompute_granularity == RecomputeGranularity::kFull) {
    return absl::InvalidArgumentError(
        "the device backend has no full activation recomputation yet (--recompute-granularity "
        "full); use --device cpu, or --recompute-granularity selective");
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
  std::unique_ptr<DeviceGptStage> stage(new DeviceGptStage(config, layout, kernels, opts));
  MXMACA_RETURN_IF_ERROR(stage->Init());
  return stage;
}

absl::StatusOr<float*> DeviceGptStage::AllocateFloats(int64_t n) {
  MXMACA_ASSIGN_OR_RETURN(void* p, kernels_->Allocate(std::max<int64_t>(n, 1) * 4));
  allocations_.push_back(p);
  return static_cast<float*>(p);
}

absl::Status DeviceGptStage::Init() {
  MXMACA_ASSIGN_OR_RETURN(ids_, RegisterGptParameters(config_, layout_, &store_));
  for (const LayerParameterIds& layer_ids : ids_.layers) layers_.emplace_back(&store_, layer_ids);
  store_.Finalize(options_.arena_multiple);
  store_.Initialize(config_.seed);
  vocab_softmax_ =
      config_.softmax_over_padded_vocab ? config_.padded_vocab_size : config_.vocab_size;
  const int64_t n = store_.arena_elements();
  arena_bytes_ = 2 * 4 * n;  // parameters and gradients (+2 x with the device optimizer)
  MXMACA_ASSIGN_OR_RETURN(params_, AllocateFloats(n));
  MXMACA_ASSIGN_OR_RETURN(grads_, AllocateFloats(n));
  MXMACA_RETURN_IF_ERROR(kernels_->Zero(grads_, 4 * n));
  // exp_avg / exp_avg_sq: allocated by the first AdamWStep (mxmaca train keeps AdamW on
  // the host and never needs them on the device).
  // grad_temp_: every tensor without fusion; with it only bias gradients (BiasGrad
  // overwrites) and the norms' (gamma and beta) pass through it.
  // The layers' sink (GradSink) holds at most two tensors open at once (a weight and its
  // bias, a norm's gamma and beta).
  int64_t temp = 2 * RoundUp(config_.hidden_size), widest_temp = 0;
  for (int i = 0; i < store_.size(); ++i) {
    const ParameterInfo& info = store_.info(i);
    if (!options_.gradient_accumulation_fusion || info.spec.shape.size() == 1) {
      temp = std::max(temp, info.numel);
      widest_temp = std::max(widest_temp, RoundUp(info.numel));
    }
  }
  temp = std::max(temp, 2 * widest_temp);
  grad_temp_floats_ = temp;
  MXMACA_ASSIGN_OR_RETURN(float* partials, AllocateFloats(2 * std::max(store_.size(), 1)));
  norm_partials_ = reinterpret_cast<double*>(partials);
  MXMACA_ASSIGN_OR_RETURN(grad_temp_, AllocateFloats(temp));
  const bool tied_here = ids_.output_weight >= 0 && ids_.output_weight == ids_.word_embeddings &&
                         layout_.has_embedding && layout_.has_loss_head;
  if (tied_here) {
    MXMACA_ASSIGN_OR_RETURN(embed_temp_, AllocateFloats(store_.info(ids_.word_embeddings).numel));
  }
  // Scratch for the largest micro-batch.
  const int64_t b = options_.micro_batch_size, s = options_.seq_length, t = b * s,
                h = config_.hidden_size, np = config_.num_attention_heads,
                ng = config_.query_groups(), hn = config_.head_dim();
  const int64_t pj = config_.attention_projection_size();
  auto carve_scratch = [&](FloatCarver& cv) {
    Scratch sc;
    sc.grad_a = cv.Take(t * h);
    sc.grad_b = cv.Take(t * h);
    sc.gamma = cv.Take(h);
    // transformer_layer.h LayerScratch's sizes for this slot shape (no TP: tl = t).
    auto bind = [&](ScratchBuffer& buffer, int64_t n) { buffer.Bind(cv.Take(n), n); };
    bind(sc.layer.a, t * std::max({config_.qkv_size(), h, config_.ffn_hidden_size, pj}));
    bind(sc.layer.b, t * std::max(pj, h));
    bind(sc.layer.c, t * h);
    bind(sc.layer.d, t * std::max(pj, h));
    bind(sc.layer.e, 2 * b * ng * s * hn);
    bind(sc.layer.gamma, std::max(h, hn));
    bind(sc.layer.delta, b * np * s);
    return sc;
  };
  FloatCarver count(nullptr);
  carve_scratch(count);
  MXMACA_ASSIGN_OR_RETURN(float* scratch_base, AllocateFloats(count.used()));
  scratch_bytes_ = 4 * count.used();
  if (SelectiveRecompute() && !options_.fused_attention) {
    // Selective recomputation: no micro-batch keeps its attention probabilities from F to B
    // (B recomputes them), and ops run one at a time, so every slot's layers share one
    // [b, np, s, s] buffer instead of holding one each.
    MXMACA_ASSIGN_OR_RETURN(shared_probs_, AllocateFloats(b * np * s * s));
    scratch_bytes_ += 4 * b * np * s * s;
  }
  FloatCarver cv(scratch_base);
  scratch_ = std::make_unique<Scratch>(carve_scratch(cv));
  if (!options_.fused_attention) {
    MXMACA_RETURN_IF_ERROR(kernels_->ReserveAttentionScratch(AttentionDims{b, s, np, ng, hn}));
  }
  return UploadParameters();
}

float* DeviceGptStage::device_param(int id) { return params_ + store_.info(id).arena_offset; }
float* DeviceGptStage::device_grad(int id) { return grads_ + store_.info(id).arena_offset; }

int64_t DeviceGptStage::device_bytes() const {
  return arena_bytes_ + scratch_bytes_ + slot_bytes_ * static_cast<int64_t>(slots_.size());
}

absl::Status DeviceGptStage::UploadParameters() {
  absl::Span<float> host = store_.params_arena();
  MXMACA_RETURN_IF_ERROR(
      kernels_->CopyToDevice(params_, host.data(), static_cast<int64_t>(host.size()) * 4));
  return kernels_->Synchronize();
}

absl::Status DeviceGptStage::DownloadParameters() {
  absl::Span<float> host = store_.params_arena();
  MXMACA_RETURN_IF_ERROR(
      kernels_->CopyToHost(host.data(), params_, static_cast<int64_t>(host.size()) * 4));
  return kernels_->Synchronize();
}

absl::Status DeviceGptStage::DownloadGradients() {
  absl::Span<float> host = store_.grads_arena();
  MXMACA_RETURN_IF_ERROR(
      kernels_->CopyToHost(host.data(), grads_, static_cast<int64_t>(host.size()) * 4));
  return kernels_->Synchronize();
}

// ---- slots ----

absl::StatusOr<DeviceGptStage::Slot*> DeviceGptStage::AcquireSlot(int64_t micro_batch_id) {
  for (auto& slot : slots_) {
    if (slot->busy && slot->micro_batch_id == micro_batch_id) {
      return absl::FailedPreconditionError(
          absl::StrCat("device stage: micro-batch ", micro_batch_id, " is already in flight"));
    }
  }
  for (auto& slot : slots_) {
    if (!slot->busy) return slot.get();
  }
  // A new slot (all are in flight): every buffer of transformer_layer.h's stash.
  const int64_t b = options_.micro_batch_size, s = options_.seq_length, t = b * s,
                h = config_.hidden_size, np = config_.num_attention_heads,
                ng = config_.query_groups(), hn = config_.head_dim(),
                pj = config_.attention_projection_size(), f = config_.ffn_hidden_size,
                f1 = config_.fc1_size(), qkv = config_.qkv_size(), vp = config_.padded_vocab_size;
  const int nl = static_cast<int>(layout_.num_layers());
  auto carve = [&](FloatCarver& cv, Slot* slot) {
    slot->tokens = cv.TakeInts(t);
    slot->positions = cv.TakeInts(t);
    slot->rope_positions = cv.TakeInts(t);
    slot->doc_start = cv.TakeInts(t);
    slot->labels = cv.TakeInts(t);
    slot->loss_mask = cv.Take(t);
    slot->dloss = cv.Take(t);
    slot->rng_keys = reinterpret_cast<kernels::RngKey*>(cv.Take(4 * NumKeys(nl)));
    slot->d_embedding = layout_.has_embedding ? cv.Take(t * h) : nullptr;
    slot->layers.resize(nl);
    for (LayerStash& l : slot->layers) {
      // transformer_layer.h's stash at this slot shape (no TP: T = t rows everywhere).
      auto bind = [&](StashBuffer<float>& buffer, int64_t n) { buffer.Bind(cv.Take(n), n); };
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
      if (shared_probs_ != nullptr) {
        l.probs.Bind(shared_probs_, b * np * s * s);  // selective recomputation (Init)
      } else {
        bind(l.probs, options_.fused_attention ? b * np * s : b * np * s * s);
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
      slot->final_input = cv.Take(t * h);
      slot->lnf_out = cv.Take(t * h);
      slot->lnf_mean = cv.Take(t);
      slot->lnf_rstd = cv.Take(t);
      slot->logits = cv.Take(t * vp);
      slot->ce_lse = cv.Take(t);
      slot->token_losses = cv.Take(t);
      slot->d_lnf_out = cv.Take(t * h);
      slot->output = nullptr;
    } else {
      slot->final_input = slot->lnf_out = slot->lnf_mean = slot->lnf_rstd = nullptr;
      slot->logits = slot->ce_lse = slot->token_losses = slot->d_lnf_out = nullptr;
      slot->output = cv.Take(t * h);
    }
    slot->d_output = cv.Take(t * h);
    slot->d_input = cv.Take(t * h);
  };
  auto slot = std::make_unique<Slot>();
  FloatCarver count(nullptr);
  carve(count, slot.get());
  MXMACA_ASSIGN_OR_RETURN(float* base, AllocateFloats(count.used()));
  slot_bytes_ = 4 * count.used();
  FloatCarver cv(base);
  carve(cv, slot.get());
  slot->base = base;
  slot->index = static_cast<int>(slots_.size());
  slots_.push_back(std::move(slot));
  return slots_.back().get();
}

DeviceGptStage::Slot* DeviceGptStage::FindSlot(int64_t micro_batch_id) {
  for (auto& slot : slots_) {
    if (slot->busy && slot->micro_batch_id == micro_batch_id) return slot.get();
  }
  return nullptr;
}

std::string SegmentInfo::ToString() const {
  return absl::StrCat(op, "/slot", slot, "/b", b, "/s", s, doc_start ? "/doc" : "");
}

absl::Status DeviceGptStage::RunSegment(const std::string& op, const Slot& slot,
                                        const Segment& segment) {
  if (!runner_) return segment();
  // A graph launch enqueues outside DeviceKernels: the device must be current on this
  // thread (the stage actor's strand may run on any pool thread).
  MXMACA_RETURN_IF_ERROR(kernels_->MakeCurrent());
  return runner_(SegmentInfo{op, slot.index, slot.b, slot.s, slot.has_doc_start}, segment);
}

// ---- forward ----

absl::Status DeviceGptStage::ValidateInput(const MicroBatchInput& in, bool training) const {
  const int64_t b = in.micro_batch_size, s = in.seq_length, t = b * s;
  if (b <= 0 || s <= 0 || b > options_.micro_batch_size || s > options_.seq_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro-batch ", in.micro_batch_id, ": micro_batch_size ", b, " x seq_length ",
                     s, ", expected 1..", options_.micro_batch_size, " x 1..", options_.seq_length,
                     " (the device stage's slot size)"));
  }
  if (layout_.has_embedding) {
    MXMACA_RETURN_IF_ERROR(CheckSize("tokens", in.tokens.size(), t));
    MXMACA_RETURN_IF_ERROR(CheckIds("tokens", in.tokens, config_.vocab_size));
    if (!in.position_ids.empty()) {
      MXMACA_RETURN_IF_ERROR(CheckSize("position_ids", in.position_ids.size(), t));
      MXMACA_RETURN_IF_ERROR(
          CheckIds("position_ids", in.position_ids, config_.max_position_embeddings));
    }
  } else {
    MXMACA_RETURN_IF_ERROR(CheckSize("hidden", in.hidden.size(), t * config_.hidden_size));
  }
  if (!in.doc_start.empty()) {
    MXMACA_RETURN_IF_ERROR(CheckSize("doc_start", in.doc_start.size(), t));
    for (int64_t i = 0; i < t; ++i) {
      if (in.doc_start[i] < 0 || in.doc_start[i] > i % s) {
        return absl::InvalidArgumentError(absl::StrCat("doc_start[", i, "] = ", in.doc_start[i],
                                                       ", expected in [0, ", i % s,
                                                       "] (its position in the row)"));
      }
    }
  }
  if (layout_.has_loss_head) {
    MXMACA_RETURN_IF_ERROR(CheckSize("labels", in.labels.size(), t));
    MXMACA_RETURN_IF_ERROR(CheckIds("labels", in.labels, config_.vocab_size));
    if (!in.loss_mask.empty()) {
      MXMACA_RETURN_IF_ERROR(CheckSize("loss_mask", in.loss_mask.size(), t));
    }
  }
  (void)training;
  return absl::OkStatus();
}

absl::Status DeviceGptStage::Forward(const MicroBatchInput& in, bool training, StageOutput* out) {
  MXMACA_RETURN_IF_ERROR(ValidateInput(in, training));
  MXMACA_ASSIGN_OR_RETURN(Slot * slot, AcquireSlot(in.micro_batch_id));
  const int64_t b = in.micro_batch_size, s = in.seq_length, t = b * s, h = config_.hidden_size;
  slot->busy = true;
  slot->training = training;
  slot->phase = Slot::Phase::kForwardDone;
  slot->micro_batch_id = in.micro_batch_id;
  slot->iteration = in.iteration;
  slot->b = b;
  slot->s = s;
  slot->has_doc_start = !in.doc_start.empty();
  auto release = [&] { slot->busy = false; };

  // Host -> device inputs (eager, before the segment).
  absl::Status st = [&]() -> absl::Status {
    std::vector<int32_t> rope(t);
    for (int64_t i = 0; i < t; ++i) rope[i] = static_cast<int32_t>(i % s);
    // This micro-batch's dropout keys (the kernels read them from the slot when they run).
    std::vector<kernels::RngKey> keys(NumKeys(static_cast<int>(slot->layers.size())));
    if (training) {
      keys[KeyIndex(-1, DropoutSite::kEmbedding)] =
          DropoutKey(config_.seed, -1, DropoutSite::kEmbedding, in.iteration, in.micro_batch_id);
      for (int i = 0; i < static_cast<int>(slot->layers.size()); ++i) {
        for (DropoutSite site : {DropoutSite::kAttentionProbs, DropoutSite::kAttentionOutput,
                                 DropoutSite::kMlpOutput}) {
          keys[KeyIndex(i, site)] = DropoutKey(config_.seed, layout_.first_layer + i, site,
                                               in.iteration, in.micro_batch_id);
        }
      }
      MXMACA_RETURN_IF_ERROR(
          kernels_->CopyToDevice(slot->rng_keys, keys.data(),
                                 static_cast<int64_t>(sizeof(kernels::RngKey) * keys.size())));
    }
    MXMACA_RETURN_IF_ERROR(kernels_->CopyToDevice(slot->rope_positions, rope.data(), 4 * t));
    if (slot->has_doc_start) {
      MXMACA_RETURN_IF_ERROR(kernels_->CopyToDevice(slot->doc_start, in.doc_start.data(), 4 * t));
    }
    if (layout_.has_embedding) {
      MXMACA_RETURN_IF_ERROR(kernels_->CopyToDevice(slot->tokens, in.tokens.data(), 4 * t));
      const int32_t* pos = in.position_ids.empty() ? rope.data() : in.position_ids.data();
      MXMACA_RETURN_IF_ERROR(kernels_->CopyToDevice(slot->positions, pos, 4 * t));
    } else {
      float* first = !slot->layers.empty() ? slot->layers[0].input.data()
                     : layout_.has_loss_head ? slot->final_input
                                             : slot->output;
      MXMACA_RETURN_IF_ERROR(kernels_->CopyToDevice(first, in.hidden.data(), 4 * t * h));
    }
    if (layout_.has_loss_head) {
      MXMACA_RETURN_IF_ERROR(kernels_->CopyToDevice(slot->labels, in.labels.data(), 4 * t));
      slot->host_loss_mask.assign(in.loss_mask.begin(), in.loss_mask.end());
      if (slot->host_loss_mask.empty()) slot->host_loss_mask.assign(t, 1.0f);
    }
    // The host buffers above (`rope`, the caller's spans, the slot's mask) outlive the
    // Synchronize below, which the copies precede in stream order.
    MXMACA_RETURN_IF_ERROR(RunSegment(training ? "F" : "eval-F", *slot,
                                      [&] { return ForwardSegment(slot, training); }));
    out->token_losses.clear();
    out->loss_sum = 0.0;
    out->num_tokens = 0.0;
    if (layout_.has_loss_head) {
      out->token_losses.resize(t);
      MXMACA_RETURN_IF_ERROR(
          kernels_->CopyToHost(out->token_losses.data(), slot->token_losses, 4 * t));
    } else {
      out->hidden.resize(t * h);  // a recycled buffer keeps its capacity
      MXMACA_RETURN_IF_ERROR(kernels_->CopyToHost(out->hidden.data(), slot->output, 4 * t * h));
    }
    MXMACA_RETURN_IF_ERROR(kernels_->Synchronize());
    if (layout_.has_loss_head) {
      double loss_sum = 0.0, count = 0.0;
      for (int64_t i = 0; i < t; ++i) {
        loss_sum += static_cast<double>(out->token_losses[i]) * slot->host_loss_mask[i];
        count += slot->host_loss_mask[i];
      }
      out->loss_sum = loss_sum;
      out->num_tokens = count;
    }
    return absl::OkStatus();
  }();
  if (!st.ok() || !training) {
    release();
    return st;
  }
  forward_order_.push_back(in.micro_batch_id);
  return absl::OkStatus();
}

absl::Status DeviceGptStage::ForwardSegment(Slot* slot, bool training) {
  DeviceKernels& k = *kernels_;
  const int64_t t = slot->b * slot->s, h = config_.hidden_size;
  const int n = static_cast<int>(slot->layers.size());
  float* x0 = n > 0                          ? slot->layers[0].input.data()
              : slot->final_input != nullptr ? slot->final_input
                                             : slot->output;
  if (layout_.has_embedding) {
    MXMACA_RETURN_IF_ERROR(modules::WordEmbeddingForward(
        k, modules::VocabRows{}, slot->tokens, device_param(ids_.word_embeddings), t, h, x0));
    if (ids_.position_embeddings >= 0) {
      MXMACA_RETURN_IF_ERROR(modules::PositionEmbeddingAdd(
          k, slot->positions, device_param(ids_.position_embeddings), t, h, x0));
    }
    if (training && config_.hidden_dropout > 0.0f) {
      MXMACA_RETURN_IF_ERROR(
          k.DropoutForward(x0, x0, t * h, config_.hidden_dropout,
                           slot->rng_keys + KeyIndex(-1, DropoutSite::kEmbedding), 0));
    }
  } else if (n == 0 && !layout_.has_loss_head) {
    // A stage of no layers that only passes the hidden states on: input was copied to
    // `output` directly.
    return absl::OkStatus();
  }
  for (int i = 0; i < n; ++i) {
    float* out = i + 1 < n ? slot->layers[i + 1].input.data()
                           : (layout_.has_loss_head ? slot->final_input : slot->output);
    // Selective recomputation: F keeps all but the attention probabilities (B recomputes
    // them from the stashed q, k, v with the same kernel: the same bits).
    const ForwardKeep keep = SelectiveRecompute() ? ForwardKeep::kNoProbs : ForwardKeep::kAll;
    MXMACA_RETURN_IF_ERROR(layers_[i].Forward(LayerCallFor(*slot, i, training), &slot->layers[i],
                                              out, keep, &scratch_->layer));
  }
  if (layout_.has_loss_head) MXMACA_RETURN_IF_ERROR(HeadForward(slot));
  return absl::OkStatus();
}

LayerCall DeviceGptStage::LayerCallFor(const Slot& slot, int i, bool training) {
  LayerCall call;
  call.config = &config_;
  call.kernels = kernels_;
  call.global_layer = layout_.first_layer + i;
  call.b = slot.b;
  call.s = slot.s;
  call.doc_start = slot.has_doc_start ? slot.doc_start : nullptr;
  call.rope_positions = slot.rope_positions;
  call.training = training;
  call.iteration = slot.iteration;
  call.micro_batch_id = slot.micro_batch_id;
  call.params = params_;
  // The layer's three keys follow one another in the slot (internal::KeyIndex).
  call.dropout_keys = slot.rng_keys + KeyIndex(i, DropoutSite::kAttentionProbs);
  call.fused_attention = options_.fused_attention;
  return call;
}

absl::Status DeviceGptStage::HeadForward(Slot* slot) {
  DeviceKernels& k = *kernels_;
  const int64_t t = slot->b * slot->s, h = config_.hidden_size, vp = config_.padded_vocab_size;
  MXMACA_RETURN_IF_ERROR(modules::Norm(config_).Forward(
      k, slot->final_input, device_param(ids_.final_norm_weight),
      ids_.final_norm_bias >= 0 ? device_param(ids_.final_norm_bias) : nullptr, t, h, slot->lnf_out,
      slot->lnf_mean, slot->lnf_rstd, scratch_->gamma));
  // The output layer (ColumnParallelLinear over the vocabulary, no bias).
  MXMACA_RETURN_IF_ERROR(modules::LinearProduct(k, slot->lnf_out, device_param(ids_.output_weight),
                                                t, h, vp, slot->logits));
  return k.CrossEntropyForward(slot->logits, slot->labels, t, vp, vocab_softmax_,
                               slot->token_losses, slot->ce_lse);
}

// ---- backward-input ----

absl::Status DeviceGptStage::BackwardInput(int64_t micro_batch_id, absl::Span<const float> d_output,
                                           float loss_grad_scale, std::vector<float>* d_input) {
  Slot* slot = FindSlot(micro_batch_id);
  if (slot == nullptr || !slot->training) {
    return absl::NotFoundError(absl::StrCat("device stage: no stash for micro-batch ",
                                            micro_batch_id, " (Forward not run, or W done)"));
  }
  if (slot->phase != Slot::Phase::kForwardDone) {
    return absl::FailedPreconditionError(
        absl::StrCat("BackwardInput of micro-batch ", micro_batch_id, " already ran"));
  }
  const int64_t t = slot->b * slot->s, h = config_.hidden_size;
  if (layout_.has_loss_head) {
    host_dloss_.resize(t);
    for (int64_t i = 0; i < t; ++i) host_dloss_[i] = loss_grad_scale * slot->host_loss_mask[i];
    MXMACA_RETURN_IF_ERROR(kernels_->CopyToDevice(slot->dloss, host_dloss_.data(), 4 * t));
  } else {
    MXMACA_RETURN_IF_ERROR(CheckSize("d_output", d_output.size(), t * h));
    MXMACA_RETURN_IF_ERROR(kernels_->CopyToDevice(slot->d_output, d_output.data(), 4 * t * h));
  }
  // host_dloss_ and d_output stay valid until the Synchronize below.
  MXMACA_RETURN_IF_ERROR(RunSegment("B", *slot, [&] { return BackwardInputSegment(slot); }));
  if (d_input != nullptr) {
    if (layout_.has_embedding) {
      d_input->clear();
    } else {
      d_input->resize(t * h);
      MXMACA_RETURN_IF_ERROR(kernels_->CopyToHost(d_input->data(), slot->d_input, 4 * t * h));
    }
  }
  MXMACA_RETURN_IF_ERROR(kernels_->Synchronize());
  slot->phase = Slot::Phase::kBackwardInputDone;
  return absl::OkStatus();
}

absl::Status DeviceGptStage::BackwardInputSegment(Slot* slot) {
  DeviceKernels& k = *kernels_;
  Scratch& sc = *scratch_;
  const int64_t t = slot->b * slot->s, h = config_.hidden_size, vp = config_.padded_vocab_size;
  float* d_cur = sc.grad_a;
  float* d_next = sc.grad_b;
  if (layout_.has_loss_head) {
    // dlogits in place of the logits (W's output-weight gradient reads them).
    MXMACA_RETURN_IF_ERROR(k.CrossEntropyBackward(slot->logits, slot->labels, slot->ce_lse,
                                                  slot->dloss, t, vp, vocab_softmax_,
                                                  slot->logits));
    MXMACA_RETURN_IF_ERROR(modules::LinearBackwardInput(
        k, slot->logits, device_param(ids_.output_weight), t, h, vp, slot->d_lnf_out));
    MXMACA_RETURN_IF_ERROR(modules::Norm(config_).BackwardInput(
        k, slot->d_lnf_out, slot->final_input, device_param(ids_.final_norm_weight), slot->lnf_mean,
        slot->lnf_rstd, t, h, d_cur, scratch_->gamma));
  } else {
    MXMACA_RETURN_IF_ERROR(k.CopyDeviceToDevice(d_cur, slot->d_output, 4 * t * h));
  }
  for (int i = static_cast<int>(slot->layers.size()) - 1; i >= 0; --i) {
    MXMACA_RETURN_IF_ERROR(layers_[i].BackwardInput(LayerCallFor(*slot, i, true), &slot->layers[i],
                                                    d_cur, d_next, &scratch_->layer));
    std::swap(d_cur, d_next);
  }
  if (layout_.has_embedding) {
    if (config_.hidden_dropout > 0.0f) {
      return k.DropoutBackward(d_cur, slot->d_embedding, t * h, config_.hidden_dropout,
                               slot->rng_keys + KeyIndex(-1, DropoutSite::kEmbedding), 0);
    }
    return k.CopyDeviceToDevice(slot->d_embedding, d_cur, 4 * t * h);
  }
  return k.CopyDeviceToDevice(slot->d_input, d_cur, 4 * t * h);
}

}  // namespace mxmaca::layers::device
