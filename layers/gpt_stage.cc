// layers/gpt_stage.cc
#include "layers/gpt_stage.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/elementwise.h"
#include "layers/chunked_loss_head.h"
#include "layers/context_parallel/cp_batch.h"
#include "layers/gpt_stage_device_state.h"
#include "layers/modules/embedding.h"
#include "layers/modules/linear.h"
#include "layers/modules/norm.h"
#include "layers/moe/dispatch/dispatcher_factory.h"

namespace mxmaca::layers {

namespace cpu = ::mxmaca::kernels::cpu;

namespace {

template <typename T>
void CopyInto(StashBuffer<T>* dst, MemoryTracker* tracker, absl::Span<const T> src) {
  dst->Allocate(tracker, static_cast<int64_t>(src.size()));
  if (!src.empty()) std::memcpy(dst->data(), src.data(), src.size() * sizeof(T));
}

absl::Status CheckSize(const char* what, size_t got, int64_t want) {
  if (static_cast<int64_t>(got) == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": got ", got, " elements, expected ", want));
}

absl::Status CheckIds(const char* what, absl::Span<const int32_t> ids, int64_t limit) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= limit) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, "[", i, "] = ", ids[i], ", expected in [0, ", limit, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

GptStage::GptStage(const GptConfig& config, const StageLayout& layout,
                   device::DeviceKernels* kernels)
    : config_(config), layer_config_(config), layout_(layout) {
  ctx_.num_threads = config.num_threads;
  ctx_.precision = config.precision;
  if (kernels == nullptr) {
    owned_kernels_ = std::make_unique<device::CpuDeviceKernels>(ctx_);
    kernels_ = owned_kernels_.get();
  } else {
    kernels_ = kernels;
  }
}

absl::StatusOr<std::unique_ptr<GptStage>> GptStage::Create(const GptConfig& config,
                                                           const StageLayout& layout,
                                                           int64_t arena_multiple,
                                                           const TensorParallelContext* tp,
                                                           const ExpertParallelContext* ep,
                                                           const cp::ContextParallelContext* cp) {
  return CreateOn(config, layout, arena_multiple, tp, ep, cp, nullptr);
}

