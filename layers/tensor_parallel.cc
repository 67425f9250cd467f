// layers/tensor_parallel.cc: see tensor_parallel.h.
#include "layers/tensor_parallel.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"

namespace mxmaca::layers {

TensorParallelContext TensorParallelContextFor(const transport::RankView& view,
                                               transport::Communicator* comm,
                                               bool sequence_parallel) {
  TensorParallelContext tp;
  tp.comm = comm;
  tp.group = view.tensor_model_parallel_group();
  tp.rank = view.tensor_model_parallel_rank();
  tp.size = view.tensor_model_parallel_world_size();
  tp.sequence_parallel = sequence_parallel;
  return tp;
}

TensorParallelContext GroupContext(transport::Communicator* comm,
                                   const transport::ProcessGroup& group, absl::Duration timeout) {
  TensorParallelContext c;
  c.comm = comm;
  c.group = group;
  c.rank = group.rank_in_group;
  c.size = group.size();
  c.timeout = timeout;
  return c;
}

absl::Status ValidateTensorParallelContext(const TensorParallelContext& tp) {
  if (tp.size < 1 || tp.rank < 0 || tp.rank >= tp.size) {
    return absl::InvalidArgumentError(absl::StrCat("tensor parallel context: rank ", tp.rank,
                                                   " size ", tp.size,
                                                   ", expected 0 <= rank < size"));
  }
  if (tp.size == 1) return absl::OkStatus();
  if (tp.comm == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor parallel context: size ", tp.size, " without a communicator"));
  }
  if (tp.group.size() != tp.size || tp.group.rank_in_group != tp.rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor parallel context: group ", tp.group.name(), " has ", tp.group.size(),
                     " members and rank_in_group ", tp.group.rank_in_group, ", expected ", tp.size,
                     " and ", tp.rank));
  }
  return absl::OkStatus();
}

