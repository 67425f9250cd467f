// transport/nccl/operation_table.h: the bookkeeping of NcclCommunicator without CUDA — the
// registered groups, sequence numbers, operations in flight (in stream order), batches,
// completion, asynchronous errors, timeouts and cancellation — behind a small
// OperationEngine interface that the CUDA side implements with NCCL calls and events
// (nccl_communicator.cc) and tests implement with a fake (operation_table_test), so every
// path of `done` is tested on machines without a GPU.
//
// Rules it enforces (transport/communicator.h): `done` runs exactly once per post; a refused
// post (bad arguments, unknown group, broken group) gets `done` at once on the calling
// thread and consumes no sequence number; completions are delivered in post order (one
// stream); callbacks run with no lock held.
#ifndef MXMACA_TRANSPORT_NCCL_OPERATION_TABLE_H_
#define MXMACA_TRANSPORT_NCCL_OPERATION_TABLE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "transport/communicator.h"
#include "transport/nccl/nccl_plan.h"
#include "transport/process_group.h"

namespace mxmaca::transport::nccl {

// LaunchFn: enqueues one operation's nccl* call(s). `comm` is the group's ncclComm_t and
// `stream` the communication cudaStream_t (as void*, so this header needs no CUDA);
// `context` names the launch for error messages.
using LaunchFn = std::function<absl::Status(void* comm, void* stream, const std::string& context)>;

// Operation: one valid post.
struct Operation {
  CollectiveInfo info;
  DoneCallback done;
  absl::Time posted;
  LaunchFn launch;
  // completion: the engine's handle for the launch this operation was part of (a CUDA
  // event); shared by the operations of one batch; null until launched.
  std::shared_ptr<void> completion;
};

// OperationEngine: what the table needs from the device side. Called with the table's lock
// held (so NCCL calls are serialised), never concurrently.
class OperationEngine {
 public:
  virtual ~OperationEngine() = default;
  // Launch: enqueues `ops` (all on healthy groups) as one unit — after the compute stream,
  // in one ncclGroupStart/End — and returns the completion handle. On error nothing was
  // enqueued that will complete (the table fails every op with the error).
  virtual absl::StatusOr<std::shared_ptr<void>> Launch(const std::vector<Operation*>& ops,
                                                       const std::string& context) = 0;
  // Completed: true when the launch of `completion` has finished, false while it runs, an
  // error when it failed (a CUDA error).
  virtual absl::StatusOr<bool> Completed(const std::shared_ptr<void>& completion) = 0;
  // AsyncError: OK, or the asynchronous error of the group's communicator.
  virtual absl::Status AsyncError(int64_t group_id) = 0;
  // Abort: aborts the group's communicator (in-flight work stops; the group is unusable).
  virtual void Abort(int64_t group_id) = 0;
};

class OperationTable {
 public:
  // OperationTable: for global rank `rank` of `world_size`; `engine` is borrowed; `clock`
  // stamps posts (absl::Now when empty); `timeout` is CheckTimeouts' limit.
  OperationTable(int rank, int world_size, OperationEngine* engine,
                 std::function<absl::Time()> clock, absl::Duration timeout);
  OperationTable(const OperationTable&) = delete;
  OperationTable& operator=(const OperationTable&) = delete;

  // AddGroup: registers a group whose communicator exists (before any post).
  void AddGroup(const ProcessGroup& group);

  // Post: fills info's group, rank, bytes and sequence; refuses (done at once, nothing
  // consumed) when CheckMembership fails, `invalid` is not OK, the group was not added or
  // has other members (InvalidArgument) or is broken (FailedPrecondition); otherwise
  // launches it (or adds it to the open batch). A failed launch fails `done` at once.
  // Returns the info (sequence 0 when refused).
  CollectiveInfo Post(const ProcessGroup& group, CollectiveInfo info, absl::Status invalid,
                      LaunchFn launch, DoneCallback done);

  // BeginBatch / EndBatch: see NcclCommunicator::BeginBatch.
  void BeginBatch();
  absl::Status EndBatch();

  // Poll: one round on the poller thread — delivers completions in post order (stopping
  // at the first operation still running) and, when `check_async`, asks AsyncError of
  // every group with operations in flight (an error aborts the group and fails its
  // operations with that error's code and text). Returns true while operations remain.
  bool Poll(bool check_async);

  // WaitForWork: the poller's pause between Poll rounds — while operations are in flight,
  // `poll_interval` (or until Stop); while none is, until one is posted or Stop. Returns
  // false once stopped.
  bool WaitForWork(absl::Duration poll_interval);
  void Stop();

  // CheckTimeouts: see NcclCommunicator::CheckTimeouts.
  std::vector<absl::Status> CheckTimeouts(absl::Time now);

  // BusyGroups: the groups with operations in flight (launched). CancelAll: fails every
  // launched or batched operation with Cancelled (call after the engine has aborted the
  // busy groups, so no device work still uses their buffers).
  std::set<int64_t> BusyGroups() const;
  void CancelAll();

  // pending: launched and batched operations not yet finished.
  int pending() const;

 private:
  struct GroupState {
    ProcessGroup group;
    absl::Status broken;
  };
  struct Finished {
    std::shared_ptr<Operation> op;
    absl::Status status;
  };
  absl::Time Now() const { return clock_ ? clock_() : absl::Now(); }
  // Launch: engine launch; on success the ops join pending_, else they go to `failed`.
  void Launch(std::vector<std::shared_ptr<Operation>> ops, std::vector<Finished>* failed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FailGroup: marks `group_id` broken with `why` (aborting it once) and moves its pending
  // operations to `out`; `first` (if in it) gets `first_status`, the others `why`'s code.
  void FailGroup(int64_t group_id, const absl::Status& why, const Operation* first,
                 const absl::Status& first_status, std::vector<Finished>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Run(std::vector<Finished> finished);
  bool WorkOrStop() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !pending_.empty(); }

  const int rank_;
  const int world_size_;
  OperationEngine* const engine_;
  const std::function<absl::Time()> clock_;
  const absl::Duration timeout_;

  mutable absl::Mutex mu_;
  std::map<int64_t, GroupState> groups_ ABSL_GUARDED_BY(mu_);
  SequenceCounters counters_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Operation>> pending_ ABSL_GUARDED_BY(mu_);  // post order
  std::vector<std::shared_ptr<Operation>> batch_ ABSL_GUARDED_BY(mu_);
  bool batching_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace mxmaca::transport::nccl

#endif  // MXMACA_TRANSPORT_NCCL_OPERATION_TABLE_H_