absl::StatusOr<std::unique_ptr<GptStage>> GptStage::CreateOn(
    const GptConfig& config, const StageLayout& layout, int64_t arena_multiple,
    const TensorParallelContext* tp, const ExpertParallelContext* ep,
    const cp::ContextParallelContext* cp, device::DeviceKernels* kernels) {
  MXMACA_RETURN_IF_ERROR(config.Validate());
  if (arena_multiple <= 0 || arena_multiple % 16 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("GptStage: arena_multiple ", arena_multiple,
                                                   " is not a positive multiple of 16"));
  }
  TensorParallelContext tp_ctx;
  if (tp != nullptr) tp_ctx = *tp;
  MXMACA_RETURN_IF_ERROR(ValidateTensorParallelContext(tp_ctx));
  MXMACA_RETURN_IF_ERROR(
      ValidateTensorParallelConfig(config, tp_ctx.size, tp_ctx.sequence_parallel));
  cp::ContextParallelContext cp_ctx;
  if (cp != nullptr) cp_ctx = *cp;
  MXMACA_RETURN_IF_ERROR(cp::ValidateContextParallelContext(cp_ctx));
  cp::CpLayout cp_layout;
  if (cp_ctx.enabled()) {
    absl::StatusOr<cp::CpLayout> made = cp::MakeCpLayout(config.seq_length, cp_ctx.size,
                                                         tp_ctx.size, tp_ctx.sequence_parallel);
    if (!made.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--seq-length ", config.seq_length, " with --context-parallel-size ", cp_ctx.size,
          tp_ctx.sp() ? absl::StrCat(" and --tensor-model-parallel-size ", tp_ctx.size,
                                     " --sequence-parallel")
                      : "",
          ": ", made.status().message()));
    }
    cp_layout = *made;
    if (config.attention_dropout > 0.0f) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--context-parallel-size ", cp_ctx.size, " needs --attention-dropout 0 (got ",
          config.attention_dropout, "): the ring attention has no dropout"));
    }
  }
  // Expert parallelism: this rank's experts. MoE token group (layers/moe/moe_layer.h): the
  // ranks that route disjoint parts of a micro-batch — with EP > 1 and SP each TP rank
  // routes its own rows (TP, or TP x CP with context parallelism), otherwise every TP rank
  // routes all of its CP rank's tokens (the CP group); Megatron divides the z-loss
  // coefficient by that group's size (moe_z_loss_coeff / tp_cp size).
  GptConfig rank_config = config;
  const bool expert_parallel = config.moe && config.moe->expert_model_parallel_size > 1;
  if (expert_parallel) {
    const int64_t p = config.moe->expert_model_parallel_size;
    if (ep == nullptr || ep->comm == nullptr || ep->group.size() != p) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GptStage: --expert-model-parallel-size ", p,
          " needs this rank's expert-parallel group of ", p, " ranks and a communicator"));
    }
  }
  TensorParallelContext token_group;  // size 1: tokens not split
  const bool tp_split = expert_parallel && tp_ctx.sp();
  const absl::Duration timeout = tp_ctx.size > 1 ? tp_ctx.timeout : cp_ctx.timeout;
  if (config.moe && tp_split && cp_ctx.enabled()) {
    if (!ep->tensor_and_context_parallel_group) {
      return absl::InvalidArgumentError(
          "GptStage: MoE with EP, SP and CP needs the tensor-and-context-parallel group");
    }
    token_group = GroupContext(ep->comm, *ep->tensor_and_context_parallel_group, timeout);
  } else if (config.moe && tp_split) {
    token_group = GroupContext(tp_ctx.comm, tp_ctx.group, timeout);
  } else if (config.moe && cp_ctx.enabled()) {
    token_group = GroupContext(cp_ctx.comm, cp_ctx.group, timeout);
  }
  const bool expert_region = expert_parallel && ep->expert_data_parallel_group.has_value();
  if (config.moe && (expert_parallel || token_group.size > 1)) {
    auto moe = std::make_shared<moe::MoELayerConfig>(*config.moe);
    if (expert_parallel) moe->expert_model_parallel_rank = ep->group.rank_in_group;
    moe->experts_after_dense = expert_region;
    moe->router.z_loss_coeff /= static_cast<double>(token_group.size);
    rank_config.moe = std::move(moe);
  }
  std::unique_ptr<GptStage> stage(new GptStage(rank_config, layout, kernels));
  stage->tp_ = tp_ctx;
  stage->moe_token_group_ = token_group;
  stage->cp_ = cp_ctx;
  stage->cp_layout_ = cp_layout;
  stage->layer_config_ = LocalLayerConfig(rank_config, tp_ctx.size);
  stage->vocab_ = VocabShardOf(rank_config, tp_ctx.rank, tp_ctx.size);
  MXMACA_ASSIGN_OR_RETURN(stage->ids_, RegisterGptParameters(rank_config, layout, &stage->store_,
                                                             tp_ctx.rank, tp_ctx.size));
  if (expert_region) {
    // The routed experts after everything else, from a bucket-aligned offset.
    MXMACA_ASSIGN_OR_RETURN(stage->expert_region_begin_, stage->store_.AlignNextTo(arena_multiple));
    for (int64_t l = layout.first_layer; l < layout.last_layer; ++l) {
      if (!rank_config.is_moe_layer(l)) continue;
      MXMACA_RETURN_IF_ERROR(moe::RegisterMoEParameters(*rank_config.moe, l, &stage->store_,
                                                        moe::MoEParameterParts::kRoutedExperts));
    }
    stage->has_expert_region_ = true;
    stage->expert_dp_ = GroupContext(ep->comm, *ep->expert_data_parallel_group, tp_ctx.timeout);
  }
  stage->store_.Finalize(arena_multiple);
  if (!expert_region) stage->expert_region_begin_ = stage->store_.arena_elements();
  if (expert_parallel && layout.num_layers() > 0) {
    moe::dispatch::DispatcherOptions o;
    o.comm = ep->comm;
    o.ep_group = ep->group;
    o.num_experts = static_cast<int>(rank_config.moe->router.num_experts);
    MXMACA_ASSIGN_OR_RETURN(stage->dispatcher_, moe::dispatch::CreateTokenDispatcher(
                                                    rank_config.moe->token_dispatcher_type, o,
                                                    ep->ranks_per_node));
  }
  for (size_t i = 0; i < stage->ids_.layers.size(); ++i) {
    const int64_t layer = layout.first_layer + static_cast<int64_t>(i);
    std::unique_ptr<moe::MoELayer> moe;
    if (rank_config.is_moe_layer(layer)) {
      MXMACA_ASSIGN_OR_RETURN(moe::MoELayer created,
                              moe::MoELayer::Create(*rank_config.moe, layer, &stage->store_));
      moe = std::make_unique<moe::MoELayer>(std::move(created));
      if (expert_parallel) {
        moe::MoEExpertParallel mep;
        mep.dispatcher = stage->dispatcher_.get();
        mep.timeout = tp_ctx.timeout;
        MXMACA_RETURN_IF_ERROR(moe->SetExpertParallel(mep));
        for (int id : moe->expert_parameter_ids()) stage->expert_shard_ids_.insert(id);
      }
      if (stage->moe_token_group_.size > 1) {
        // Stable addresses: the stage lives on the heap.
        const TensorParallelContext* group = &stage->moe_token_group_;
        const TensorParallelContext* tp_group = &stage->tp_;
        moe::MoETokenGroup tg;
        tg.size = group->size;
        tg.all_reduce = [group](float* data, int64_t n) { return AllReduceSum(*group, data, n); };
        // The router's and shared expert's gradients: summed over TP here (the TP ranks
        // routed different rows); over CP by the dp-cp gradient buckets.
        if (tp_split) {
          tg.all_reduce_replicated_grads = [tp_group](float* data, int64_t n) {
            return AllReduceSum(*tp_group, data, n);
          };
        }
        MXMACA_RETURN_IF_ERROR(moe->SetTokenGroup(tg));
      }
      moe::MoELayerStats stats;
      stats.layer = layer;
      stats.tokens_per_expert.assign(static_cast<size_t>(config.moe->router.num_experts), 0.0);
      stage->moe_stats_.push_back(std::move(stats));
    }
    stage->layers_.emplace_back(&stage->store_, stage->ids_.layers[i], moe.get());
    stage->moe_layers_.push_back(std::move(moe));
  }
  const int n = static_cast<int>(layout.num_layers());
  const int r = static_cast<int>(std::min<int64_t>(config.recompute_num_layers, n));
  if (config.recompute_granularity == RecomputeGranularity::kFull &&
      config.recompute_method == RecomputeMethod::kUniform) {
    // Megatron: chunks of recompute_num_layers layers, each checkpointed as a whole.
    for (int l = 0; l < n; l += std::max(r, 1)) {
      stage->chunks_.push_back({l, std::min(l + std::max(r, 1), n), true});
    }
  } else {
    // Block: the first recompute_num_layers layers of the stage checkpointed one by one.
    const bool full = config.recompute_granularity == RecomputeGranularity::kFull;
    for (int l = 0; l < n; ++l) stage->chunks_.push_back({l, l + 1, full && l < r});
  }
  return stage;
}

