// transport/ucx/ucx_communicator.h: the multi-process Communicator backend — one process
// per rank, host memory, UCX tagged messages (docs/ARCHITECTURE.md "between processes the bytes go
// over UCX (host memory)").
//
// Start-up: UcxCommunicator::Create meets the other ranks at the TCP rendezvous
// (rendezvous.h), exchanges ucp worker addresses, creates one endpoint per peer and starts
// the progress thread. The progress thread owns the ucp worker: every post from any thread
// only queues the operation and wakes it (an eventfd); it sleeps on the worker's event fd
// when idle (ucp_worker_arm) and never waits on compute. Completion callbacks (`done`) and
// the reductions of all-reduce / reduce-scatter run on the progress thread.
//
// Wire protocol. Each operation is a short program of steps; a step posts its sends and
// receives together and the next step starts when all have completed. A message's 64-bit
// tag is (p2p bit, sender's global rank: 14 bits, group id: 20 bits, sequence mod 2^16,
// step: 13 bits), so world size <= 16384, group ids < 2^20, and ring algorithms need
// group size <= 4096; a post beyond these limits fails with InvalidArgument. With
// Options::verify (default), step 0 exchanges a descriptor of the post (op, dtype, count,
// root, membership; all-to-all-v counts) among all members, so a mismatch fails every
// member's `done` with the same report naming every rank's post (as InProcessHub does);
// send/recv exchange descriptors between the two sides and the sender's `done` waits for
// the receiver's verdict. Send/Recv move the caller's buffer directly (no staging copy on
// either side; large messages use UCX's rendezvous protocol, zero-copy over cma or tcp).
//
// Algorithms and summation order (the bit-identity contract with InProcessHub):
//   AllReduceSum, ReduceScatterSum under ReductionOrder::kRankOrder (default): the buffer
//     is split into group.size() chunks; member j receives chunk j from every member
//     (pairwise exchange) and sums it element by element in group-rank order starting
//     from member 0: ((x_0 + x_1) + ...) + x_{n-1}, fp32, no FMA — exactly InProcessHub's
//     order, so results are BIT-IDENTICAL to the in-process backend for every group size
//     and count. All-reduce then all-gathers the reduced chunks (pairwise). Traffic per
//     rank: (n-1)/n of the buffer each way per phase, as a ring's.
//   ReductionOrder::kRing, for buffers of at least Options::ring_min_bytes: the classic
//     ring reduce-scatter (+ ring all-gather for all-reduce). Chunk c is summed along the
//     ring starting at member c+1: ((x_{c+1} + x_{c+2}) + ...) + x_c (indices mod n). For
//     n <= 2 that equals rank order (fp32 addition is commutative), so bits match; for
//     n >= 3 results differ from InProcessHub by rounding (within ~n ulp per element).
//     Smaller buffers use rank order.
//   AllGather: pairwise (each member sends its block to every other) below
//     Options::ring_min_bytes of output, ring above. Broadcast: root sends to every member
//     below it; above, scatter from the root then ring all-gather (2x the bytes instead of
//     (n-1)x through the root). AllToAllV: pairwise. Data movement is exact in every mode.
//
// Errors to `done` (as InProcessHub reports them): InvalidArgument (bad arguments; with
// verify on, every member learns it; a rank that is not group.ranks[rank_in_group] or a
// group id beyond the tag range fails at once without consuming a sequence number),
// FailedPrecondition (mismatch report), DeadlineExceeded (CheckTimeouts: an operation this
// rank posted did not complete within Options::timeout; the report lists the members whose
// descriptors arrived and those that did not, or the step and the ranks whose data is
// missing), Unavailable (a UCX request failed, or with Options::detect_peer_failure a
// peer's endpoint failed), Cancelled (posted after Close, or still in flight when the
// communicator was closed or destroyed). Without detect_peer_failure a peer whose process
// died shows up as a timeout. After a timeout the job should end: a timed-out send may
// still be read by its peer until the communicator is destroyed.
//
// Threads: any thread may post and call CheckTimeouts (not from a `done`). `done` and the
// reductions run on the progress thread, so a long `done` or a very large reduction delays
// every other transfer of this rank.
#ifndef MXMACA_TRANSPORT_UCX_UCX_COMMUNICATOR_H_
#define MXMACA_TRANSPORT_UCX_UCX_COMMUNICATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "transport/communicator.h"
#include "transport/process_group.h"
#include "transport/ucx/launch_env.h"
#include "transport/ucx/rendezvous.h"

