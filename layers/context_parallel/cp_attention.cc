// layers/context_parallel/cp_attention.cc: see cp_attention.h.
#include "layers/context_parallel/cp_attention.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "layers/context_parallel/pending_transfers.h"

namespace mxmaca::layers::cp {
namespace {

// Stopwatch: adds the seconds between construction and destruction to *sink.
class Stopwatch {
 public:
  explicit Stopwatch(double* sink) : sink_(sink), start_(absl::Now()) {}
  ~Stopwatch() { *sink_ += absl::ToDoubleSeconds(absl::Now() - start_); }

 private:
  double* sink_;
  absl::Time start_;
};

absl::Status Annotate(const absl::Status& st, int64_t rank, absl::string_view phase, int64_t step) {
  if (st.ok()) return st;
  return absl::Status(st.code(), absl::StrCat("context-parallel attention CP rank ", rank, ", ",
                                              phase, " ring step ", step, ": ", st.message()));
}

}  // namespace

double CpAttentionTimes::HiddenFraction() const {
  if (transfer_seconds <= 0.0) return 1.0;
  return std::clamp(1.0 - wait_seconds / transfer_seconds, 0.0, 1.0);
}

void CpAttentionTimes::Add(const CpAttentionTimes& o) {
  compute_seconds += o.compute_seconds;
  post_seconds += o.post_seconds;
  wait_seconds += o.wait_seconds;
  transfer_seconds += o.transfer_seconds;
  total_seconds += o.total_seconds;
  messages_sent += o.messages_sent;
  bytes_sent += o.bytes_sent;
}

ContextParallelAttention::ContextParallelAttention(const RingAttentionConfig& config,
                                                   transport::Communicator* comm,
                                                   const transport::ProcessGroup& group,
                                                   const Options& options)
    : config_(config), comm_(comm), group_(group), options_(options) {
  rank_ = group.rank_in_group;
  block_elems_ = config.b * config.groups * config.layout.LocalSeq() * config.head_dim;
}

int64_t ContextParallelAttention::StateBytes(const RingAttentionConfig& config, int num_threads) {
  const int64_t ring = std::max(RingAttentionForward::StateBytes(config, num_threads),
                                RingAttentionBackward::StateBytes(config, num_threads));
  const int64_t cp = config.layout.cp_size;
  const int64_t block_bytes = 2 * config.b * config.groups * config.layout.LocalSeq() *
                              config.head_dim * static_cast<int64_t>(sizeof(float));
  const int64_t kv_buffers = cp == 1 ? 0 : (cp == 2 ? 1 : 2);
  const int64_t dkv_buffers = cp == 1 ? 0 : 2;
  return ring + (kv_buffers + dkv_buffers) * block_bytes;
}

absl::StatusOr<std::unique_ptr<ContextParallelAttention>> ContextParallelAttention::Create(
    const RingAttentionConfig& config, transport::Communicator* comm,
    const transport::ProcessGroup& cp_group, const Options& options) {
  if (comm == nullptr) {
    return absl::InvalidArgumentError("context-parallel attention: null communicator");
  }
  // Validates the config (shapes, layout) before anything is sized from it.
  auto probe = RingAttentionForward::Create(config);
  if (!probe.ok()) return probe.status();
  probe->reset();
  if (cp_group.size() != config.layout.cp_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "context-parallel attention: group ", cp_group.name(), " has ", cp_group.size(),
        " ranks but the layout's context-parallel size is ", config.layout.cp_size));
  }
  if (cp_group.rank_in_group < 0 || cp_group.rank_in_group >= cp_group.size() ||
      cp_group.global_rank() != comm->rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("context-parallel attention: group ", cp_group.name(), " rank_in_group ",
                     cp_group.rank_in_group, " is not the communicator's rank ", comm->rank()));
  }
  std::unique_ptr<ContextParallelAttention> a(
      new ContextParallelAttention(config, comm, cp_group, options));
  auto reservation = CappedReservation::Make(
      options.memory_cap, StateBytes(config, std::max(1, options.num_threads)),
      absl::StrCat("context-parallel attention state and K/V ring buffers (s_local ",
                   config.layout.LocalSeq(), ", CP ", config.layout.cp_size, ")"));
  if (!reservation.ok()) return reservation.status();
  a->reservation_ = std::move(*reservation);
  const int64_t cp = config.layout.cp_size;
  if (cp > 1) {
    a->kv_[1].resize(2 * a->block_elems_);
    if (cp > 2) a->kv_[0].resize(2 * a->block_elems_);
    a->dkv_[0].resize(2 * a->block_elems_);
    a->dkv_[1].resize(2 * a->block_elems_);
  }
  return a;
}

