// transport/nccl/nccl_plan.h: the host-side logic of the NCCL backend that needs no GPU and
// no CUDA headers — argument checks, the all-to-all-v plan (grouped ncclSend/ncclRecv), the
// per-group / per-channel sequence counters and the timeout report — so it is unit-tested
// on machines without a GPU (nccl_plan_test) and shared by the CUDA and CUDA-less builds.
//
// Conventions as in transport/communicator.h: counts and displacements are elements of the
// operation's dtype; `peer` and `root` are indices into ProcessGroup::ranks, which are also
// the ranks of the group's ncclComm_t (the communicator of a group is created with
// nranks = group.size() and rank = rank_in_group).
#ifndef MXMACA_TRANSPORT_NCCL_NCCL_PLAN_H_
#define MXMACA_TRANSPORT_NCCL_NCCL_PLAN_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "transport/communicator.h"
#include "transport/process_group.h"

namespace mxmaca::transport::nccl {

// CheckMembership: ok when `group` is a well-formed view of global rank `rank` in a job of
// `world_size` ranks: rank_in_group inside [0, size), ranks[rank_in_group] == rank, every
// member in [0, world_size), members strictly ascending (ProcessGroup's contract).
// Errors: InvalidArgument naming the group, its ranks and the violated condition, e.g.
// "rank 3 is not member 1 of data_parallel#0 ranks [0, 2] (world 4)".
absl::Status CheckMembership(const ProcessGroup& group, int rank, int world_size);

// CheckCount: ok when count >= 0 and count * DataTypeSize(dtype) fits in int64 with room to
// spare (<= INT64_MAX / 4, as the UCX backend). Errors: InvalidArgument ("negative count -1",
// "count N of bf16 overflows").
absl::Status CheckCount(int64_t count, DataType dtype);

// CheckIndex: ok when 0 <= index < group.size(). `what` is "root" or "peer". Errors:
// InvalidArgument "peer 5 outside [0, 4) of tensor_model_parallel#1".
absl::Status CheckIndex(const ProcessGroup& group, int index, const char* what);

// AllToAllVPlan: the ncclSend/ncclRecv pairs of one AllToAllV, issued between one
// ncclGroupStart/ncclGroupEnd so NCCL runs them concurrently (no ordering deadlock).
struct AllToAllVPlan {
  // Transfer: with member `peer` (index into group.ranks): send send_count elements from
  // send + send_offset, receive recv_count elements into recv + recv_offset. A zero count
  // means no ncclSend (resp. ncclRecv) for that direction.
  struct Transfer {
    int peer = 0;
    int64_t send_offset = 0, send_count = 0;
    int64_t recv_offset = 0, recv_count = 0;
  };
  // transfers: one per member with anything to move, in the order
  // peer = me, me + 1, ..., me - 1 (mod n) — the self transfer first, then a rotation so
  // that not every rank addresses member 0 first. The self transfer is a send/recv pair to
  // this rank's own comm rank, legal inside one NCCL group.
  std::vector<Transfer> transfers;
  int64_t total_send = 0;  // sum of send_counts (CollectiveInfo::count)
  int64_t total_recv = 0;  // sum of recv_counts
};

// PlanAllToAllV: checks the vectors and builds the plan. Requirements: all four vectors
// have group.size() entries; counts and displacements >= 0; no displ + count overflows;
// the non-empty receive ranges [recv_displs[j], recv_displs[j] + recv_counts[j]) are
// pairwise disjoint (two NCCL receives into one element race). Send ranges may overlap
// (they are only read). Whether send and recv overlap cannot be checked without the
// buffer sizes: the caller's contract (communicator.h). Errors: InvalidArgument naming the
// vector, the member index and the value, e.g. "recv_counts has 3 entries, the group
// data_parallel#0 has 4 members" or "recv ranges of member 1 [8, 16) and member 2 [12, 20)
// overlap".
absl::StatusOr<AllToAllVPlan> PlanAllToAllV(const ProcessGroup& group,
                                           const std::vector<int64_t>& send_counts,
                                           const std::vector<int64_t>& send_displs,
                                           const std::vector<int64_t>& recv_counts,
                                           const std::vector<int64_t>& recv_displs);

// SequenceCounters: the numbering the Communicator interface requires — the k-th collective
// a rank posts on a group gets sequence k; send/recv count per channel (group, src, dst),
// the k-th Send from src to dst and the k-th Recv at dst from src both get k. Not
// thread-safe (the communicator holds its lock).
class SequenceCounters {
 public:
  // NextCollective: the sequence of the next collective on `group_id`.
  uint64_t NextCollective(int64_t group_id);
  // NextPointToPoint: the sequence of the next send (src = me, dst = peer) or recv
  // (src = peer, dst = me) on channel (group_id, src, dst); src, dst are global ranks.
  uint64_t NextPointToPoint(int64_t group_id, int src, int dst, bool send);

 private:
  std::map<int64_t, uint64_t> collectives_;
  std::map<std::tuple<int64_t, int, int, bool>, uint64_t> p2p_;
};

// PendingOp: what the timeout report says about one operation still in flight.
struct PendingOp {
  CollectiveInfo info;
  absl::Time posted;
};

// TimeoutReport: the DeadlineExceeded message of `op` on rank `rank`, e.g.
// "NcclCommunicator: all_reduce on data_parallel#0 (group 32) seq 7 did not complete within
// 5m (posted 5m0.5s ago): rank 3 posted all_reduce on ... ; members of the group: [1, 3, 5,
// 7]; still in flight on rank 3 (oldest first): all_reduce ... seq 7 (5m0.5s),
// broadcast ... seq 0 (1s); NCCL does not report which member is missing: compare the
// reports of the members (a member with no report, or whose oldest pending operation on
// this group has a smaller sequence, is the one behind)". `pending` is every operation
// this rank has in flight (all groups, oldest first; `op` among them); `members` the
// group's global ranks.
std::string TimeoutReport(const PendingOp& op, const std::vector<int>& members,
                          const std::vector<PendingOp>& pending, int rank, absl::Duration timeout,
                          absl::Time now);

}  // namespace mxmaca::transport::nccl

#endif  // MXMACA_TRANSPORT_NCCL_NCCL_PLAN_H_
