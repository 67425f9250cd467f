// transport/nccl/nccl_communicator.cc: NcclCommunicator (CUDA build) — start-up, the
// OperationEngine over NCCL calls and CUDA events, the poller thread and the operations'
// launch closures; the bookkeeping is OperationTable's (operation_table.h).
#include "transport/nccl/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "transport/nccl/nccl_plan.h"
#include "transport/nccl/nccl_status.h"
#include "transport/nccl/operation_table.h"

namespace mxmaca::transport::nccl {

static_assert(sizeof(ncclUniqueId) == kUniqueIdBytes, "NCCL_UNIQUE_ID_BYTES changed");

// Impl: the CUDA/NCCL side (the OperationEngine: communicators, streams, events), the
// OperationTable that does the bookkeeping, and the poller thread.
class NcclCommunicator::Impl : public OperationEngine {
 public:
  Impl(int rank, int world_size, Options options)
      : rank_(rank),
        world_size_(world_size),
        options_(std::move(options)),
        table_(rank, world_size, this, options_.clock, options_.timeout) {}
  ~Impl() override;

  absl::Status Init(const std::vector<ProcessGroup>& groups, const AllGatherFn& all_gather,
                    StreamPair streams);

  // OperationEngine (called with the table's lock held).
  absl::StatusOr<std::shared_ptr<void>> Launch(const std::vector<Operation*>& ops,
                                               const std::string& context) override;
  absl::StatusOr<bool> Completed(const std::shared_ptr<void>& completion) override;
  absl::Status AsyncError(int64_t group_id) override;
  void Abort(int64_t group_id) override;

  void SetComputeStream(void* s) {
    absl::MutexLock lock(&stream_mu_);
    compute_ = static_cast<cudaStream_t>(s);
  }
  StreamPair streams() const {
    absl::MutexLock lock(&stream_mu_);
    return StreamPair{compute_, comm_stream_};
  }
  OperationTable& table() { return table_; }
  const OperationTable& table() const { return table_; }

  const int rank_;
  const int world_size_;
  const Options options_;

 private:
  void Poll();

  OperationTable table_;
  // comms_: the communicator of each group; null once aborted. Written by Init (before the
  // poller starts) and under the table's lock (Abort), read under it (Launch, AsyncError).
  std::map<int64_t, ncclComm_t> comms_;
  std::map<int64_t, std::string> group_names_;
  mutable absl::Mutex stream_mu_;
  cudaStream_t compute_ ABSL_GUARDED_BY(stream_mu_) = nullptr;
  cudaStream_t comm_stream_ = nullptr;
  bool owns_stream_ = false;
  cudaEvent_t ready_ = nullptr;  // recorded on compute_ before each launch
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
  SetComputeStream(streams.compute);
  MXMACA_CUDART_RETURN_IF_ERROR(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming),
                                where);

  // Ascending group id on every rank: one global order, so no cycle of ranks each blocked
  // in the ncclCommInitRank of a different group.
  std::vector<const ProcessGroup*> sorted;
  for (const ProcessGroup& g : groups) sorted.push_back(&g);
  std::sort(sorted.begin(), sorted.end(),
            [](const ProcessGroup* a, const ProcessGroup* b) { return a->id < b->id; });
  for (const ProcessGroup* g : sorted) {
    ncclUniqueId id;
    const std::string& bytes = ids.at(g->id);
    std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
    ncclComm_t comm = nullptr;
    MXMACA_NCCL_RETURN_IF_ERROR(ncclCommInitRank(&comm, g->size(), id, g->rank_in_group),
                                absl::StrCat(where, ": creating the communicator of ",
                                             g->name(), " (group ", g->id, ", ", g->size(),
                                             " ranks)"));
    comms_[g->id] = comm;
    group_names_[g->id] = g->name();
    table_.AddGroup(*g);
  }
  poller_ = std::thread([this] { Poll(); });
  return absl::OkStatus();
}

NcclCommunicator::Impl::~Impl() {
  table_.Stop();
  if (poller_.joinable()) poller_.join();
  cudaSetDevice(options_.device);
  // Abort what may still run, so no device work uses the buffers of the operations about
  // to be cancelled; destroy the idle communicators (aborted ones are already null).
  const std::set<int64_t> busy = table_.BusyGroups();
  for (auto& [id, comm] : comms_) {
    if (comm == nullptr) continue;
    if (busy.count(id)) {
      ncclCommAbort(comm);
    } else {
      ncclCommDestroy(comm);
    }
    comm = nullptr;
  }
  table_.CancelAll();
  if (ready_ != nullptr) cudaEventDestroy(ready_);
  if (owns_stream_) cudaStreamDestroy(comm_stream_);
}

// ---------------------------------------------------------------------------------------
// The engine.