absl::StatusOr<int64_t> GptStage::StashBytes(int64_t micro_batch_id) const {
  auto it = stashes_.find(micro_batch_id);
  if (it == stashes_.end()) {
    return absl::NotFoundError(absl::StrCat("no stash for micro-batch ", micro_batch_id));
  }
  return it->second->bytes();
}

absl::Status GptStage::ValidateInput(const MicroBatchInput& in, Mode mode) const {
  const int64_t b = in.micro_batch_size, s = in.seq_length, t = b * s;
  if (b <= 0 || s <= 0 || s > config_.seq_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro-batch ", in.micro_batch_id, ": micro_batch_size ", b, " x seq_length ",
                     s, ", expected both > 0 and seq_length <= ", config_.seq_length));
  }
  if (cp_.enabled() && s != cp_layout_.LocalSeq()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "micro-batch ", in.micro_batch_id, ": seq_length ", s, ", expected this context-parallel "
        "rank's ", cp_layout_.LocalSeq(), " tokens (--seq-length ", config_.seq_length,
        " / --context-parallel-size ", cp_.size, ")"));
  }
  if (device_ != nullptr &&
      (b > device_options().micro_batch_size || s > device_options().seq_length)) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro-batch ", in.micro_batch_id, ": micro_batch_size ", b, " x seq_length ",
                     s, ", expected 1..", device_options().micro_batch_size, " x 1..",
                     device_options().seq_length, " (the device stage's slot size)"));
  }
  if (device_ != nullptr && mode == Mode::kInference) {
    return absl::UnimplementedError(
        "InferenceForward on a device backend (mxmaca generate runs on --device cpu)");
  }
  if (cp_.enabled() && mode == Mode::kInference) {
    return absl::UnimplementedError("inference with --context-parallel-size > 1");
  }
  if (tp_.sp() && s % tp_.size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro-batch ", in.micro_batch_id, ": seq_length ", s,
                     " is not divisible by --tensor-model-parallel-size ", tp_.size,
                     " (--sequence-parallel shards the sequence)"));
  }
  const bool learned = config_.position_embedding_type == PositionEmbeddingType::kLearnedAbsolute;
  if (layout_.has_embedding) {
    MXMACA_RETURN_IF_ERROR(CheckSize("tokens", in.tokens.size(), t));
    MXMACA_RETURN_IF_ERROR(CheckIds("tokens", in.tokens, config_.vocab_size));
    if (learned && !in.position_ids.empty()) {
      MXMACA_RETURN_IF_ERROR(CheckSize("position_ids", in.position_ids.size(), t));
      MXMACA_RETURN_IF_ERROR(
          CheckIds("position_ids", in.position_ids, config_.max_position_embeddings));
    }
  } else {
    MXMACA_RETURN_IF_ERROR(
        CheckSize("hidden", in.hidden.size(), local_tokens(b, s) * config_.hidden_size));
  }
  if (!in.doc_start.empty()) {
    MXMACA_RETURN_IF_ERROR(CheckSize("doc_start", in.doc_start.size(), t));
    for (int64_t i = 0; i < t; ++i) {
      if (in.doc_start[i] < 0 || in.doc_start[i] > Position(i % s)) {
        return absl::InvalidArgumentError(absl::StrCat("doc_start[", i, "] = ", in.doc_start[i],
                                                       ", expected in [0, ", Position(i % s),
                                                       "] (its position in the row)"));
      }
    }
  }
  if (layout_.has_loss_head && mode != Mode::kInference) {
    MXMACA_RETURN_IF_ERROR(CheckSize("labels", in.labels.size(), t));
    MXMACA_RETURN_IF_ERROR(CheckIds("labels", in.labels, config_.vocab_size));
    if (!in.loss_mask.empty()) {
      MXMACA_RETURN_IF_ERROR(CheckSize("loss_mask", in.loss_mask.size(), t));
    }
  }
  return absl::OkStatus();
}

