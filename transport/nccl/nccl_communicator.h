// transport/nccl/nccl_communicator.h: the Communicator backend over NCCL for DEVICE memory
// (issue 8, "CUDA backend"): one process per GPU, one ncclComm_t per ProcessGroup, every
// call enqueued on the rank's communication stream and ordered after its compute stream by
// CUDA events.
//
// Start-up (eager): Create is given the groups this rank belongs to (e.g. every group of
// its RankView) and exchanges one ncclUniqueId per group over a world-wide all-gather —
// normally the TCP rendezvous of the UCX backend (transport/ucx/rendezvous.h), through
// CreateWithRendezvous. The group's first member (group rank 0) calls ncclGetUniqueId and
// the rendezvous hands the id to the others (nccl_bootstrap.h). Then every rank calls
// ncclCommInitRank(nranks = group.size(), rank = rank_in_group) for its groups in
// ascending group id — one global order, so members of overlapping groups cannot wait on
// each other in a cycle. A group not given to Create cannot be used (InvalidArgument):
// there is no lazy creation, because creating a communicator later would need every
// member to reach the rendezvous at the same point.
//
// Streams and ordering ("ordered with compute by events"): the caller passes a StreamPair
// (cudaStream_t values as void*, as ExecContext::stream). Each call (1) records an event on
// the compute stream, (2) makes the communication stream wait for it
// (cudaStreamWaitEvent), so the NCCL kernel reads inputs only after the compute work posted
// before the call, (3) enqueues the nccl* call(s) on the communication stream, (4) records a
// completion event there. A poller thread cudaEventQuery's the completion events in post
// order and runs `done` when one has completed: the caller's thread never blocks. When
// `done` runs, the completion event has been reached, so the output is complete on the
// device and work posted on any stream after `done` sees it.
//
// Mapping (dtype: fp32 -> ncclFloat32, bf16 -> ncclBfloat16, int32 -> ncclInt32, int64 ->
// ncclInt64, uint8 -> ncclUint8):
//   AllReduceSum      ncclAllReduce(ncclSum, ncclFloat32)
//   AllGather         ncclAllGather (send count = count)
//   ReduceScatterSum  ncclReduceScatter(ncclSum, ncclFloat32) (recv count = recv_count)
//   Broadcast         ncclBroadcast in place, root = group rank `root`
//   Send / Recv       ncclSend / ncclRecv to comm rank `peer`
//   AllToAllV         ncclSend + ncclRecv for every member with a non-zero count, inside
//                     one ncclGroupStart / ncclGroupEnd (AllToAllVPlan in nccl_plan.h)
//
// Summation order: NCCL's, NOT the in-process backend's. ncclAllReduce / ncclReduceScatter
// add in the order of the algorithm NCCL picks at run time (ring, tree, NVLS, CollNet; the
// choice depends on size, topology and NCCL_ALGO / NCCL_PROTO), so results are NOT
// bit-identical to InProcessHub or the UCX backend (which sum in group-rank order) and may
// differ in the last bits between message sizes and machines. With the same sizes,
// topology, NCCL version and environment they are in practice the same run to run, but
// NCCL does not promise it (in-switch reductions, NVLS, may differ). A group of one rank
// is a copy (bit-exact). Operations with a count of 0 enqueue no NCCL call (their
// completion event still orders them).
//
// Send/Recv ordering: each Send or Recv is its own NCCL kernel on the one communication
// stream, run in post order. Two ranks that each post a Send to the other and then the
// matching Recv deadlock (each send waits for a receive queued behind the other's send):
// post such exchanges between BeginBatch() and EndBatch(), which put them in one
// ncclGroupStart / ncclGroupEnd (Megatron's batch_isend_irecv). Send/Recv to oneself is
// refused (InvalidArgument): NCCL only completes a self-exchange inside one group, which
// AllToAllV does. Likewise, since one stream serialises all groups, ranks that share two
// groups must post their operations on them in the same relative order (as with NCCL in
// Megatron).
//
// Errors to `done` (statuses name the call, file and line, the group and the sequence):
// InvalidArgument (bad arguments or a group not given to Create: at once, from the calling
// thread; a sequence number is consumed only by valid posts); the NCCL result code mapped
// (ncclInvalidArgument / ncclInvalidUsage -> InvalidArgument, ncclSystemError /
// ncclRemoteError -> Unavailable, others -> Internal) when an nccl* call fails to enqueue;
// Internal for a failing CUDA call; an asynchronous NCCL error (ncclCommGetAsyncError,
// checked by the poller) aborts the group's communicator and fails every in-flight
// operation of that group with the mapped code naming the error; DeadlineExceeded from
// CheckTimeouts for the late operation (the group's communicator is aborted and its other
// in-flight operations fail with FailedPrecondition, so the job should end); after either,
// later posts on the group fail with FailedPrecondition; Cancelled for operations in
// flight when the communicator is destroyed.
//
// Threads: any thread may post; posts and every NCCL call are serialised by one lock
// (OperationTable's, operation_table.h, which keeps the bookkeeping; CUDA calls set
// Options::device first). `done` runs on the poller thread (or on the posting thread for
// an immediate refusal or a failed enqueue) with no lock held, and should only send a
// message. The first operation on a group may block the posting thread while NCCL
// connects to the group's peers (NCCL connects lazily, NCCL_RUNTIME_CONNECT); later posts
// only enqueue.
//
// Start-up errors on one rank (no GPU, a bad group) make it leave before the id exchange;
// the other ranks then fail in the rendezvous (its timeout, or Unavailable when the
// process exits), not at once.
//
// Using it from the actor that owns a GPU (one process per GPU, launched by mxmaca launch /
// torchrun; `groups` = the rank's groups, e.g. RankGrid::Group(kind, rank) for each kind):
//
//   MXMACA_ASSIGN_OR_RETURN(auto rv, ucx::Rendezvous::Connect(rendezvous_options, rank, world));
//   NcclCommunicator::Options options;
//   options.device = local_rank;
//   MXMACA_ASSIGN_OR_RETURN(auto comm, NcclCommunicator::CreateWithRendezvous(
//       *rv, groups, StreamPair{compute_stream, /*communication=*/nullptr}, options));
//   comm->AllReduceSum(me.data_parallel_group(/*with_context_parallel=*/true), grads, grads,
//                      n, [self](const CollectiveInfo& info, absl::Status s) {
//                        /* send a message to self; nothing else */ });
//   CollectiveWatchdog dog(absl::Seconds(1),
//                          [&](absl::Time t) { return comm->CheckTimeouts(t); }, on_timeout);
//
// Tests: nccl_communicator_test runs a 1-rank communicator on a GPU (NCCL cannot put two
// ranks on one GPU) and skips without one. A multi-GPU test (several processes, one GPU
// each) needs a machine with at least two GPUs: none here, nor on the single-GPU check
// machine. Without CUDA (--config=nocuda) this header builds against
// nccl_communicator_nocuda.cc, whose Create returns Unimplemented "built without CUDA".
#ifndef MXMACA_TRANSPORT_NCCL_NCCL_COMMUNICATOR_H_
#define MXMACA_TRANSPORT_NCCL_NCCL_COMMUNICATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "transport/communicator.h"
#include "transport/nccl/nccl_bootstrap.h"
#include "transport/process_group.h"
#include "transport/ucx/rendezvous.h"

