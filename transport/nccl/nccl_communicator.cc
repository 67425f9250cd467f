// transport/nccl/nccl_communicator.cc: NcclCommunicator — posts, the poller thread,
// timeouts and the communicators' life cycle (CUDA build).
#include "transport/nccl/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "transport/nccl/nccl_plan.h"
#include "transport/nccl/nccl_status.h"

namespace mxmaca::transport::nccl {

static_assert(sizeof(ncclUniqueId) == kUniqueIdBytes, "NCCL_UNIQUE_ID_BYTES changed");

namespace {

// Event: a completion event shared by the operations of one launch (a batch shares one).
using Event = std::shared_ptr<CUevent_st>;

// Launch: enqueues one operation's nccl* call(s) on `stream` (inside the launch's
// ncclGroupStart / ncclGroupEnd); `context` names the operation for error messages.
using LaunchFn =
    std::function<absl::Status(ncclComm_t comm, cudaStream_t stream, const std::string& context)>;

absl::Status Prefixed(const absl::Status& s, const CollectiveInfo& info) {
  return absl::Status(s.code(), absl::StrCat("NcclCommunicator: ", info.ToString(), ": ",
                                             s.message()));
}

}  // namespace

// Operation: one valid post.
struct Operation {
  CollectiveInfo info;
  DoneCallback done;
  absl::Time posted;
  LaunchFn launch;
  Event event;  // set once launched
};
using OpPtr = std::shared_ptr<Operation>;

// Finished: an operation taken out of the tables, with the status its `done` gets.
struct Finished {
  OpPtr op;
  absl::Status status;
};

class NcclCommunicator::Impl {
 public:
  // GroupState: one registered group and its communicator.
  struct GroupState {
    ProcessGroup group;
    ncclComm_t comm = nullptr;
    absl::Status broken;  // non-OK once aborted (timeout) or failed (async error)
  };

  Impl(int rank, int world_size, Options options)
      : rank_(rank), world_size_(world_size), options_(std::move(options)) {}
  ~Impl();

  absl::Status Init(const std::vector<ProcessGroup>& groups, const AllGatherFn& all_gather,
                    StreamPair streams);

  CollectiveInfo Post(const ProcessGroup& group, CollectiveInfo info, absl::Status invalid,
                      LaunchFn launch, DoneCallback done);
  void BeginBatch();
  absl::Status EndBatch();
  std::vector<absl::Status> CheckTimeouts(absl::Time now);
  int pending_operations() const;
  void SetComputeStream(void* s) {
    absl::MutexLock lock(&mu_);
    compute_ = static_cast<cudaStream_t>(s);
  }
  StreamPair streams() const {
    absl::MutexLock lock(&mu_);
    return StreamPair{compute_, comm_stream_};
  }

  const int rank_;
  const int world_size_;
  const Options options_;