LayerCall GptStage::MakeCall(const MicroBatchStash& st, int local_layer, bool training) {
  LayerCall call;
  call.config = &layer_config_;
  call.kernels = kernels_;
  call.ctx = ctx_;
  call.tp = &tp_;
  call.global_layer = layout_.first_layer + local_layer;
  call.b = st.b;
  call.s = st.s;
  call.doc_start = st.doc_start.empty() ? nullptr : st.doc_start.data();
  call.rope_positions = rope_backend_;
  call.cp_attention = cp_attention_.get();
  call.training = training;
  call.iteration = st.iteration;
  call.micro_batch_id = st.micro_batch_id;
  call.tracker = training ? &tracker_ : &eval_tracker_;
  call.moe_aux_loss_grad_scale = st.moe_aux_loss_grad_scale;
  if (device_ != nullptr) {
    call.params = params_;
    call.dropout_keys = SlotDropoutKeys(st, local_layer);
    call.fused_attention = device_options().fused_attention;
  }
  return call;
}

absl::Status GptStage::PrepareRopePositions(int64_t b, int64_t s) {
  const int64_t t = b * s;
  rope_positions_.resize(t);
  for (int64_t i = 0; i < t; ++i) rope_positions_[i] = static_cast<int32_t>(Position(i % s));
  rope_backend_ = device_ != nullptr ? DeviceRopePositions() : rope_positions_.data();
  return Upload(const_cast<int32_t*>(rope_backend_), rope_positions_.data(), 4 * t);
}

absl::Status GptStage::Upload(void* dst, const void* src, int64_t bytes) {
  if (dst == src || bytes == 0) return absl::OkStatus();
  return kernels_->CopyToDevice(dst, src, bytes);
}

absl::Status GptStage::Download(void* dst, const void* src, int64_t bytes) {
  if (dst == src || bytes == 0) return absl::OkStatus();
  return kernels_->CopyToHost(dst, src, bytes);
}

absl::Status GptStage::RunSegment(const char* op, const MicroBatchStash& st,
                                  const device::Segment& segment) {
  if (device_ == nullptr) return segment();
  return RunDeviceSegment(op, st, segment);
}

namespace {

// StageDropout: dropout of this rank's [rows, h] hidden states on the backend with masks
// keyed by the global [b, s, h] element index (under SP one offset per sequence; with CP
// one call per run of consecutive original positions, cp_context.h). `key` is where the
// kernels read the key (backend memory).
absl::Status StageDropout(device::DeviceKernels& k, const TensorParallelContext& tp,
                          const cp::ContextParallelContext& cpc, const cp::CpLayout& layout,
                          bool forward, const float* x, float* y, int64_t b, int64_t s, int64_t h,
                          float p, const kernels::RngKey* key) {
  auto run = [&](int64_t at, int64_t n, int64_t offset) {
    return forward ? k.DropoutForward(x + at, y + at, n, p, key, offset)
                   : k.DropoutBackward(x + at, y + at, n, p, key, offset);
  };
  if (cpc.enabled()) {
    for (const cp::CpTokenRun& r : cp::CpLocalTokenRuns(layout, cpc.rank, b, tp.sp() ? tp.rank : 0,
                                                        tp.sp() ? tp.size : 1)) {
      MXMACA_RETURN_IF_ERROR(run(r.local_row * h, r.rows * h, r.global_row * h));
    }
    return absl::OkStatus();
  }
  if (!tp.sp()) return run(0, b * s * h, 0);
  const int64_t n = (s / tp.size) * h;
  for (int64_t bi = 0; bi < b; ++bi) {
    MXMACA_RETURN_IF_ERROR(run(bi * n, n, SequenceShardIndexOffset(tp, bi, s, h)));
  }
  return absl::OkStatus();
}

}  // namespace

