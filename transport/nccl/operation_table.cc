// transport/nccl/operation_table.cc: NcclCommunicator's bookkeeping (no CUDA).
#include "transport/nccl/operation_table.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mxmaca::transport::nccl {
namespace {

absl::Status Prefixed(const absl::Status& s, const CollectiveInfo& info) {
  return absl::Status(s.code(), absl::StrCat("NcclCommunicator: ", info.ToString(), ": ",
                                             s.message()));
}

}  // namespace

OperationTable::OperationTable(int rank, int world_size, OperationEngine* engine,
                               std::function<absl::Time()> clock, absl::Duration timeout)
    : rank_(rank),
      world_size_(world_size),
      engine_(engine),
      clock_(std::move(clock)),
      timeout_(timeout) {}

void OperationTable::AddGroup(const ProcessGroup& group) {
  absl::MutexLock lock(&mu_);
  groups_[group.id].group = group;
}

void OperationTable::Run(std::vector<Finished> finished) {
  for (Finished& f : finished) {
    if (f.op->done) f.op->done(f.op->info, std::move(f.status));
  }
}

CollectiveInfo OperationTable::Post(const ProcessGroup& group, CollectiveInfo info,
                                    absl::Status invalid, LaunchFn launch, DoneCallback done) {
  info.group_id = group.id;
  info.group_name = group.name();
  info.rank = rank_;
  info.bytes = CheckCount(info.count, info.dtype).ok() ? info.count * DataTypeSize(info.dtype)
                                                        : -1;
  absl::Status refuse = CheckMembership(group, rank_, world_size_);
  if (refuse.ok()) refuse = std::move(invalid);
  std::vector<Finished> failed;
  {
    absl::MutexLock lock(&mu_);
    auto it = groups_.find(group.id);
    if (refuse.ok()) {
      if (it == groups_.end()) {
        refuse = absl::InvalidArgumentError(absl::StrCat(
            "group ", group.id, " (", group.name(), ") was not given to NcclCommunicator::Create"));
      } else if (it->second.group.ranks != group.ranks) {
        refuse = absl::InvalidArgumentError(
            absl::StrCat(group.name(), " ranks [", absl::StrJoin(group.ranks, ", "),
                         "] differ from the group given to Create: [",
                         absl::StrJoin(it->second.group.ranks, ", "), "]"));
      } else if (!it->second.broken.ok()) {
        refuse = absl::FailedPreconditionError(absl::StrCat(
            "the communicator of ", group.name(), " is no longer usable: ",
            it->second.broken.message()));
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
        batch_.push_back(std::move(op));
      } else {
        Launch({std::move(op)}, &failed);
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

void OperationTable::Launch(std::vector<std::shared_ptr<Operation>> ops,
                            std::vector<Finished>* failed) {
  const std::string context =
      ops.size() == 1 ? absl::StrCat("NcclCommunicator: ", ops[0]->info.ToString())
                      : absl::StrCat("NcclCommunicator: batch of ", ops.size(),
                                     " operations from ", ops[0]->info.ToString());
  absl::Status refused;
  for (const auto& op : ops) {
    const GroupState& state = groups_.at(op->info.group_id);
    if (!state.broken.ok()) {  // batched before its group failed
      refused = absl::FailedPreconditionError(
          absl::StrCat(context, ": the communicator of ", op->info.group_name,
                       " is no longer usable: ", state.broken.message()));
      break;
    }
  }
  std::vector<Operation*> raw;
  for (const auto& op : ops) raw.push_back(op.get());
  const absl::StatusOr<std::shared_ptr<void>> completion =
      refused.ok() ? engine_->Launch(raw, context)
                   : absl::StatusOr<std::shared_ptr<void>>(refused);
  for (auto& op : ops) {
    if (completion.ok()) {
      op->completion = *completion;
      pending_.push_back(std::move(op));
    } else {
      failed->push_back({std::move(op), completion.status()});
    }
  }
}

void OperationTable::BeginBatch() {
  absl::MutexLock lock(&mu_);
  batching_ = true;
}

absl::Status OperationTable::EndBatch() {
  std::vector<Finished> failed;
  {
    absl::MutexLock lock(&mu_);
    if (!batching_) {
      return absl::FailedPreconditionError("NcclCommunicator: EndBatch without BeginBatch");
    }
    batching_ = false;
    std::vector<std::shared_ptr<Operation>> ops;
    ops.swap(batch_);
    if (!ops.empty()) Launch(std::move(ops), &failed);
  }
  const absl::Status status = failed.empty() ? absl::OkStatus() : failed[0].status;
  Run(std::move(failed));
  return status;
}

void OperationTable::FailGroup(int64_t group_id, const absl::Status& why,
                               const Operation* first, const absl::Status& first_status,
                               std::vector<Finished>* out) {
  GroupState& state = groups_.at(group_id);
  if (state.broken.ok()) {
    state.broken = why;
    // The group's in-flight kernels stop; their completions then arrive with garbage
    // outputs, so every pending operation of the group fails here instead.
    engine_->Abort(group_id);
  }
  for (auto it = pending_.begin(); it != pending_.end();) {
    if ((*it)->info.group_id != group_id) {
      ++it;
      continue;
    }
    absl::Status s = it->get() == first ? first_status : Prefixed(why, (*it)->info);
    out->push_back({*it, std::move(s)});
    it = pending_.erase(it);
  }
}

bool OperationTable::Poll(bool check_async) {
  std::vector<Finished> finished;
  bool more;
  {
    absl::MutexLock lock(&mu_);
    // One stream: launches complete in post order, so stop at the first still running.
    while (!pending_.empty()) {
      std::shared_ptr<Operation> op = pending_.front();
      absl::StatusOr<bool> completed = engine_->Completed(op->completion);
      if (completed.ok() && !*completed) break;
      pending_.pop_front();
      finished.push_back(
          {op, completed.ok() ? absl::OkStatus() : Prefixed(completed.status(), op->info)});
    }
    if (check_async && !pending_.empty()) {
      std::set<int64_t> busy;
      for (const auto& op : pending_) busy.insert(op->info.group_id);
      for (int64_t id : busy) {
        absl::Status error = engine_->AsyncError(id);
        if (!error.ok()) FailGroup(id, error, nullptr, absl::OkStatus(), &finished);
      }
    }
    more = !pending_.empty();
  }
  Run(std::move(finished));
  return more;
}

bool OperationTable::WaitForWork(absl::Duration poll_interval) {
  absl::MutexLock lock(&mu_);
  if (pending_.empty()) {
    mu_.Await(absl::Condition(this, &OperationTable::WorkOrStop));
  } else {
    mu_.AwaitWithTimeout(absl::Condition(&stop_), poll_interval);
  }
  return !stop_;
}

void OperationTable::Stop() {
  absl::MutexLock lock(&mu_);
  stop_ = true;
}

std::vector<absl::Status> OperationTable::CheckTimeouts(absl::Time now) {
  std::vector<Finished> finished;
  {
    absl::MutexLock lock(&mu_);
    std::vector<PendingOp> snapshot;
    std::vector<std::shared_ptr<Operation>> late;
    for (const auto& op : pending_) {
      snapshot.push_back({op->info, op->posted});
      if (now - op->posted >= timeout_) late.push_back(op);
    }
    // Oldest first: each group fails once, reported by its oldest late operation.
    for (const auto& op : late) {
      const int64_t id = op->info.group_id;
      if (!groups_.at(id).broken.ok()) continue;  // already failed with its group
      const std::string report = TimeoutReport({op->info, op->posted},
                                               groups_.at(id).group.ranks, snapshot, rank_,
                                               timeout_, now);
      FailGroup(id,
                absl::FailedPreconditionError(absl::StrCat(
                    "aborted after a timeout of ", op->info.group_name, " seq ",
                    op->info.sequence, " (", report, ")")),
                op.get(), absl::DeadlineExceededError(report), &finished);
    }
  }
  std::vector<absl::Status> reports;
  for (const Finished& f : finished) reports.push_back(f.status);
  Run(std::move(finished));
  return reports;
}

std::set<int64_t> OperationTable::BusyGroups() const {
  absl::MutexLock lock(&mu_);
  std::set<int64_t> busy;
  for (const auto& op : pending_) busy.insert(op->info.group_id);
  return busy;
}

void OperationTable::CancelAll() {
  std::vector<Finished> cancelled;
  {
    absl::MutexLock lock(&mu_);
    for (auto& op : pending_) {
      cancelled.push_back({op, Prefixed(absl::CancelledError("still in flight when the "
                                                             "communicator was destroyed"),
                                        op->info)});
    }
    for (auto& op : batch_) {
      cancelled.push_back({op, Prefixed(absl::CancelledError("in a batch never ended before "
                                                             "the communicator was destroyed"),
                                        op->info)});
    }
    pending_.clear();
    batch_.clear();
  }
  Run(std::move(cancelled));
}

int OperationTable::pending() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(pending_.size() + batch_.size());
}

}  // namespace mxmaca::transport::nccl