namespace mxmaca::transport::nccl {

// StreamPair: the actor's CUDA streams (cudaStream_t as void*). compute: the stream whose
// earlier work produces the inputs (nullptr = the legacy default stream). communication:
// where NCCL runs (nullptr at Create = the communicator creates and owns a non-blocking
// stream).
struct StreamPair {
  void* compute = nullptr;
  void* communication = nullptr;
};

class NcclCommunicator : public Communicator {
 public:
  struct Options {
    // device: the CUDA device of this rank (cudaSetDevice on every thread that calls CUDA).
    int device = 0;
    // timeout: age after which CheckTimeouts fails an operation.
    absl::Duration timeout = absl::Minutes(5);
    // clock: time source for post stamps and timeouts; absl::Now when empty.
    std::function<absl::Time()> clock;
    // poll_interval: the poller's sleep between cudaEventQuery rounds while operations are
    // in flight (it waits on a condition variable when none are).
    absl::Duration poll_interval = absl::Microseconds(20);
    // async_error_interval: how often the poller asks ncclCommGetAsyncError of the groups
    // with operations in flight.
    absl::Duration async_error_interval = absl::Milliseconds(10);
  };

  // Create: the communicators of `groups` (each must contain `rank`: CheckMembership in
  // nccl_plan.h; ids unique) for global rank `rank` of `world_size`, ids exchanged by
  // `all_gather` (world-wide; every rank calls Create at the same point). Blocks until every
  // member of every listed group has called ncclCommInitRank. Errors: InvalidArgument (a
  // bad group, world/rank out of range); FailedPrecondition "no GPU: ..." when no device is
  // usable; the all-gather's error; the mapped NCCL / CUDA error of ncclGetUniqueId,
  // ncclCommInitRank (naming the group), cudaSetDevice, cudaStreamCreate; Unimplemented
  // "built without CUDA" in the CUDA-less build.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(
      int rank, int world_size, const std::vector<ProcessGroup>& groups,
      const AllGatherFn& all_gather, StreamPair streams, Options options);
  // CreateWithRendezvous: Create with rank, world size and all-gather of `rendezvous`
  // (borrowed for the call only; the UCX backend's rendezvous options, MASTER_ADDR/PORT).
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> CreateWithRendezvous(
      ucx::Rendezvous& rendezvous, const std::vector<ProcessGroup>& groups, StreamPair streams,
      Options options);

  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;
  // ~NcclCommunicator: stops the poller; aborts (ncclCommAbort) the communicators of
  // groups with operations in flight, then fails those operations (and any in an open
  // batch) with Cancelled; destroys the idle communicators (ncclCommDestroy), the owned
  // stream and the events. Call it once every `done` has run for an orderly end.
  ~NcclCommunicator() override;