 private:
  absl::Time Now() const { return options_.clock ? options_.clock() : absl::Now(); }
  // Launch: enqueues `ops` (compute event, wait, group, completion event) and moves them
  // to pending_. On failure nothing is pending and the error is returned.
  absl::Status Launch(const std::vector<OpPtr>& ops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FailGroup: marks the group broken with `why`, aborts its communicator and moves every
  // pending operation of it to `out`, the one in `first` (if any) with `first_status`.
  void FailGroup(int64_t group_id, const absl::Status& why, std::vector<Finished>* out,
                 const Operation* first, const absl::Status& first_status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Poll();
  static void Run(std::vector<Finished> finished);

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::map<int64_t, GroupState> groups_ ABSL_GUARDED_BY(mu_);
  SequenceCounters counters_ ABSL_GUARDED_BY(mu_);
  std::deque<OpPtr> pending_ ABSL_GUARDED_BY(mu_);  // launched, in stream order
  std::vector<OpPtr> batch_ ABSL_GUARDED_BY(mu_);
  bool batching_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  cudaStream_t compute_ ABSL_GUARDED_BY(mu_) = nullptr;
  cudaStream_t comm_stream_ = nullptr;
  bool owns_stream_ = false;
  cudaEvent_t ready_ = nullptr;  // recorded on compute_ before each launch (under mu_)
  std::thread poller_;
};

// ---------------------------------------------------------------------------------------
// Start-up and shut-down.

absl::Status NcclCommunicator::Impl::Init(const std::vector<ProcessGroup>& groups,
                                          const AllGatherFn& all_gather, StreamPair streams) {
  const std::string where = absl::StrCat("NcclCommunicator rank ", rank_, " (device ",
                                         options_.device, ")");
  int count = 0;  // cudaErrorInsufficientDriver leaves it untouched
  const cudaError_t probe = cudaGetDeviceCount(&count);
  if (probe != cudaSuccess) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, ": no GPU: cudaGetDeviceCount returned ", cudaGetErrorName(probe)));
  }
  if (count == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": no GPU: cudaGetDeviceCount found 0 devices"));
  }
  if (options_.device < 0 || options_.device >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": device outside [0, ", count, ") of this machine"));
  }
  MXMACA_CUDART_RETURN_IF_ERROR(cudaSetDevice(options_.device), where);

  const MakeUniqueIdFn make_id = [&where]() -> absl::StatusOr<std::string> {
    ncclUniqueId id;
    MXMACA_NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id), where);
    return std::string(id.internal, sizeof(id.internal));
  };
  MXMACA_ASSIGN_OR_RETURN(auto ids,
                          ExchangeUniqueIds(rank_, world_size_, groups, make_id, all_gather));

  if (streams.communication != nullptr) {
    comm_stream_ = static_cast<cudaStream_t>(streams.communication);
  } else {
    MXMACA_CUDART_RETURN_IF_ERROR(
        cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking), where);
    owns_stream_ = true;
  }
  MXMACA_CUDART_RETURN_IF_ERROR(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming),
                                where);

  // Ascending group id on every rank: one global order, so no cycle of ranks each blocked
  // in the ncclCommInitRank of a different group.
  std::vector<const ProcessGroup*> sorted;
  for (const ProcessGroup& g : groups) sorted.push_back(&g);
  std::sort(sorted.begin(), sorted.end(),
            [](const ProcessGroup* a, const ProcessGroup* b) { return a->id < b->id; });
  absl::MutexLock lock(&mu_);
  compute_ = static_cast<cudaStream_t>(streams.compute);
  for (const ProcessGroup* g : sorted) {
    ncclUniqueId id;
    const std::string& bytes = ids.at(g->id);
    std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
    ncclComm_t comm = nullptr;
    MXMACA_NCCL_RETURN_IF_ERROR(ncclCommInitRank(&comm, g->size(), id, g->rank_in_group),
                                absl::StrCat(where, ": creating the communicator of ",
                                             g->name(), " (group ", g->id, ", ", g->size(),
                                             " ranks)"));
    GroupState& state = groups_[g->id];
    state.group = *g;
    state.comm = comm;
  }
  poller_ = std::thread([this] { Poll(); });
  return absl::OkStatus();
}

NcclCommunicator::Impl::~Impl() {
  std::vector<Finished> cancelled;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    cv_.SignalAll();
  }
  if (poller_.joinable()) poller_.join();
  cudaSetDevice(options_.device);
  {
    absl::MutexLock lock(&mu_);
    std::set<int64_t> busy;
    for (OpPtr& op : pending_) {
      busy.insert(op->info.group_id);
      cancelled.push_back({op, absl::CancelledError(absl::StrCat(
                                   "NcclCommunicator: ", op->info.ToString(),
                                   ": still in flight when the communicator was destroyed"))});
    }
    for (OpPtr& op : batch_) {
      cancelled.push_back({op, absl::CancelledError(absl::StrCat(
                                   "NcclCommunicator: ", op->info.ToString(),
                                   ": in a batch never ended before the communicator was "
                                   "destroyed"))});
    }
    pending_.clear();
    batch_.clear();
    for (auto& [id, state] : groups_) {
      if (state.comm == nullptr) continue;
      // Abort what may still run (or broke); destroy the idle ones in order.
      if (busy.count(id) || !state.broken.ok()) {
        if (state.broken.ok()) ncclCommAbort(state.comm);
      } else {
        ncclCommDestroy(state.comm);
      }
      state.comm = nullptr;
    }
  }
  if (ready_ != nullptr) cudaEventDestroy(ready_);
  if (owns_stream_) cudaStreamDestroy(comm_stream_);
  Run(std::move(cancelled));
}