const kernels::RngKey* GptStage::EmbeddingDropoutKey(const MicroBatchStash& st,
                                                     kernels::RngKey* host) const {
  const kernels::RngKey* slot_keys = SlotDropoutKeys(st, -1);
  if (slot_keys != nullptr) return slot_keys;
  *host = DropoutKey(config_.seed, -1, DropoutSite::kEmbedding, st.iteration, st.micro_batch_id);
  return host;
}

absl::Status GptStage::EmbeddingForward(const MicroBatchStash& st, bool training, float* x0) {
  const int64_t b = st.b, s = st.s, t = b * s, h = config_.hidden_size;
  // Full [T, h] embedding: here x0 itself, except under SP (scattered afterwards).
  float* full = tp_.sp() ? sp_full_.Get(t * h) : x0;
  // VocabParallelEmbedding: this shard's rows (others zero), summed over TP. Each row is
  // non-zero on exactly one rank, so the sum is exact.
  MXMACA_RETURN_IF_ERROR(modules::WordEmbeddingForward(
      *kernels_, VocabRowsOf(), st.tokens.data(), backend_param(ids_.word_embeddings), t, h, full));
  if (tp_.size > 1) MXMACA_RETURN_IF_ERROR(ReduceFromTensorParallelRegion(tp_, full, t * h));
  if (ids_.position_embeddings >= 0) {
    MXMACA_RETURN_IF_ERROR(modules::PositionEmbeddingAdd(
        *kernels_, st.position_ids.data(), backend_param(ids_.position_embeddings), t, h, full));
  }
  if (tp_.sp()) MXMACA_RETURN_IF_ERROR(ScatterToSequenceParallelRegion(tp_, full, b, s, h, x0));
  if (training && config_.hidden_dropout > 0.0f) {
    kernels::RngKey host_key;
    MXMACA_RETURN_IF_ERROR(StageDropout(*kernels_, tp_, cp_, cp_layout_, true, x0, x0, b, s, h,
                                        config_.hidden_dropout,
                                        EmbeddingDropoutKey(st, &host_key)));
  }
  return absl::OkStatus();
}

absl::Status GptStage::StageDropoutBackward(const float* dy, float* dx, const MicroBatchStash& st,
                                            kernels::RngKey* host_key) {
  return StageDropout(*kernels_, tp_, cp_, cp_layout_, false, dy, dx, st.b, st.s,
                      config_.hidden_size, config_.hidden_dropout,
                      EmbeddingDropoutKey(st, host_key));
}

float* GptStage::HiddenIn(int i, MicroBatchStash* st, MemoryTracker* tracker, float* stage_out) {
  const int64_t tl = local_tokens(st->b, st->s), h = config_.hidden_size;
  if (i < static_cast<int>(layers_.size())) {
    st->layers[i].input.Allocate(tracker, tl * h);
    return st->layers[i].input.data();
  }
  if (layout_.has_loss_head) {
    st->final_input.Allocate(tracker, tl * h);
    return st->final_input.data();
  }
  return stage_out;
}