absl::StatusOr<std::shared_ptr<void>> NcclCommunicator::Impl::Launch(
    const std::vector<Operation*>& ops, const std::string& context) {
  for (const Operation* op : ops) {
    if (comms_.at(op->info.group_id) == nullptr) {  // the table refuses these first
      return absl::InternalError(absl::StrCat(context, ": the communicator of ",
                                              op->info.group_name, " was aborted"));
    }
  }
  const cudaStream_t compute = static_cast<cudaStream_t>(streams().compute);
  MXMACA_CUDART_RETURN_IF_ERROR(cudaSetDevice(options_.device), context);
  // The completion event exists before anything is enqueued, so a launch that reached the
  // device always has one.
  cudaEvent_t raw = nullptr;
  MXMACA_CUDART_RETURN_IF_ERROR(cudaEventCreateWithFlags(&raw, cudaEventDisableTiming),
                                context);
  std::shared_ptr<void> event(raw, [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
  MXMACA_CUDART_RETURN_IF_ERROR(cudaEventRecord(ready_, compute), context);
  MXMACA_CUDART_RETURN_IF_ERROR(cudaStreamWaitEvent(comm_stream_, ready_, 0), context);
  MXMACA_NCCL_RETURN_IF_ERROR(ncclGroupStart(), context);
  absl::Status first;
  for (Operation* op : ops) {
    first.Update(op->launch(comms_.at(op->info.group_id), comm_stream_, context));
  }
  const ncclResult_t end = ncclGroupEnd();  // always closes the group, even after an error
  MXMACA_RETURN_IF_ERROR(first);
  MXMACA_NCCL_RETURN_IF_ERROR(end, context);
  MXMACA_CUDART_RETURN_IF_ERROR(cudaEventRecord(raw, comm_stream_), context);
  return event;
}

absl::StatusOr<bool> NcclCommunicator::Impl::Completed(const std::shared_ptr<void>& completion) {
  const cudaError_t q = cudaEventQuery(static_cast<cudaEvent_t>(completion.get()));
  if (q == cudaSuccess) return true;
  if (q == cudaErrorNotReady) return false;
  return CudaErrorAt(q, "cudaEventQuery(completion event)", __FILE__, __LINE__,
                     "the NCCL work or the stream before it failed");
}

absl::Status NcclCommunicator::Impl::AsyncError(int64_t group_id) {
  const ncclComm_t comm = comms_.at(group_id);
  if (comm == nullptr) return absl::OkStatus();
  ncclResult_t async = ncclSuccess;
  const std::string context = absl::StrCat("NcclCommunicator rank ", rank_, ": ",
                                           group_names_.at(group_id), " (group ", group_id, ")");
  MXMACA_NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(comm, &async), context);
  if (async == ncclSuccess || async == ncclInProgress) return absl::OkStatus();
  return NcclErrorAt(async, "asynchronous NCCL operation", __FILE__, __LINE__, context);
}

void NcclCommunicator::Impl::Abort(int64_t group_id) {
  ncclComm_t& comm = comms_.at(group_id);
  if (comm == nullptr) return;
  ncclCommAbort(comm);
  comm = nullptr;
}

void NcclCommunicator::Impl::Poll() {
  cudaSetDevice(options_.device);
  absl::Time last_async_check = absl::InfinitePast();
  while (table_.WaitForWork(options_.poll_interval)) {
    const absl::Time now = absl::Now();
    const bool check_async = now - last_async_check >= options_.async_error_interval;
    if (check_async) last_async_check = now;
    table_.Poll(check_async);
  }
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
void NcclCommunicator::BeginBatch() { impl_->table().BeginBatch(); }
absl::Status NcclCommunicator::EndBatch() { return impl_->table().EndBatch(); }
std::vector<absl::Status> NcclCommunicator::CheckTimeouts(absl::Time now) {
  return impl_->table().CheckTimeouts(now);
}
int NcclCommunicator::pending_operations() const { return impl_->table().pending(); }

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
  return impl_->table().Post(
      group, Info(CollectiveOp::kAllReduce, DataType::kFloat32, count),
      CheckCount(count, DataType::kFloat32),
      [=](void* c, void* s, const std::string& context) -> absl::Status {
        const auto comm = static_cast<ncclComm_t>(c);
        const auto stream = static_cast<cudaStream_t>(s);
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
  return impl_->table().Post(
      group, Info(CollectiveOp::kAllGather, dtype, count), CheckCount(count, dtype),
      [=](void* c, void* s, const std::string& context) -> absl::Status {
        const auto comm = static_cast<ncclComm_t>(c);
        const auto stream = static_cast<cudaStream_t>(s);
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
  return impl_->table().Post(
      group, Info(CollectiveOp::kReduceScatter, DataType::kFloat32, count), invalid,
      [=](void* c, void* s, const std::string& context) -> absl::Status {
        const auto comm = static_cast<ncclComm_t>(c);
        const auto stream = static_cast<cudaStream_t>(s);
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
  return impl_->table().Post(
      group, Info(CollectiveOp::kBroadcast, dtype, count, root_rank), invalid,
      [=](void* c, void* s, const std::string& context) -> absl::Status {
        const auto comm = static_cast<ncclComm_t>(c);
        const auto stream = static_cast<cudaStream_t>(s);
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
  return impl_->table().Post(
      group, Info(CollectiveOp::kSend, dtype, count, PeerRank(group, peer)),
      PointToPointInvalid(group, peer, count, dtype),
      [=](void* c, void* s, const std::string& context) -> absl::Status {
        const auto comm = static_cast<ncclComm_t>(c);
        const auto stream = static_cast<cudaStream_t>(s);
        if (count == 0) return absl::OkStatus();
        MXMACA_NCCL_RETURN_IF_ERROR(
            ncclSend(buffer, count, ToNcclDataType(dtype), peer, comm, stream), context);
        return absl::OkStatus();
      },
      std::move(done));
}

CollectiveInfo NcclCommunicator::Recv(const ProcessGroup& group, int peer, void* buffer,
                                      int64_t count, DataType dtype, DoneCallback done) {
  return impl_->table().Post(
      group, Info(CollectiveOp::kRecv, dtype, count, PeerRank(group, peer)),
      PointToPointInvalid(group, peer, count, dtype),
      [=](void* c, void* s, const std::string& context) -> absl::Status {
        const auto comm = static_cast<ncclComm_t>(c);
        const auto stream = static_cast<cudaStream_t>(s);
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
  return impl_->table().Post(
      group, Info(CollectiveOp::kAllToAllV, dtype, count), invalid,
      [=](void* c, void* s, const std::string& context) -> absl::Status {
        const auto comm = static_cast<ncclComm_t>(c);
        const auto stream = static_cast<cudaStream_t>(s);
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