void NcclCommunicator::Impl::Run(std::vector<Finished> finished) {
  for (Finished& f : finished) {
    if (f.op->done) f.op->done(f.op->info, std::move(f.status));
  }
}

// ---------------------------------------------------------------------------------------
// Posting.

CollectiveInfo NcclCommunicator::Impl::Post(const ProcessGroup& group, CollectiveInfo info,
                                            absl::Status invalid, LaunchFn launch,
                                            DoneCallback done) {
  info.group_id = group.id;
  info.group_name = group.name();
  info.rank = rank_;
  info.bytes = CheckCount(info.count, info.dtype).ok() ? info.count * DataTypeSize(info.dtype)
                                                        : -1;
  absl::Status refuse = CheckMembership(group, rank_, world_size_);
  if (refuse.ok()) refuse = invalid;
  std::vector<Finished> failed;
  {
    absl::MutexLock lock(&mu_);
    auto it = groups_.find(group.id);
    if (refuse.ok()) {
      if (it == groups_.end()) {
        refuse = absl::InvalidArgumentError(absl::StrCat(
            "group ", group.id, " (", group.name(), ") was not given to NcclCommunicator::Create"));
      } else if (it->second.group.ranks != group.ranks) {
        refuse = absl::InvalidArgumentError(absl::StrCat(
            group.name(), " ranks [", absl::StrJoin(group.ranks, ", "),
            "] differ from the group given to Create: [",
            absl::StrJoin(it->second.group.ranks, ", "), "]"));
      } else if (!it->second.broken.ok()) {
        refuse = absl::FailedPreconditionError(
            absl::StrCat("the communicator of ", group.name(),
                         " is no longer usable: ", it->second.broken.message()));
      }
    }
    if (refuse.ok()) {
      if (info.op == CollectiveOp::kSend) {
        info.sequence = counters_.NextPointToPoint(group.id, rank_, info.peer, true);
      } else if (info.op == CollectiveOp::kRecv) {
        info.sequence = counters_.NextPointToPoint(group.id, info.peer, rank_, false);
      } else {
        info.sequence = counters_.NextCollective(group.id);
      }
      auto op = std::make_shared<Operation>();
      op->info = info;
      op->done = std::move(done);
      op->posted = Now();
      op->launch = std::move(launch);
      if (batching_) {
        batch_.push_back(op);
      } else {
        const absl::Status s = Launch({op});
        if (!s.ok()) failed.push_back({op, s});
      }
    }
  }
  if (!refuse.ok()) {
    if (done) done(info, Prefixed(refuse, info));
    return info;
  }
  Run(std::move(failed));
  return info;
}