absl::Status ValidateTensorParallelConfig(const GptConfig& c, int tp, bool sequence_parallel) {
  if (tp < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tensor-model-parallel-size: got ", tp, ", expected >= 1"));
  }
  auto divisible = [tp](const char* what, int64_t v) -> absl::Status {
    if (v % tp == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(what, " ", v,
                                                   " is not divisible by "
                                                   "--tensor-model-parallel-size ",
                                                   tp));
  };
  if (absl::Status s = divisible("--num-attention-heads", c.num_attention_heads); !s.ok()) {
    return s;
  }
  if (absl::Status s = divisible("--num-query-groups (query groups)", c.query_groups()); !s.ok()) {
    return s;
  }
  if (absl::Status s = divisible("--ffn-hidden-size", c.ffn_hidden_size); !s.ok()) return s;
  if (absl::Status s = divisible("padded vocabulary size", c.padded_vocab_size); !s.ok()) {
    return s;
  }
  if (sequence_parallel && tp > 1) {
    if (absl::Status s = divisible("--seq-length (with --sequence-parallel)", c.seq_length);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

GptConfig LocalLayerConfig(const GptConfig& config, int tp) {
  if (tp == 1) return config;
  GptConfig c = config;
  c.kv_channels = config.head_dim();
  c.num_query_groups = config.query_groups() / tp;
  c.num_attention_heads = config.num_attention_heads / tp;
  c.ffn_hidden_size = config.ffn_hidden_size / tp;
  return c;
}

VocabShard VocabShardOf(const GptConfig& config, int rank, int size) {
  VocabShard v;
  v.rows = config.padded_vocab_size / size;
  v.start = rank * v.rows;
  v.real = std::clamp<int64_t>(config.vocab_size - v.start, 0, v.rows);
  v.softmax = config.softmax_over_padded_vocab ? v.rows : v.real;
  return v;
}

bool CountsTowardGradNorm(const ParameterInfo& info, int tp_rank) {
  return tp_rank == 0 || !info.is_whole();
}

namespace {

// Wait: posts one collective through `post` (which receives the done callback) and
// blocks until it completes or tp.timeout passes.
template <typename PostFn>
absl::Status Wait(const TensorParallelContext& tp, const char* op, int64_t count, PostFn post) {
  struct State {
    absl::Mutex mu;
    bool done = false;
    absl::Status status;
  };
  auto state = std::make_shared<State>();
  post([state](const transport::CollectiveInfo& info, absl::Status status) {
    absl::MutexLock lock(&state->mu);
    state->status =
        status.ok()
            ? status
            : absl::Status(status.code(), absl::StrCat(info.ToString(), ": ", status.message()));
    state->done = true;
  });
  absl::MutexLock lock(&state->mu);
  if (!state->mu.AwaitWithTimeout(absl::Condition(&state->done), tp.timeout)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "tensor parallel ", op, " of ", count, " elements on ", tp.group.name(), " (rank ", tp.rank,
        " of ", tp.size, ") did not complete within ", absl::FormatDuration(tp.timeout)));
  }
  return state->status;
}

// Scratch: a per-thread buffer (each TP rank computes on its own thread), grown once.
float* Scratch(int64_t n) {
  thread_local std::vector<float> buf;
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(n);
  return buf.data();
}

// HostOp: a helper's work on host copies of its tensors, with a host context.
using HostOp =
    std::function<absl::Status(const TensorParallelContext& host, const float* in, float* out)>;

// Staged: a device backend's tensors (tp.device): `in` [n_in] copied to the host, `op` run
// on the copies, its output [n_out] copied back to `out` (both synchronous).
absl::Status Staged(const TensorParallelContext& tp, const float* in, int64_t n_in, float* out,
                    int64_t n_out, const HostOp& op) {
  device::DeviceKernels& k = *tp.device;
  std::vector<float> host_in(static_cast<size_t>(n_in)), host_out(static_cast<size_t>(n_out));
  if (n_in > 0) MXMACA_RETURN_IF_ERROR(k.CopyToHost(host_in.data(), in, 4 * n_in));
  MXMACA_RETURN_IF_ERROR(k.Synchronize());
  TensorParallelContext host = tp;
  host.device = nullptr;
  MXMACA_RETURN_IF_ERROR(op(host, host_in.data(), host_out.data()));
  if (n_out > 0) MXMACA_RETURN_IF_ERROR(k.CopyToDevice(out, host_out.data(), 4 * n_out));
  return k.Synchronize();
}

}  // namespace

absl::Status AllReduceSum(const TensorParallelContext& tp, float* data, int64_t count) {
  if (tp.size == 1 || count == 0) return absl::OkStatus();
  if (tp.device != nullptr) {
    return Staged(tp, data, count, data, count,
                  [count](const TensorParallelContext& host, const float* in, float* out) {
                    std::memcpy(out, in, 4 * count);
                    return AllReduceSum(host, out, count);
                  });
  }
  return Wait(tp, "all_reduce", count, [&](transport::DoneCallback done) {
    tp.comm->AllReduceSum(tp.group, data, data, count, std::move(done));
  });
}

absl::Status AllGather(const TensorParallelContext& tp, const float* send, float* recv,
                       int64_t count) {
  if (tp.device != nullptr) {
    return Staged(tp, send, count, recv, tp.size * count,
                  [count](const TensorParallelContext& host, const float* in, float* out) {
                    return AllGather(host, in, out, count);
                  });
  }
  if (tp.size == 1) {
    if (count > 0 && send != recv) std::memmove(recv, send, count * sizeof(float));
    return absl::OkStatus();
  }
  return Wait(tp, "all_gather", count, [&](transport::DoneCallback done) {
    tp.comm->AllGather(tp.group, send, recv, count, transport::DataType::kFloat32, std::move(done));
  });
}

absl::Status ReduceScatterSum(const TensorParallelContext& tp, const float* send, float* recv,
                              int64_t count) {
  if (tp.device != nullptr) {
    return Staged(tp, send, tp.size * count, recv, count,
                  [count](const TensorParallelContext& host, const float* in, float* out) {
                    return ReduceScatterSum(host, in, out, count);
                  });
  }
  if (tp.size == 1) {
    if (count > 0 && send != recv) std::memmove(recv, send, count * sizeof(float));
    return absl::OkStatus();
  }
  return Wait(tp, "reduce_scatter", count, [&](transport::DoneCallback done) {
    tp.comm->ReduceScatterSum(tp.group, send, recv, count, std::move(done));
  });
}

absl::Status ReduceFromTensorParallelRegion(const TensorParallelContext& tp, float* x, int64_t n) {
  return AllReduceSum(tp, x, n);
}

absl::Status GatherFromSequenceParallelRegion(const TensorParallelContext& tp, const float* local,
                                              int64_t b, int64_t s, int64_t w, float* full) {
  const int64_t p = tp.size, sl = s / p, block = b * sl * w;
  if (tp.device != nullptr) {
    return Staged(tp, local, block, full, p * block,
                  [=](const TensorParallelContext& host, const float* in, float* out) {
                    return GatherFromSequenceParallelRegion(host, in, b, s, w, out);
                  });
  }
  if (p == 1 || b == 1) return AllGather(tp, local, full, block);
  // recv = [p, b, s/p, w]; reorder to [b, s, w] (rank r's rows go to positions r s/p...).
  float* gathered = Scratch(p * block);
  if (absl::Status st = AllGather(tp, local, gathered, block); !st.ok()) return st;
  for (int64_t r = 0; r < p; ++r) {
    for (int64_t bi = 0; bi < b; ++bi) {
      std::memcpy(full + (bi * s + r * sl) * w, gathered + (r * b + bi) * sl * w,
                  sl * w * sizeof(float));
    }
  }
  return absl::OkStatus();
}

absl::Status ReduceScatterToSequenceParallelRegion(const TensorParallelContext& tp,
                                                   const float* full, int64_t b, int64_t s,
                                                   int64_t w, float* local) {
  const int64_t p = tp.size, sl = s / p, block = b * sl * w;
  if (tp.device != nullptr) {
    return Staged(tp, full, p * block, local, block,
                  [=](const TensorParallelContext& host, const float* in, float* out) {
                    return ReduceScatterToSequenceParallelRegion(host, in, b, s, w, out);
                  });
  }
  if (p == 1 || b == 1) return ReduceScatterSum(tp, full, local, block);
  // send = [p, b, s/p, w]: block r holds rank r's positions of every sequence.
  float* send = Scratch(p * block);
  for (int64_t r = 0; r < p; ++r) {
    for (int64_t bi = 0; bi < b; ++bi) {
      std::memcpy(send + (r * b + bi) * sl * w, full + (bi * s + r * sl) * w,
                  sl * w * sizeof(float));
    }
  }
  return ReduceScatterSum(tp, send, local, block);
}

absl::Status ScatterToSequenceParallelRegion(const TensorParallelContext& tp, const float* full,
                                             int64_t b, int64_t s, int64_t w, float* local) {
  const int64_t p = tp.size, sl = s / p;
  for (int64_t bi = 0; bi < b; ++bi) {
    float* dst = local + bi * sl * w;
    const float* src = full + (bi * s + tp.rank * sl) * w;
    if (tp.device != nullptr) {
      MXMACA_RETURN_IF_ERROR(tp.device->CopyDeviceToDevice(dst, src, sl * w * sizeof(float)));
    } else {
      std::memcpy(dst, src, sl * w * sizeof(float));
    }
  }
  return absl::OkStatus();
}

absl::Status GatherFromTensorParallelRegion(const TensorParallelContext& tp, const float* local,
                                            int64_t n, int64_t w, float* full) {
  const int64_t p = tp.size;
  if (tp.device != nullptr) {
    return Staged(tp, local, n * w, full, p * n * w,
                  [=](const TensorParallelContext& host, const float* in, float* out) {
                    return GatherFromTensorParallelRegion(host, in, n, w, out);
                  });
  }
  if (p == 1) return AllGather(tp, local, full, n * w);
  float* gathered = Scratch(p * n * w);  // [p, n, w]
  if (absl::Status st = AllGather(tp, local, gathered, n * w); !st.ok()) return st;
  for (int64_t r = 0; r < p; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(full + i * p * w + r * w, gathered + (r * n + i) * w, w * sizeof(float));
    }
  }
  return absl::OkStatus();
}

int64_t SequenceShardIndexOffset(const TensorParallelContext& tp, int64_t bi, int64_t s,
                                 int64_t w) {
  if (!tp.sp()) return bi * s * w;
  return (bi * s + tp.rank * (s / tp.size)) * w;
}

}  // namespace mxmaca::layers