absl::Status GptStage::RunForward(const MicroBatchInput& in, Mode mode, MicroBatchStash* st,
                                  StageOutput* output) {
  MXMACA_RETURN_IF_ERROR(ValidateInput(in, mode));
  MXMACA_RETURN_IF_ERROR(EnsureCpAttention(in.micro_batch_size));
  const bool training = mode == Mode::kTrain;
  MemoryTracker* tracker = training ? &tracker_ : &eval_tracker_;
  const int64_t b = in.micro_batch_size, s = in.seq_length, t = b * s, h = config_.hidden_size,
                tl = local_tokens(b, s);
  const int n = static_cast<int>(layers_.size());
  st->micro_batch_id = in.micro_batch_id;
  st->iteration = in.iteration;
  st->moe_aux_loss_grad_scale = in.moe_aux_loss_grad_scale;
  st->b = b;
  st->s = s;
  st->layers.resize(n);
  *output = StageOutput();

  // The inputs where the backend reads them (host -> device copies on a device backend;
  // memcpy into the stash on the CPU backend), before the segment.
  MXMACA_RETURN_IF_ERROR(UploadInto(&st->doc_start, tracker, in.doc_start));
  MXMACA_RETURN_IF_ERROR(PrepareRopePositions(b, s));
  if (device_ != nullptr && training) MXMACA_RETURN_IF_ERROR(UploadDropoutKeys(st));
  // stage_out: where the last layer writes a stage without the loss head (the caller's
  // vector on the CPU backend).
  float* stage_out = nullptr;
  if (!layout_.has_loss_head) {
    output->hidden.assign(tl * h, 0.0f);
    stage_out = device_ != nullptr ? DeviceStageOutput() : output->hidden.data();
  } else if (mode != Mode::kInference) {
    output->token_losses.assign(t, 0.0f);
  }
  float* x0 = HiddenIn(0, st, tracker, stage_out);
  if (layout_.has_embedding) {
    MXMACA_RETURN_IF_ERROR(UploadInto(&st->tokens, tracker, in.tokens));
    if (ids_.position_embeddings >= 0) {
      std::vector<int32_t> pos(in.position_ids.begin(), in.position_ids.end());
      if (pos.empty()) {
        pos.resize(t);
        for (int64_t i = 0; i < t; ++i) pos[i] = static_cast<int32_t>(Position(i % s));
      }
      MXMACA_RETURN_IF_ERROR(
          UploadInto(&st->position_ids, tracker, absl::Span<const int32_t>(pos)));
    }
  } else {
    MXMACA_RETURN_IF_ERROR(Upload(x0, in.hidden.data(), 4 * tl * h));
  }
  if (device_ != nullptr && layout_.has_loss_head) {
    MXMACA_RETURN_IF_ERROR(UploadInto(&st->labels, tracker, in.labels));
  }

  MXMACA_RETURN_IF_ERROR(RunSegment(training ? "F" : "eval-F", *st, [&] {
    return ForwardCompute(in, mode, st, output, x0, stage_out);
  }));

  // Outputs to the host, then what the host computes from them.
  if (!layout_.has_loss_head) {
    MXMACA_RETURN_IF_ERROR(Download(output->hidden.data(), stage_out, 4 * tl * h));
  } else if (mode != Mode::kInference) {
    MXMACA_RETURN_IF_ERROR(Download(output->token_losses.data(), DeviceTokenLosses(output), 4 * t));
  }
  MXMACA_RETURN_IF_ERROR(kernels_->Synchronize());
  if (!training) {
    // Eval and inference keep nothing: the stash's inputs go back to the pool.
    st->tokens.Free();
    st->position_ids.Free();
  }
  if (!layout_.has_loss_head || mode == Mode::kInference) return tracker_.cap_error();
  if (in.loss_mask.empty()) {
    st->loss_mask.Allocate(tracker, t);
    std::fill(st->loss_mask.data(), st->loss_mask.data() + t, 1.0f);
  } else {
    CopyInto(&st->loss_mask, tracker, in.loss_mask);
  }
  double loss_sum = 0.0, count = 0.0;
  for (int64_t i = 0; i < t; ++i) {
    loss_sum += static_cast<double>(output->token_losses[i]) * st->loss_mask.data()[i];
    count += st->loss_mask.data()[i];
  }
  output->loss_sum = loss_sum;
  output->num_tokens = count;
  if (cp_.enabled()) {
    // The CP loss rule (cp_batch.h): numerator and token count summed over the CP ranks.
    MXMACA_ASSIGN_OR_RETURN(
        cp::CpLossPart total,
        cp::AllReduceCpLoss(cp_.comm, cp_.group, cp::CpLossPart{loss_sum, count}, cp_.timeout));
    output->loss_sum = total.loss_sum;
    output->num_tokens = total.tokens;
  }
  if (training && device_ == nullptr) CopyInto(&st->labels, tracker, in.labels);
  return tracker_.cap_error();
}

absl::Status GptStage::ForwardCompute(const MicroBatchInput& in, Mode mode, MicroBatchStash* st,
                                      StageOutput* output, float* x0, float* stage_out) {
  const bool training = mode == Mode::kTrain;
  MemoryTracker* tracker = training ? &tracker_ : &eval_tracker_;
  if (layout_.has_embedding) {
    tracker_.set_activity("the forward of the embedding", -1, in.micro_batch_id);
    MXMACA_RETURN_IF_ERROR(EmbeddingForward(*st, training, x0));
  }
  const bool selective = config_.recompute_granularity == RecomputeGranularity::kSelective;
  for (const Chunk& chunk : chunks_) {
    for (int i = chunk.begin; i < chunk.end; ++i) {
      LayerCall call = MakeCall(*st, i, training);
      moe::MoEMetrics metrics;
      if (training && moe_layers_[static_cast<size_t>(i)]) call.moe_metrics = &metrics;
      float* out = HiddenIn(i + 1, st, tracker, stage_out);
      ForwardKeep keep = ForwardKeep::kAll;
      if (!training || chunk.recompute) {
        keep = ForwardKeep::kInputOnly;
      } else if (selective) {
        keep = ForwardKeep::kNoProbs;
      }
      MXMACA_RETURN_IF_ERROR(tracker_.cap_error());
      tracker_.set_activity("the forward", call.global_layer, in.micro_batch_id);
      MXMACA_RETURN_IF_ERROR(layers_[i].Forward(call, &st->layers[i], out, keep, &scratch_));
      if (call.moe_metrics != nullptr) AddMoEStats(static_cast<int64_t>(i), metrics);
      if (!training || (chunk.recompute && i != chunk.begin)) st->layers[i].input.Free();
    }
  }
  MXMACA_RETURN_IF_ERROR(tracker_.cap_error());
  if (!layout_.has_loss_head) return absl::OkStatus();
  return HeadForward(in, mode, st, output);
}