absl::Status NcclCommunicator::Impl::Launch(const std::vector<OpPtr>& ops) {
  const std::string context =
      ops.size() == 1 ? absl::StrCat("NcclCommunicator: ", ops[0]->info.ToString())
                      : absl::StrCat("NcclCommunicator: batch of ", ops.size(),
                                     " operations from ", ops[0]->info.ToString());
  for (const OpPtr& op : ops) {
    const GroupState& state = groups_.at(op->info.group_id);
    if (!state.broken.ok()) {  // an operation batched before its group failed
      return absl::FailedPreconditionError(
          absl::StrCat(context, ": the communicator of ", op->info.group_name,
                       " is no longer usable: ", state.broken.message()));
    }
  }
  MXMACA_CUDART_RETURN_IF_ERROR(cudaSetDevice(options_.device), context);
  MXMACA_CUDART_RETURN_IF_ERROR(cudaEventRecord(ready_, compute_), context);
  MXMACA_CUDART_RETURN_IF_ERROR(cudaStreamWaitEvent(comm_stream_, ready_, 0), context);
  MXMACA_NCCL_RETURN_IF_ERROR(ncclGroupStart(), context);
  absl::Status first;
  for (const OpPtr& op : ops) {
    const GroupState& state = groups_.at(op->info.group_id);
    first.Update(op->launch(state.comm, comm_stream_, context));
  }
  const ncclResult_t end = ncclGroupEnd();  // always closes the group, even after an error
  MXMACA_RETURN_IF_ERROR(first);
  MXMACA_NCCL_RETURN_IF_ERROR(end, context);
  cudaEvent_t raw = nullptr;
  MXMACA_CUDART_RETURN_IF_ERROR(cudaEventCreateWithFlags(&raw, cudaEventDisableTiming),
                                context);
  Event event(raw, [](cudaEvent_t e) { cudaEventDestroy(e); });
  MXMACA_CUDART_RETURN_IF_ERROR(cudaEventRecord(raw, comm_stream_), context);
  for (const OpPtr& op : ops) {
    op->event = event;
    pending_.push_back(op);
  }
  cv_.SignalAll();
  return absl::OkStatus();
}

void NcclCommunicator::Impl::BeginBatch() {
  absl::MutexLock lock(&mu_);
  batching_ = true;
}

absl::Status NcclCommunicator::Impl::EndBatch() {
  std::vector<Finished> failed;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (!batching_) return absl::FailedPreconditionError("NcclCommunicator: EndBatch without "
                                                         "BeginBatch");
    batching_ = false;
    std::vector<OpPtr> ops = std::move(batch_);
    batch_.clear();
    if (ops.empty()) return absl::OkStatus();
    status = Launch(ops);
    if (!status.ok()) {
      for (OpPtr& op : ops) failed.push_back({op, status});
    }
  }
  Run(std::move(failed));
  return status;
}

// ---------------------------------------------------------------------------------------
// Completion: the poller thread.

void NcclCommunicator::Impl::FailGroup(int64_t group_id, const absl::Status& why,
                                       std::vector<Finished>* out, const Operation* first,
                                       const absl::Status& first_status) {
  GroupState& state = groups_.at(group_id);
  if (state.broken.ok()) {
    state.broken = why;
    // The in-flight NCCL kernels of this group stop; their events then complete with
    // garbage outputs, so every pending operation of the group fails here.
    ncclCommAbort(state.comm);
  }
  for (auto it = pending_.begin(); it != pending_.end();) {
    if ((*it)->info.group_id != group_id) {
      ++it;
      continue;
    }
    absl::Status s = it->get() == first
                         ? first_status
                         : absl::Status(why.code(), absl::StrCat("NcclCommunicator: ",
                                                                 (*it)->info.ToString(), ": ",
                                                                 why.message()));
    out->push_back({*it, std::move(s)});
    it = pending_.erase(it);
  }
}