  int rank() const override;
  int world_size() const;

  // SetComputeStream: the compute stream later posts wait on (nullptr = legacy default
  // stream). streams(): the pair in use (communication is the owned stream when Create
  // got nullptr).
  void SetComputeStream(void* compute_stream);
  StreamPair streams() const;

  // All operations: buffers are DEVICE pointers on Options::device, counts in elements;
  // semantics, shapes and `done` as in communicator.h; NCCL mapping and summation order in
  // the banner above.
  CollectiveInfo AllReduceSum(const ProcessGroup& group, const float* send, float* recv,
                              int64_t count, DoneCallback done) override;
  CollectiveInfo AllGather(const ProcessGroup& group, const void* send, void* recv, int64_t count,
                           DataType dtype, DoneCallback done) override;
  CollectiveInfo ReduceScatterSum(const ProcessGroup& group, const float* send, float* recv,
                                  int64_t recv_count, DoneCallback done) override;
  CollectiveInfo Broadcast(const ProcessGroup& group, int root, void* buffer, int64_t count,
                           DataType dtype, DoneCallback done) override;
  CollectiveInfo Send(const ProcessGroup& group, int peer, const void* buffer, int64_t count,
                      DataType dtype, DoneCallback done) override;
  CollectiveInfo Recv(const ProcessGroup& group, int peer, void* buffer, int64_t count,
                      DataType dtype, DoneCallback done) override;
  CollectiveInfo AllToAllV(const ProcessGroup& group, const void* send,
                           const std::vector<int64_t>& send_counts,
                           const std::vector<int64_t>& send_displs, void* recv,
                           const std::vector<int64_t>& recv_counts,
                           const std::vector<int64_t>& recv_displs, DataType dtype,
                           DoneCallback done) override;

  // BeginBatch / EndBatch: the valid posts in between are enqueued together at EndBatch,
  // inside one ncclGroupStart / ncclGroupEnd, after one compute-stream event, with one
  // completion event (their `done`s run together). Use it for opposite-direction
  // Send/Recv pairs (see the banner). Not nested; posts of other threads in between join
  // the batch. EndBatch returns the enqueue error, which every batched `done` also gets;
  // FailedPrecondition when no batch is open.
  void BeginBatch();
  absl::Status EndBatch();

  // CheckTimeouts: for each group with an operation posted at least Options::timeout
  // before `now`, fails the oldest such operation with DeadlineExceeded (TimeoutReport of
  // nccl_plan.h: this rank's pending operations and the group's members), aborts the
  // group's communicator (its other in-flight operations fail with FailedPrecondition, and
  // so do later posts on it) and returns one
  // status per operation failed by this call — the CollectiveWatchdog interface. Operations
  // still in an open batch are not launched, so not timed. Must not be called from a
  // `done`.
  std::vector<absl::Status> CheckTimeouts(absl::Time now);

  // pending_operations: posted and not yet completed or failed (batched ones included).
  int pending_operations() const;

  // Impl: the CUDA/NCCL state and the poller (nccl_communicator.cc).
  class Impl;

 private:
  explicit NcclCommunicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mxmaca::transport::nccl

#endif  // MXMACA_TRANSPORT_NCCL_NCCL_COMMUNICATOR_H_
