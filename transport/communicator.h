// transport/communicator.h: the Communicator interface, one rank's endpoint for
// collectives and point-to-point transfers (docs/ARCHITECTURE.md "Collectives never block a thread").
//
// Every call only enqueues: it returns at once with the CollectiveInfo it was assigned and
// later calls `done` exactly once, with OkStatus when this rank's output buffer holds the
// result, or with an error. `done` may run on any thread, including the caller's before
// the call returns (in-process backend: the last rank to arrive); an actor should turn it
// into a message to itself and do nothing else in it. Buffers belong to the caller and
// must stay valid and untouched (inputs unchanged, outputs unread) until `done` runs.
//
// Ordering (as in NCCL): the members of a group must post the collectives of that group in
// the same order; the k-th collective a rank posts on a group gets sequence number k
// (0-based) and is matched with the k-th of every other member. Collectives on different
// groups are independent. Send/Recv are matched per channel (group, src, dst): the k-th
// Send from src to dst pairs with the k-th Recv at dst from src (FIFO), and carry that
// channel's sequence number. A mismatch (different op, dtype, count, root or membership
// for one (group, sequence)) fails every member's `done` with a report naming each
// rank's (group, op, sequence, bytes); a collective that does not complete within the
// backend's timeout fails with a report of who has and has not arrived.
//
// Reductions are fp32 sums. Backends must document their summation order; the in-process
// backend sums in group-rank order (inprocess_communicator.h), bit-identical run to run.
//
// Backends: InProcessHub (inprocess_communicator.h) for many ranks in one process; UCX
// (host memory) and NCCL (device memory) implement the same interface later — a UCX
// backend maps each call to tagged messages keyed by (group id, sequence), NCCL to the
// matching nccl* call on the rank's communication stream with `done` fired by a stream
// event.
#ifndef MXMACA_TRANSPORT_COMMUNICATOR_H_
#define MXMACA_TRANSPORT_COMMUNICATOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "transport/process_group.h"

namespace mxmaca::transport {

// CollectiveOp: the kind of an operation, as reported in CollectiveInfo.
enum class CollectiveOp : int {
  kAllReduce = 0,
  kAllGather = 1,
  kReduceScatter = 2,
  kBroadcast = 3,
  kSend = 4,
  kRecv = 5,
  kAllToAllV = 6,
};

// CollectiveOpName: "all_reduce", "all_gather", "reduce_scatter", "broadcast", "send",
// "recv", "all_to_all_v".
const char* CollectiveOpName(CollectiveOp op);

// DataType: element type of a buffer. Reductions accept kFloat32 only; data movement
// (all-gather, broadcast, send/recv, all-to-all-v) accepts any.
enum class DataType : int { kFloat32 = 0, kBFloat16 = 1, kInt32 = 2, kInt64 = 3, kUInt8 = 4 };

// DataTypeName: "fp32", "bf16", "int32", "int64", "uint8". DataTypeSize: bytes per element.
const char* DataTypeName(DataType dtype);
int64_t DataTypeSize(DataType dtype);

// CollectiveInfo: the identity of one posted operation, given back by every call and to
// its `done`, and used in error reports.
struct CollectiveInfo {
  int64_t group_id = 0;    // ProcessGroup::id
  std::string group_name;  // ProcessGroup::name(), e.g. "data_parallel#3"
  // sequence: per-group collective number, or per-channel number for send/recv.
  uint64_t sequence = 0;
  CollectiveOp op = CollectiveOp::kAllReduce;
  DataType dtype = DataType::kFloat32;
  int64_t count = 0;  // elements this rank sends (all-to-all-v: sum of send_counts)
  int64_t bytes = 0;  // count * DataTypeSize(dtype)
  int rank = 0;       // global rank that posted
  // peer: send/recv: global rank of the other side; broadcast: global rank of the root;
  // otherwise -1.
  int peer = -1;

  // ToString: e.g. "all_reduce on data_parallel#3 (group 35) seq 7 fp32 x 1024 (4096 bytes)
  // from rank 5".
  std::string ToString() const;
};

// DoneCallback: completion of one operation; `info` is what the call returned.
using DoneCallback = std::function<void(const CollectiveInfo& info, absl::Status status)>;

// Communicator: one rank's endpoint. In every call `group` must contain this rank at
// group.rank_in_group (else `done` gets InvalidArgument); `root` and `peer` are indices
// into group.ranks; counts are elements of `dtype`.
class Communicator {
 public:
  virtual ~Communicator() = default;

  // rank: this endpoint's global rank.
  virtual int rank() const = 0;

  // AllReduceSum: recv[i] = sum over the group's ranks of send[i], fp32, summed in the
  // backend's documented order. send, recv: [count] fp32; may be the same buffer.
  virtual CollectiveInfo AllReduceSum(const ProcessGroup& group, const float* send,
                                      float* recv, int64_t count, DoneCallback done) = 0;

  // AllGather: recv = concatenation of every member's send in group order.
  // send: [count], recv: [group.size() * count]; send may be recv + rank_in_group * count.
  virtual CollectiveInfo AllGather(const ProcessGroup& group, const void* send, void* recv,
                                   int64_t count, DataType dtype, DoneCallback done) = 0;

  // ReduceScatterSum: the conjugate of AllGather. send: [group.size() * recv_count] fp32,
  // recv: [recv_count]; recv[i] = sum over ranks r of send_r[rank_in_group * recv_count + i].
  virtual CollectiveInfo ReduceScatterSum(const ProcessGroup& group, const float* send,
                                          float* recv, int64_t recv_count,
                                          DoneCallback done) = 0;

  // Broadcast: every member's buffer [count] becomes a copy of the root's.
  virtual CollectiveInfo Broadcast(const ProcessGroup& group, int root, void* buffer,
                                   int64_t count, DataType dtype, DoneCallback done) = 0;

  // Send / Recv: [count] elements from this rank to group.ranks[peer] / from peer to this
  // rank, FIFO per (group, src, dst). Sender and receiver must agree on count and dtype.
  virtual CollectiveInfo Send(const ProcessGroup& group, int peer, const void* buffer,
                              int64_t count, DataType dtype, DoneCallback done) = 0;
  virtual CollectiveInfo Recv(const ProcessGroup& group, int peer, void* buffer,
                              int64_t count, DataType dtype, DoneCallback done) = 0;

  // AllToAllV: this rank sends send_counts[j] elements starting at send + send_displs[j]
  // to member j and receives recv_counts[j] elements from member j at
  // recv + recv_displs[j] (all in elements; vectors of length group.size()). Rank i's
  // send_counts[j] must equal rank j's recv_counts[i]. send and recv must not overlap.
  virtual CollectiveInfo AllToAllV(const ProcessGroup& group, const void* send,
                                   const std::vector<int64_t>& send_counts,
                                   const std::vector<int64_t>& send_displs, void* recv,
                                   const std::vector<int64_t>& recv_counts,
                                   const std::vector<int64_t>& recv_displs, DataType dtype,
                                   DoneCallback done) = 0;
};

}  // namespace mxmaca::transport

#endif  // MXMACA_TRANSPORT_COMMUNICATOR_H_