void NcclCommunicator::Impl::Poll() {
  cudaSetDevice(options_.device);
  absl::Time last_async_check = absl::InfinitePast();
  for (;;) {
    std::vector<Finished> finished;
    {
      absl::MutexLock lock(&mu_);
      if (pending_.empty() && !stop_) cv_.Wait(&mu_);
      if (stop_) return;
      // One stream: the events complete in post order, so stop at the first not ready.
      while (!pending_.empty()) {
        OpPtr op = pending_.front();
        const cudaError_t q = cudaEventQuery(op->event.get());
        if (q == cudaErrorNotReady) break;
        pending_.pop_front();
        finished.push_back(
            {op, q == cudaSuccess
                     ? absl::OkStatus()
                     : CudaErrorAt(q, "cudaEventQuery(completion event)", __FILE__, __LINE__,
                                   absl::StrCat("NcclCommunicator: ", op->info.ToString()))});
      }
      const absl::Time now = absl::Now();
      if (!pending_.empty() && now - last_async_check >= options_.async_error_interval) {
        last_async_check = now;
        std::set<int64_t> busy;
        for (const OpPtr& op : pending_) busy.insert(op->info.group_id);
        for (int64_t id : busy) {
          GroupState& state = groups_.at(id);
          ncclResult_t async = ncclSuccess;
          ncclResult_t r = ncclCommGetAsyncError(state.comm, &async);
          if (r == ncclSuccess && (async == ncclSuccess || async == ncclInProgress)) continue;
          const absl::Status why = NcclErrorAt(
              r != ncclSuccess ? r : async,
              r != ncclSuccess ? "ncclCommGetAsyncError" : "asynchronous NCCL operation",
              __FILE__, __LINE__,
              absl::StrCat("NcclCommunicator rank ", rank_, ": ", state.group.name(),
                           " (group ", id, ")"));
          FailGroup(id, why, &finished, nullptr, absl::OkStatus());
        }
      }
    }
    Run(std::move(finished));
    absl::MutexLock lock(&mu_);
    if (!pending_.empty() && !stop_) cv_.WaitWithTimeout(&mu_, options_.poll_interval);
  }
}

std::vector<absl::Status> NcclCommunicator::Impl::CheckTimeouts(absl::Time now) {
  std::vector<Finished> finished;
  {
    absl::MutexLock lock(&mu_);
    std::vector<PendingOp> snapshot;
    for (const OpPtr& op : pending_) snapshot.push_back({op->info, op->posted});
    // Oldest first; each group is aborted once, by its oldest timed-out operation.
    std::vector<OpPtr> late;
    for (const OpPtr& op : pending_) {
      if (now - op->posted >= options_.timeout) late.push_back(op);
    }
    for (const OpPtr& op : late) {
      const int64_t id = op->info.group_id;
      if (!groups_.at(id).broken.ok()) continue;  // already failed with its group
      const std::string report =
          TimeoutReport({op->info, op->posted}, groups_.at(id).group.ranks, snapshot, rank_,
                        options_.timeout, now);
      FailGroup(id,
                absl::FailedPreconditionError(absl::StrCat(
                    "aborted after a timeout of ", op->info.group_name, " seq ",
                    op->info.sequence, " (", report, ")")),
                &finished, op.get(), absl::DeadlineExceededError(report));
    }
  }
  std::vector<absl::Status> reports;
  for (const Finished& f : finished) reports.push_back(f.status);
  Run(std::move(finished));
  return reports;
}

int NcclCommunicator::Impl::pending_operations() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(pending_.size() + batch_.size());
}

// ---------------------------------------------------------------------------------------
// NcclCommunicator.

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    int rank, int world_size, const std::vector<ProcessGroup>& groups,
    const AllGatherFn& all_gather, StreamPair streams, Options options) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat("NcclCommunicator: rank ", rank,
                                                   " outside a world of ", world_size));
  }
  auto impl = std::make_unique<Impl>(rank, world_size, std::move(options));
  MXMACA_RETURN_IF_ERROR(impl->Init(groups, all_gather, streams));
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::CreateWithRendezvous(
    ucx::Rendezvous& rendezvous, const std::vector<ProcessGroup>& groups, StreamPair streams,
    Options options) {
  return Create(rendezvous.rank(), rendezvous.world_size(), groups,
                RendezvousAllGather(&rendezvous), streams, std::move(options));
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NcclCommunicator::~NcclCommunicator() = default;

int NcclCommunicator::rank() const { return impl_->rank_; }
int NcclCommunicator::world_size() const { return impl_->world_size_; }
void NcclCommunicator::SetComputeStream(void* s) { impl_->SetComputeStream(s); }
StreamPair NcclCommunicator::streams() const { return impl_->streams(); }
void NcclCommunicator::BeginBatch() { impl_->BeginBatch(); }
absl::Status NcclCommunicator::EndBatch() { return impl_->EndBatch(); }
std::vector<absl::Status> NcclCommunicator::CheckTimeouts(absl::Time now) {
  return impl_->CheckTimeouts(now);
}
int NcclCommunicator::pending_operations() const { return impl_->pending_operations(); }

namespace {

CollectiveInfo Info(CollectiveOp op, DataType dtype, int64_t count, int peer = -1) {
  CollectiveInfo info;
  info.op = op;
  info.dtype = dtype;
  info.count = count;
  info.peer = peer;
  return info;
}

const void* At(const void* p, int64_t elements, DataType dtype) {
  return static_cast<const char*>(p) + elements * DataTypeSize(dtype);
}
void* At(void* p, int64_t elements, DataType dtype) {
  return static_cast<char*>(p) + elements * DataTypeSize(dtype);
}

}  // namespace

CollectiveInfo NcclCommunicator::AllReduceSum(const ProcessGroup& group, const float* send,
                                              float* recv, int64_t count, DoneCallback done) {
  return impl_->Post(
      group, Info(CollectiveOp::kAllReduce, DataType::kFloat32, count),
      CheckCount(count, DataType::kFloat32),
      [=](ncclComm_t comm, cudaStream_t stream, const std::string& context) -> absl::Status {
        if (count == 0) return absl::OkStatus();
        MXMACA_NCCL_RETURN_IF_ERROR(
            ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, stream), context);
        return absl::OkStatus();
      },
      std::move(done));
}

