// transport/inprocess_communicator.h: the in-process Communicator backend — many ranks in
// one process (docs/ARCHITECTURE.md "A rank is an actor's place in this grid, not a process").
//
// An InProcessHub matches the posts of all ranks of a world. Each rank posts its
// contribution through its own endpoint (ForRank); the post is recorded under
// (group id, sequence) and the call returns. When the last member posts, the operation is
// computed — by that poster's thread, or handed to Options::executor — and every member's
// `done` fires. No call waits for another rank: nothing in this backend blocks a thread
// beyond one short mutex that guards the matching tables (never held while computing or
// calling back).
//
// Summation order (bit-identity contract). All-reduce and reduce-scatter sum in group-rank
// order, element by element, starting from rank 0's value:
//   out[i] = (((x_0[i] + x_1[i]) + x_2[i]) + ... ) + x_{n-1}[i]     (fp32, no FMA)
// whatever order the ranks arrived in, so results are bit-identical run to run and equal
// a sequential fp32 loop over the ranks in that order. Consequence for data parallelism:
// DP-reduced gradients equal the single-device gradient bits ONLY when the single-device
// path accumulates micro-batch gradients in the same association. With DP = d and
// m micro-batches per replica, DP rank r owns global micro-batches [r*m, (r+1)*m) (Megatron
// splits the global batch contiguously by DP rank) and accumulates them in micro-batch
// order into g_r; the all-reduce then forms ((g_0 + g_1) + ...) + g_{d-1}. A single-device
// run matches bit for bit only if it sums per-replica partial sums the same way
// (accumulate m micro-batches into a partial, then add partials in replica order);
// a flat sum over all d*m micro-batches differs in rounding (within ~d*m ulp).
//
// Errors, reported to every member's `done` (and to later posters of the same operation):
//   InvalidArgument     a post with bad arguments (null buffer with count > 0, root out
//                        of range, wrong vector sizes, negative counts, non-fp32 reduction);
//                        it still consumes its sequence number so the other members fail
//                        promptly instead of waiting. A rank that is not
//                        group.ranks[group.rank_in_group], or a send/recv peer outside the
//                        group, fails at once without consuming a sequence number (there
//                        is no slot to match it to).
//   FailedPrecondition  a mismatch for one (group, sequence): the report lists every
//                        arrived rank's CollectiveInfo and the ranks not yet arrived.
//   DeadlineExceeded    CheckTimeouts found the operation older than Options::timeout;
//                        the report lists arrived ranks (with what they posted) and missing
//                        ranks.
#ifndef MXMACA_TRANSPORT_INPROCESS_COMMUNICATOR_H_
#define MXMACA_TRANSPORT_INPROCESS_COMMUNICATOR_H_

#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "transport/communicator.h"
#include "transport/process_group.h"

namespace mxmaca::transport {

class InProcessHub;

// InProcessCommunicator: one rank's endpoint of an InProcessHub. Obtained from
// InProcessHub::ForRank; valid as long as the hub. Thread-safe.
class InProcessCommunicator : public Communicator {
 public:
  InProcessCommunicator(InProcessHub* hub, int rank) : hub_(hub), rank_(rank) {}

  int rank() const override { return rank_; }
  CollectiveInfo AllReduceSum(const ProcessGroup& group, const float* send, float* recv,
                              int64_t count, DoneCallback done) override;
  CollectiveInfo AllGather(const ProcessGroup& group, const void* send, void* recv,
                           int64_t count, DataType dtype, DoneCallback done) override;
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

 private:
  InProcessHub* hub_;
  int rank_;
};

// InProcessHub: matches and executes the operations of `world_size` in-process ranks.
class InProcessHub {
 public:
  struct Options {
    // timeout: age (since the first post) after which CheckTimeouts fails an operation.
    absl::Duration timeout = absl::Minutes(5);
    // clock: time source for arrival stamps; absl::Now when empty. Tests pass a fake.
    std::function<absl::Time()> clock;
    // executor: runs the compute-and-notify step of a completed operation; when empty it
    // runs inline on the thread of the last poster. An actor runtime passes its compute
    // pool here.
    std::function<void(std::function<void()>)> executor;
  };

  explicit InProcessHub(int world_size) : InProcessHub(world_size, Options()) {}
  InProcessHub(int world_size, Options options);
  InProcessHub(const InProcessHub&) = delete;
  InProcessHub& operator=(const InProcessHub&) = delete;

  int world_size() const { return world_size_; }

  // ForRank: the endpoint of global rank `rank` (0 <= rank < world_size, else nullptr).
  InProcessCommunicator* ForRank(int rank);

  // CheckTimeouts: fails every pending operation whose first post is at least
  // Options::timeout before `now`: each arrived member's `done` gets DeadlineExceeded with
  // the report; members that post it later get the same error at once. Returns one
  // DeadlineExceeded status per operation failed by this call (empty if none), for the
  // caller (the coordinator's watchdog) to log and end the job with.
  std::vector<absl::Status> CheckTimeouts(absl::Time now);

  // pending_operations: operations posted by some but not all members (including failed
  // ones still waiting for late posters). For tests and diagnostics.
  int pending_operations() const;

  // Post, Pending: implementation details (defined in the .cc), named here so the
  // endpoint and the report helpers can use them.
  struct Post;
  struct Pending;

 private:
  friend class InProcessCommunicator;
  // Key of a pending operation: collectives (group, -1, -1, seq); send/recv
  // (group, src, dst, seq).
  using Key = std::tuple<int64_t, int, int, uint64_t>;
  // Sequence counters: (group, rank, -1, 0) for collectives, (group, src, dst, side) for
  // send (side 0) and recv (side 1).
  using CounterKey = std::tuple<int64_t, int, int, int>;

  CollectiveInfo Submit(int rank, const ProcessGroup& group, Post post);
  static void Complete(const std::shared_ptr<Pending>& pending);
  absl::Time Now() const;

  const int world_size_;
  const Options options_;
  std::vector<std::unique_ptr<InProcessCommunicator>> endpoints_;
  mutable absl::Mutex mu_;
  std::map<CounterKey, uint64_t> counters_ ABSL_GUARDED_BY(mu_);
  std::map<Key, std::shared_ptr<Pending>> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mxmaca::transport

#endif  // MXMACA_TRANSPORT_INPROCESS_COMMUNICATOR_H_