void ContextParallelAttention::PostBlock(const char* what, int64_t step, const float* a,
                                         const float* b, float* ra, float* rb,
                                         PendingTransfers* pending, CpAttentionTimes* times) {
  Stopwatch sw(&times->post_seconds);
  const int cp = static_cast<int>(config_.layout.cp_size);
  const int next = static_cast<int>((rank_ + 1) % cp);
  const int prev = static_cast<int>((rank_ + cp - 1) % cp);
  const std::string w(what);
  const std::string half_a = w.substr(0, w.find('/'));
  const std::string half_b = w.substr(w.find('/') + 1);
  const auto name = [&](const char* dir, const std::string& t, int peer) {
    return absl::StrCat(dir, " ", t, " of ring step ", step, dir[0] == 's' ? " to" : " from",
                        " CP rank ", peer);
  };
  const transport::DataType f32 = transport::DataType::kFloat32;
  comm_->Send(group_, next, a, block_elems_, f32, pending->Track(name("send", half_a, next)));
  comm_->Send(group_, next, b, block_elems_, f32, pending->Track(name("send", half_b, next)));
  comm_->Recv(group_, prev, ra, block_elems_, f32,
              pending->Track(name("recv", half_a, prev), /*measure_latency=*/true));
  comm_->Recv(group_, prev, rb, block_elems_, f32,
              pending->Track(name("recv", half_b, prev), /*measure_latency=*/true));
  times->messages_sent += 2;
  times->bytes_sent += 2 * block_elems_ * static_cast<int64_t>(sizeof(float));
}

absl::Status ContextParallelAttention::WaitFor(const char* phase, int64_t step,
                                               PendingTransfers* pending, CpAttentionTimes* times) {
  absl::Status st;
  {
    Stopwatch sw(&times->wait_seconds);
    st = pending->Wait(options_.transfer_timeout);
  }
  times->transfer_seconds += pending->latency_seconds();
  return Annotate(st, rank_, phase, step);
}

absl::Status ContextParallelAttention::Forward(const kernels::ExecContext& ctx, const float* q,
                                               const float* k, const float* v,
                                               const int32_t* doc_start, float* out, float* lse,
                                               CpAttentionTimes* times) {
  CpAttentionTimes local;
  CpAttentionTimes* t = times != nullptr ? times : &local;
  *t = CpAttentionTimes();
  Stopwatch total(&t->total_seconds);
  if (k == nullptr || v == nullptr || out == nullptr || lse == nullptr) {
    return absl::InvalidArgumentError(
        "context-parallel attention forward: k, v, out or lse is null");
  }
  const int64_t cp = config_.layout.cp_size;
  std::unique_ptr<RingAttentionForward> fwd;
  {
    Stopwatch sw(&t->compute_seconds);
    auto created = RingAttentionForward::Create(config_);
    if (!created.ok()) return created.status();
    fwd = std::move(*created);
    absl::Status st = fwd->Begin(ctx, rank_, q, doc_start);
    if (!st.ok()) return Annotate(st, rank_, "forward", 0);
  }
  const float* held_k = k;
  const float* held_v = v;
  for (int64_t i = 0; i < cp; ++i) {
    const int64_t src = ((rank_ - i) % cp + cp) % cp;
    PendingTransfers pending;
    float* recv = nullptr;
    if (i < cp - 1) {
      recv = kv_[(i + 1) % 2].data();
      PostBlock("K/V", i, held_k, held_v, recv, recv + block_elems_, &pending, t);
    }
    {
      Stopwatch sw(&t->compute_seconds);
      absl::Status st = fwd->Step(ctx, src, held_k, held_v);
      if (!st.ok()) return Annotate(st, rank_, "forward", i);
    }
    if (i < cp - 1) {
      absl::Status st = WaitFor("forward", i, &pending, t);
      if (!st.ok()) return st;
      held_k = recv;
      held_v = recv + block_elems_;
    }
  }
  Stopwatch sw(&t->compute_seconds);
  return Annotate(fwd->Finish(ctx, out, lse), rank_, "forward finish,", cp - 1);
}