CollectiveInfo NcclCommunicator::AllGather(const ProcessGroup& group, const void* send,
                                           void* recv, int64_t count, DataType dtype,
                                           DoneCallback done) {
  return impl_->Post(
      group, Info(CollectiveOp::kAllGather, dtype, count), CheckCount(count, dtype),
      [=](ncclComm_t comm, cudaStream_t stream, const std::string& context) -> absl::Status {
        if (count == 0) return absl::OkStatus();
        MXMACA_NCCL_RETURN_IF_ERROR(
            ncclAllGather(send, recv, count, ToNcclDataType(dtype), comm, stream), context);
        return absl::OkStatus();
      },
      std::move(done));
}

CollectiveInfo NcclCommunicator::ReduceScatterSum(const ProcessGroup& group, const float* send,
                                                  float* recv, int64_t recv_count,
                                                  DoneCallback done) {
  // CollectiveInfo::count: elements this rank sends, group.size() * recv_count.
  absl::Status invalid = CheckCount(recv_count, DataType::kFloat32);
  int64_t count = recv_count;
  if (invalid.ok() && group.size() > 0) {
    count = recv_count * group.size();
    invalid = CheckCount(count, DataType::kFloat32);
  }
  return impl_->Post(
      group, Info(CollectiveOp::kReduceScatter, DataType::kFloat32, count), invalid,
      [=](ncclComm_t comm, cudaStream_t stream, const std::string& context) -> absl::Status {
        if (recv_count == 0) return absl::OkStatus();
        MXMACA_NCCL_RETURN_IF_ERROR(
            ncclReduceScatter(send, recv, recv_count, ncclFloat32, ncclSum, comm, stream),
            context);
        return absl::OkStatus();
      },
      std::move(done));
}

CollectiveInfo NcclCommunicator::Broadcast(const ProcessGroup& group, int root, void* buffer,
                                           int64_t count, DataType dtype, DoneCallback done) {
  absl::Status invalid = CheckIndex(group, root, "root");
  if (invalid.ok()) invalid = CheckCount(count, dtype);
  const int root_rank = (root >= 0 && root < group.size()) ? group.ranks[root] : -1;
  return impl_->Post(
      group, Info(CollectiveOp::kBroadcast, dtype, count, root_rank), invalid,
      [=](ncclComm_t comm, cudaStream_t stream, const std::string& context) -> absl::Status {
        if (count == 0) return absl::OkStatus();
        MXMACA_NCCL_RETURN_IF_ERROR(
            ncclBroadcast(buffer, buffer, count, ToNcclDataType(dtype), root, comm, stream),
            context);
        return absl::OkStatus();
      },
      std::move(done));
}