absl::Status GptStage::HeadForward(const MicroBatchInput& in, Mode mode, MicroBatchStash* st,
                                   StageOutput* output) {
  const bool training = mode == Mode::kTrain;
  MemoryTracker* tracker = training ? &tracker_ : &eval_tracker_;
  const int64_t b = st->b, s = st->s, t = b * s, h = config_.hidden_size, tl = local_tokens(b, s),
                vl = vocab_.rows;
  tracker_.set_activity("the forward of the loss head", -1, in.micro_batch_id);
  const bool ln = config_.normalization == Normalization::kLayerNorm;
  // Final norm on this rank's rows; with SP its output is gathered (the column-parallel
  // output layer's input), lnf_out holding the full [T, h].
  st->lnf_out.Allocate(tracker, t * h);
  if (ln) st->lnf_mean.Allocate(tracker, tl);
  st->lnf_rstd.Allocate(tracker, tl);
  float* lnf = tp_.sp() ? sp_local_.Get(tl * h) : st->lnf_out.data();
  MXMACA_RETURN_IF_ERROR(modules::Norm(config_).Forward(
      *kernels_, st->final_input.data(), backend_param(ids_.final_norm_weight),
      ids_.final_norm_bias >= 0 ? backend_param(ids_.final_norm_bias) : nullptr, tl, h, lnf,
      ln ? st->lnf_mean.data() : nullptr, st->lnf_rstd.data(), gamma_scratch_.Get(h)));
  if (tp_.sp()) {
    MXMACA_RETURN_IF_ERROR(GatherFromSequenceParallelRegion(tp_, lnf, b, s, h, st->lnf_out.data()));
  }
  const float* w_out = backend_param(ids_.output_weight);
  if (mode == Mode::kInference) {  // the CPU backend only (ValidateInput)
    std::vector<float> last(b * h);
    for (int64_t bi = 0; bi < b; ++bi) {
      std::memcpy(&last[bi * h], st->lnf_out.data() + (bi * s + s - 1) * h, h * sizeof(float));
    }
    std::vector<float> local_logits;
    float* logits_out = nullptr;
    output->logits.assign(b * config_.padded_vocab_size, 0.0f);
    if (tp_.size == 1) {
      logits_out = output->logits.data();
    } else {
      local_logits.resize(b * vl);
      logits_out = local_logits.data();
    }
    MXMACA_RETURN_IF_ERROR(
        modules::LinearProduct(*kernels_, last.data(), w_out, b, h, vl, logits_out));
    if (tp_.size > 1) {
      MXMACA_RETURN_IF_ERROR(
          GatherFromTensorParallelRegion(tp_, logits_out, b, vl, output->logits.data()));
    }
    return absl::OkStatus();
  }
  // Output layer (column-parallel over the vocabulary) and the vocab-parallel
  // cross-entropy: whole when this rank's T tokens fit one chunk (the logits [T, VP/p] kept
  // for B and W), else chunk by chunk keeping only lse (layers/chunked_loss_head.h; the CPU
  // backend only).
  float* token_losses = DeviceTokenLosses(output);
  const int32_t* labels = device_ != nullptr ? st->labels.data() : in.labels.data();
  if (device_ == nullptr && config_.chunked_loss_head(t, vl)) {
    st->loss_head_chunked = true;
    st->lse.Allocate(tracker, t);
    return ChunkedLossHeadForward(ctx_, tp_, vocab_, config_.loss_chunk_tokens, t, h,
                                  st->lnf_out.data(), w_out, labels, token_losses, st->lse.data(),
                                  tracker);
  }
  st->logits.Allocate(tracker, t * vl);
  // The output layer (ColumnParallelLinear over the vocabulary, no bias).
  MXMACA_RETURN_IF_ERROR(
      modules::LinearProduct(*kernels_, st->lnf_out.data(), w_out, t, h, vl, st->logits.data()));
  st->lse.Allocate(tracker, t);
  if (tp_.size == 1) {
    return kernels_->CrossEntropyForward(st->logits.data(), labels, t, vl, vocab_.softmax,
                                         token_losses, st->lse.data());
  }
  if (device_ == nullptr) {
    return VocabParallelCrossEntropyForward(ctx_, tp_, vocab_, st->logits.data(), t, labels,
                                            token_losses, st->lse.data());
  }
  // A device backend: the vocab-parallel cross-entropy's host arithmetic on a host copy of
  // this rank's logits [T, VP/p] (the backend has no row-max / sum-exp kernels yet;
  // docs/CUDA.md "Not done"), the losses and logsumexp copied back.
  std::vector<float> host_logits(t * vl), loss(t), lse(t);
  MXMACA_RETURN_IF_ERROR(Download(host_logits.data(), st->logits.data(), 4 * t * vl));
  MXMACA_RETURN_IF_ERROR(kernels_->Synchronize());
  TensorParallelContext host_tp = tp_;
  host_tp.device = nullptr;
  MXMACA_RETURN_IF_ERROR(VocabParallelCrossEntropyForward(
      ctx_, host_tp, vocab_, host_logits.data(), t, in.labels.data(), loss.data(), lse.data()));
  MXMACA_RETURN_IF_ERROR(Upload(token_losses, loss.data(), 4 * t));
  MXMACA_RETURN_IF_ERROR(Upload(st->lse.data(), lse.data(), 4 * t));
  return kernels_->Synchronize();
}