absl::Status ContextParallelAttention::Backward(const kernels::ExecContext& ctx, const float* q,
                                                const float* k, const float* v,
                                                const int32_t* doc_start, const float* out,
                                                const float* lse, const float* dout, float* dq,
                                                float* dk, float* dv, CpAttentionTimes* times) {
  CpAttentionTimes local;
  CpAttentionTimes* t = times != nullptr ? times : &local;
  *t = CpAttentionTimes();
  Stopwatch total(&t->total_seconds);
  if (k == nullptr || v == nullptr || dq == nullptr || dk == nullptr || dv == nullptr) {
    return absl::InvalidArgumentError(
        "context-parallel attention backward: k, v, dq, dk or dv is null");
  }
  const int64_t cp = config_.layout.cp_size;
  std::unique_ptr<RingAttentionBackward> bwd;
  {
    Stopwatch sw(&t->compute_seconds);
    auto created = RingAttentionBackward::Create(config_);
    if (!created.ok()) return created.status();
    bwd = std::move(*created);
    absl::Status st = bwd->Begin(ctx, rank_, q, doc_start, out, dout, lse);
    if (!st.ok()) return Annotate(st, rank_, "backward", 0);
  }
  const float* held_k = k;
  const float* held_v = v;
  // The travelling dK/dV of the held block: zeros for the own block at step 0 (CP = 1:
  // the caller's dk/dv directly).
  float* held_dk = cp == 1 ? dk : dkv_[0].data();
  float* held_dv = cp == 1 ? dv : dkv_[0].data() + block_elems_;
  std::fill(held_dk, held_dk + block_elems_, 0.0f);
  std::fill(held_dv, held_dv + block_elems_, 0.0f);
  std::unique_ptr<PendingTransfers> dkv_pending;  // the dK/dV posted at the previous step
  for (int64_t i = 0; i < cp; ++i) {
    const int64_t src = ((rank_ - i) % cp + cp) % cp;
    PendingTransfers kv_pending;
    float* recv_kv = nullptr;
    if (i < cp - 1) {
      recv_kv = kv_[(i + 1) % 2].data();
      PostBlock("K/V", i, held_k, held_v, recv_kv, recv_kv + block_elems_, &kv_pending, t);
    }
    if (dkv_pending != nullptr) {
      absl::Status st = WaitFor("backward (dK/dV)", i - 1, dkv_pending.get(), t);
      if (!st.ok()) return st;
      dkv_pending.reset();
    }
    {
      Stopwatch sw(&t->compute_seconds);
      absl::Status st = bwd->Step(ctx, src, held_k, held_v, held_dk, held_dv, /*accumulate=*/true);
      if (!st.ok()) return Annotate(st, rank_, "backward", i);
    }
    if (cp > 1) {
      float* recv_dk = i == cp - 1 ? dk : dkv_[(i + 1) % 2].data();
      float* recv_dv = i == cp - 1 ? dv : dkv_[(i + 1) % 2].data() + block_elems_;
      dkv_pending = std::make_unique<PendingTransfers>();
      PostBlock("dK/dV", i, held_dk, held_dv, recv_dk, recv_dv, dkv_pending.get(), t);
      held_dk = recv_dk;
      held_dv = recv_dv;
    }
    if (i < cp - 1) {
      absl::Status st = WaitFor("backward (K/V)", i, &kv_pending, t);
      if (!st.ok()) return st;
      held_k = recv_kv;
      held_v = recv_kv + block_elems_;
    }
  }
  if (dkv_pending != nullptr) {
    absl::Status st = WaitFor("backward (dK/dV)", cp - 1, dkv_pending.get(), t);
    if (!st.ok()) return st;
  }
  Stopwatch sw(&t->compute_seconds);
  return Annotate(bwd->Finish(ctx, dq), rank_, "backward finish,", cp - 1);
}

}  // namespace mxmaca::layers::cp