namespace mxmaca::transport::ucx {

// ReductionOrder: which algorithm all-reduce / reduce-scatter use (see the banner).
enum class ReductionOrder : int {
  kRankOrder = 0,  // pairwise exchange, group-rank order: bit-identical to InProcessHub
  kRing = 1,       // ring, ring order (bit-identical only for groups of <= 2)
};

class UcxCommunicator : public Communicator {
 public:
  struct Options {
    // timeout: age (since this rank's post) after which CheckTimeouts fails an operation.
    absl::Duration timeout = absl::Minutes(5);
    // clock: time source for post stamps; absl::Now when empty.
    std::function<absl::Time()> clock;
    // reduction: the all-reduce / reduce-scatter algorithm (must agree on every rank).
    ReductionOrder reduction = ReductionOrder::kRankOrder;
    // ring_min_bytes: buffers (all-reduce input, reduce-scatter input, all-gather output,
    // broadcast buffer) of at least this many bytes use ring algorithms where the mode
    // allows (must agree on every rank).
    int64_t ring_min_bytes = 1 << 20;
    // verify: exchange descriptors before the data (mismatch reports on every rank, arrival
    // lists in timeout reports). Off: a count mismatch is seen only as a wrong message
    // length by the receiving side, and a mismatched op may hang until the timeout.
    bool verify = true;
    // spin: how long the progress thread keeps polling the worker after the last event
    // while operations are in flight, before sleeping on the event fd.
    absl::Duration spin = absl::Microseconds(50);
    // collective_spin: the same while a collective (not a lone send/recv) is in flight: its
    // next phase usually starts within a peer's reduction time, and sleeping in between
    // costs a wake-up per phase (transport/ucx/README.md "Bandwidth"). Lone receives — the
    // pipeline links keep one posted at all times — only get `spin`.
    absl::Duration collective_spin = absl::Milliseconds(2);
    // detect_peer_failure: create endpoints in UCX's peer-failure mode
    // (UCP_ERR_HANDLING_MODE_PEER): when a peer's endpoint fails (its process died; over
    // tcp at once, over shared memory after UCX_KEEPALIVE_INTERVAL, 20 s by default),
    // every in-flight operation that talks to it, and every later one, fails with
    // Unavailable naming the rank. Off (default): such operations end by timeout.
    bool detect_peer_failure = false;
    // progress, progress_interval, timeout_hint: CreateFromLaunchEnv passes them to the
    // rendezvous (RendezvousOptions: a line every interval while ranks are missing), and
    // WaitingReports uses the hint too.
    std::function<void(const std::string&)> progress;
    absl::Duration progress_interval = absl::Seconds(10);
    std::string timeout_hint;
  };

  // Create: joins the job (rank, world_size) at the rendezvous, exchanges worker addresses
  // and starts the progress thread. UCX reads its usual variables (UCX_TLS,
  // UCX_NET_DEVICES, ...). Errors: those of Rendezvous::Connect / AllGather; Unavailable
  // with the UCX status text when a ucp call fails.
  static absl::StatusOr<std::unique_ptr<UcxCommunicator>> Create(
      const RendezvousOptions& rendezvous, int rank, int world_size, Options options);
  // CreateFromLaunchEnv: Create with the rank, world size and master from `env`
  // (DetectLaunchEnv) and `rendezvous_timeout`.
  static absl::StatusOr<std::unique_ptr<UcxCommunicator>> CreateFromLaunchEnv(
      const LaunchEnv& env, absl::Duration rendezvous_timeout, Options options);

  UcxCommunicator(const UcxCommunicator&) = delete;
  UcxCommunicator& operator=(const UcxCommunicator&) = delete;
  // ~UcxCommunicator: stops the progress thread, fails operations still in flight with
  // Cancelled and force-closes the endpoints (no barrier: prefer Close()).
  ~UcxCommunicator() override;

  // Close: the orderly end — a rendezvous barrier (every rank has called Close, so no
  // message is still on its way), endpoint flush, a second barrier, then the same as the
  // destructor. Call it after every operation's `done` has run. `all_arrived` (if set)
  // runs once the first barrier has passed — every rank is closing — before the flush:
  // until then a peer that hangs instead of closing is still the caller's to detect (the
  // training heartbeat stops reporting lost peers only there, api/train/heartbeat.h
  // Quiesce). Errors: the barrier's.
  absl::Status Close(const std::function<void()>& all_arrived = {});

  int rank() const override;
  int world_size() const;

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

  // CheckTimeouts: fails every operation of this rank posted at least Options::timeout
  // before `now` (its `done` gets DeadlineExceeded with the report) and returns one status
  // per operation failed by this call — the CollectiveWatchdog interface
  // (collective_watchdog.h). Blocks briefly on the progress thread; must not be called
  // from a `done` callback.
  std::vector<absl::Status> CheckTimeouts(absl::Time now);

  // WaitingReports: one line per collective of this rank posted at least `older_than` before
  // `now` and not yet complete (none is failed), at most `limit` of them, oldest first
  // (point-to-point sends and receives are left out: a pipeline link's receive waits for
  // its neighbour's next message by design):
  //   rank 1 has waited 20s in all-gather on world (group 51) seq 0: ranks not arrived
  //   [2]; 9m40s left before the timeout of 10m
  // The collective watchdog's caller prints them every ~10 s while peers are late
  // (api/train/train_command.cc). Same thread rules as CheckTimeouts.
  std::vector<std::string> WaitingReports(absl::Time now, absl::Duration older_than,
                                          int limit = 3);

  // pending_operations: operations posted and not yet completed or failed.
  int pending_operations() const;

  // Impl: the UCX state and progress thread (ucx_communicator.cc).
  class Impl;

 private:
  explicit UcxCommunicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mxmaca::transport::ucx

#endif  // MXMACA_TRANSPORT_UCX_UCX_COMMUNICATOR_H_