absl::Status GptStage::EnsureCpAttention(int64_t b) {
  if (!cp_.enabled() || (cp_attention_ && cp_b_ == b)) return absl::OkStatus();
  cp::RingAttentionConfig rc;
  rc.b = b;
  rc.heads = layer_config_.num_attention_heads;
  rc.groups = layer_config_.query_groups();
  rc.head_dim = layer_config_.head_dim();
  rc.layout = cp_layout_;
  cp::ContextParallelAttention::Options options;
  options.transfer_timeout = cp_.timeout;
  options.num_threads = ctx_.num_threads;
  cp_attention_.reset();
  MXMACA_ASSIGN_OR_RETURN(cp_attention_,
                          cp::ContextParallelAttention::Create(rc, cp_.comm, cp_.group, options));
  cp_b_ = b;
  return absl::OkStatus();
}

absl::Status GptStage::Forward(const MicroBatchInput& input, StageOutput* output) {
  if (FindStash(input.micro_batch_id) != nullptr) {
    return absl::AlreadyExistsError(
        absl::StrCat("micro-batch ", input.micro_batch_id, " already has a stash on this stage"));
  }
  if (device_ != nullptr) {
    MXMACA_ASSIGN_OR_RETURN(MicroBatchStash * st, AcquireSlot(input.micro_batch_id));
    absl::Status status = RunForward(input, Mode::kTrain, st, output);
    if (!status.ok()) {
      ReleaseSlot(st);
      return status;
    }
    forward_order_.push_back(input.micro_batch_id);
    return absl::OkStatus();
  }
  auto st = std::make_unique<MicroBatchStash>();
  absl::Status status = RunForward(input, Mode::kTrain, st.get(), output);
  if (!status.ok()) return status;
  stashes_[input.micro_batch_id] = std::move(st);
  forward_order_.push_back(input.micro_batch_id);
  return absl::OkStatus();
}

absl::Status GptStage::EvalForward(const MicroBatchInput& input, StageOutput* output) {
  if (device_ != nullptr) {
    // A slot for the call only (freed at once).
    MXMACA_ASSIGN_OR_RETURN(MicroBatchStash * st, AcquireSlot(-1));
    absl::Status status = RunForward(input, Mode::kEval, st, output);
    ReleaseSlot(st);
    return status;
  }
  MicroBatchStash st;
  return RunForward(input, Mode::kEval, &st, output);
}

absl::Status GptStage::InferenceForward(const MicroBatchInput& input, StageOutput* output) {
  MicroBatchStash st;
  return RunForward(input, Mode::kInference, &st, output);
}

MicroBatchStash* GptStage::FindStash(int64_t micro_batch_id) {
  if (device_ != nullptr) return FindSlot(micro_batch_id);
  auto it = stashes_.find(micro_batch_id);
  return it == stashes_.end() ? nullptr : it->second.get();
}

void GptStage::ReleaseStash(int64_t micro_batch_id) {
  if (device_ != nullptr) {
    if (MicroBatchStash* st = FindSlot(micro_batch_id)) ReleaseSlot(st);
    return;
  }
  stashes_.erase(micro_batch_id);
}

}  // namespace mxmaca::layers