namespace {

// PointToPointInvalid: the argument checks of Send / Recv.
absl::Status PointToPointInvalid(const ProcessGroup& group, int peer, int64_t count,
                                 DataType dtype) {
  MXMACA_RETURN_IF_ERROR(CheckIndex(group, peer, "peer"));
  if (peer == group.rank_in_group) {
    return absl::InvalidArgumentError(
        "send/recv to itself (NCCL completes a self-exchange only inside one group: use "
        "AllToAllV)");
  }
  return CheckCount(count, dtype);
}

int PeerRank(const ProcessGroup& group, int peer) {
  return (peer >= 0 && peer < group.size()) ? group.ranks[peer] : -1;
}

}  // namespace

CollectiveInfo NcclCommunicator::Send(const ProcessGroup& group, int peer, const void* buffer,
                                      int64_t count, DataType dtype, DoneCallback done) {
  return impl_->Post(
      group, Info(CollectiveOp::kSend, dtype, count, PeerRank(group, peer)),
      PointToPointInvalid(group, peer, count, dtype),
      [=](ncclComm_t comm, cudaStream_t stream, const std::string& context) -> absl::Status {
        if (count == 0) return absl::OkStatus();
        MXMACA_NCCL_RETURN_IF_ERROR(
            ncclSend(buffer, count, ToNcclDataType(dtype), peer, comm, stream), context);
        return absl::OkStatus();
      },
      std::move(done));
}

CollectiveInfo NcclCommunicator::Recv(const ProcessGroup& group, int peer, void* buffer,
                                      int64_t count, DataType dtype, DoneCallback done) {
  return impl_->Post(
      group, Info(CollectiveOp::kRecv, dtype, count, PeerRank(group, peer)),
      PointToPointInvalid(group, peer, count, dtype),
      [=](ncclComm_t comm, cudaStream_t stream, const std::string& context) -> absl::Status {
        if (count == 0) return absl::OkStatus();
        MXMACA_NCCL_RETURN_IF_ERROR(
            ncclRecv(buffer, count, ToNcclDataType(dtype), peer, comm, stream), context);
        return absl::OkStatus();
      },
      std::move(done));
}

CollectiveInfo NcclCommunicator::AllToAllV(const ProcessGroup& group, const void* send,
                                           const std::vector<int64_t>& send_counts,
                                           const std::vector<int64_t>& send_displs, void* recv,
                                           const std::vector<int64_t>& recv_counts,
                                           const std::vector<int64_t>& recv_displs,
                                           DataType dtype, DoneCallback done) {
  absl::StatusOr<AllToAllVPlan> plan =
      PlanAllToAllV(group, send_counts, send_displs, recv_counts, recv_displs);
  absl::Status invalid = plan.status();
  int64_t count = 0;
  if (plan.ok()) {
    count = plan->total_send;
    invalid = CheckCount(count, dtype);
    if (invalid.ok()) invalid = CheckCount(plan->total_recv, dtype);
  }
  auto shared_plan = std::make_shared<AllToAllVPlan>(plan.ok() ? *plan : AllToAllVPlan());
  return impl_->Post(
      group, Info(CollectiveOp::kAllToAllV, dtype, count), invalid,
      [=](ncclComm_t comm, cudaStream_t stream, const std::string& context) -> absl::Status {
        const ncclDataType_t type = ToNcclDataType(dtype);
        for (const AllToAllVPlan::Transfer& t : shared_plan->transfers) {
          if (t.send_count > 0) {
            MXMACA_NCCL_RETURN_IF_ERROR(ncclSend(At(send, t.send_offset, dtype), t.send_count,
                                                 type, t.peer, comm, stream),
                                        context);
          }
          if (t.recv_count > 0) {
            MXMACA_NCCL_RETURN_IF_ERROR(
                ncclRecv(At(recv, t.recv_offset, dtype), t.recv_count, type, t.peer, comm,
                         stream),
                context);
          }
        }
        return absl::OkStatus();
      },
      std::move(done));
}

}  // namespace mxmaca::transport::nccl
