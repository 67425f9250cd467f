// transport/inprocess_communicator.cc: matching, fixed-order reduction and error reports
// of the in-process backend.
#include "transport/inprocess_communicator.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mxmaca::transport {

// Post: one rank's contribution to one operation.
struct InProcessHub::Post {
  CollectiveInfo info;
  int slot = 0;         // collectives: index in group; send: 0; recv: 1
  int root_index = -1;  // broadcast: root's index in the group
  const void* send = nullptr;
  void* recv = nullptr;
  std::vector<int64_t> send_counts, send_displs, recv_counts, recv_displs;
  DoneCallback done;
  std::string invalid;  // non-empty: what is wrong with the arguments
};

// Pending: an operation that some but not all members have posted.
struct InProcessHub::Pending {
  bool p2p = false;
  std::vector<int> members;  // collectives: group ranks; p2p: {src, dst}
  absl::Time first_arrival;
  std::vector<std::unique_ptr<Post>> arrivals;  // in arrival order
  std::vector<Post*> by_slot;                   // nullptr until that slot posted
  absl::Status failure;                         // non-OK once failed

  bool complete() const { return arrivals.size() == members.size(); }
};

namespace {

using Notification = std::pair<DoneCallback, CollectiveInfo>;

void Notify(std::vector<Notification>& notes, const absl::Status& status) {
  for (auto& [done, info] : notes) {
    if (done) done(info, status);
  }
}

// Report: every arrived rank's operation and the ranks that have not arrived.
std::string Report(const std::vector<std::unique_ptr<InProcessHub::Post>>& arrivals,
                   const std::vector<InProcessHub::Post*>& by_slot,
                   const std::vector<int>& members) {
  std::vector<std::string> lines;
  for (const auto& post : arrivals) {
    lines.push_back(absl::StrCat("rank ", post->info.rank, " posted ", post->info.ToString(),
                                 post->invalid.empty() ? "" : " [invalid: ",
                                 post->invalid, post->invalid.empty() ? "" : "]"));
  }
  std::vector<int> missing;
  for (size_t s = 0; s < members.size() && s < by_slot.size(); ++s) {
    if (by_slot[s] == nullptr) missing.push_back(members[s]);
  }
  return absl::StrCat(absl::StrJoin(lines, "; "), "; ranks not arrived: [",
                      absl::StrJoin(missing, ", "), "]");
}

// CopyBytes: memmove that accepts null pointers when there is nothing to copy (a rank may
// pass nullptr buffers with count 0, and an empty std::vector's data() may be null).
void CopyBytes(void* dst, const void* src, int64_t bytes) {
  if (bytes > 0) std::memmove(dst, src, static_cast<size_t>(bytes));
}

bool Overflows(int64_t count, int64_t elem) { return count > (INT64_MAX / 4) / elem; }

}  // namespace

// ---------------------------------------------------------------------------------------
// InProcessCommunicator: fill a Post and hand it to the hub.

CollectiveInfo InProcessCommunicator::AllReduceSum(const ProcessGroup& group, const float* send,
                                                   float* recv, int64_t count,
                                                   DoneCallback done) {
  InProcessHub::Post post;
  post.info.op = CollectiveOp::kAllReduce;
  post.info.dtype = DataType::kFloat32;
  post.info.count = count;
  post.send = send;
  post.recv = recv;
  post.done = std::move(done);
  if (count > 0 && (send == nullptr || recv == nullptr)) post.invalid = "null buffer";
  return hub_->Submit(rank_, group, std::move(post));
}

CollectiveInfo InProcessCommunicator::AllGather(const ProcessGroup& group, const void* send,
                                                void* recv, int64_t count, DataType dtype,
                                                DoneCallback done) {
  InProcessHub::Post post;
  post.info.op = CollectiveOp::kAllGather;
  post.info.dtype = dtype;
  post.info.count = count;
  post.send = send;
  post.recv = recv;
  post.done = std::move(done);
  if (count > 0 && (send == nullptr || recv == nullptr)) post.invalid = "null buffer";
  return hub_->Submit(rank_, group, std::move(post));
}

CollectiveInfo InProcessCommunicator::ReduceScatterSum(const ProcessGroup& group,
                                                       const float* send, float* recv,
                                                       int64_t recv_count, DoneCallback done) {
  InProcessHub::Post post;
  post.info.op = CollectiveOp::kReduceScatter;
  post.info.dtype = DataType::kFloat32;
  post.info.count = recv_count * group.size();
  post.send = send;
  post.recv = recv;
  post.done = std::move(done);
  if (recv_count > 0 && (send == nullptr || recv == nullptr)) post.invalid = "null buffer";
  return hub_->Submit(rank_, group, std::move(post));
}

CollectiveInfo InProcessCommunicator::Broadcast(const ProcessGroup& group, int root,
                                                void* buffer, int64_t count, DataType dtype,
                                                DoneCallback done) {
  InProcessHub::Post post;
  post.info.op = CollectiveOp::kBroadcast;
  post.info.dtype = dtype;
  post.info.count = count;
  post.root_index = root;
  post.send = buffer;
  post.recv = buffer;
  post.done = std::move(done);
  if (root < 0 || root >= group.size()) {
    post.invalid = absl::StrCat("root ", root, " outside group of ", group.size());
  } else {
    post.info.peer = group.ranks[root];
  }
  if (count > 0 && buffer == nullptr) post.invalid = "null buffer";
  return hub_->Submit(rank_, group, std::move(post));
}

namespace {

// The post of one side of a point-to-point transfer: slot 0 sends `send`, slot 1 receives
// into `recv`; `peer` is the other side's index in `group`.
InProcessHub::Post PointToPointPost(CollectiveOp op, int slot, const ProcessGroup& group, int peer,
                                    const void* send, void* recv, int64_t count, DataType dtype,
                                    DoneCallback done) {
  InProcessHub::Post post;
  post.info.op = op;
  post.info.dtype = dtype;
  post.info.count = count;
  post.send = send;
  post.recv = recv;
  post.slot = slot;
  post.done = std::move(done);
  if (peer < 0 || peer >= group.size()) {
    post.invalid = absl::StrCat("peer ", peer, " outside group of ", group.size());
  } else {
    post.info.peer = group.ranks[peer];
  }
  if (count > 0 && send == nullptr && recv == nullptr) post.invalid = "null buffer";
  return post;
}

}  // namespace

CollectiveInfo InProcessCommunicator::Send(const ProcessGroup& group, int peer,
                                           const void* buffer, int64_t count, DataType dtype,
                                           DoneCallback done) {
  return hub_->Submit(rank_, group,
                      PointToPointPost(CollectiveOp::kSend, 0, group, peer, buffer, nullptr, count,
                                       dtype, std::move(done)));
}

CollectiveInfo InProcessCommunicator::Recv(const ProcessGroup& group, int peer, void* buffer,
                                           int64_t count, DataType dtype, DoneCallback done) {
  return hub_->Submit(rank_, group,
                      PointToPointPost(CollectiveOp::kRecv, 1, group, peer, nullptr, buffer, count,
                                       dtype, std::move(done)));
}

CollectiveInfo InProcessCommunicator::AllToAllV(
    const ProcessGroup& group, const void* send, const std::vector<int64_t>& send_counts,
    const std::vector<int64_t>& send_displs, void* recv, const std::vector<int64_t>& recv_counts,
    const std::vector<int64_t>& recv_displs, DataType dtype, DoneCallback done) {
  InProcessHub::Post post;
  post.info.op = CollectiveOp::kAllToAllV;
  post.info.dtype = dtype;
  post.send = send;
  post.recv = recv;
  post.send_counts = send_counts;
  post.send_displs = send_displs;
  post.recv_counts = recv_counts;
  post.recv_displs = recv_displs;
  post.done = std::move(done);
  const size_t n = static_cast<size_t>(group.size());
  if (send_counts.size() != n || send_displs.size() != n || recv_counts.size() != n ||
      recv_displs.size() != n) {
    post.invalid = absl::StrCat("count/displacement vectors have sizes ", send_counts.size(),
                                ", ", send_displs.size(), ", ", recv_counts.size(), ", ",
                                recv_displs.size(), "; expected the group size ", n);
  } else {
    int64_t total = 0, recv_total = 0;
    for (size_t j = 0; j < n; ++j) {
      if (send_counts[j] < 0 || send_displs[j] < 0 || recv_counts[j] < 0 ||
          recv_displs[j] < 0) {
        post.invalid = absl::StrCat("negative count or displacement for member ", j);
      }
      total += send_counts[j];
      recv_total += recv_counts[j];
    }
    post.info.count = total;
    if ((total > 0 && send == nullptr) || (recv_total > 0 && recv == nullptr)) {
      post.invalid = "null buffer";
    }
  }
  return hub_->Submit(rank_, group, std::move(post));
}

// ---------------------------------------------------------------------------------------
// InProcessHub

InProcessHub::InProcessHub(int world_size, Options options)
    : world_size_(world_size), options_(std::move(options)) {
  for (int r = 0; r < world_size; ++r) {
    endpoints_.push_back(std::make_unique<InProcessCommunicator>(this, r));
  }
}

InProcessCommunicator* InProcessHub::ForRank(int rank) {
  if (rank < 0 || rank >= world_size_) return nullptr;
  return endpoints_[rank].get();
}

absl::Time InProcessHub::Now() const { return options_.clock ? options_.clock() : absl::Now(); }

int InProcessHub::pending_operations() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(pending_.size());
}

CollectiveInfo InProcessHub::Submit(int rank, const ProcessGroup& group, Post post_value) {
  auto post = std::make_unique<Post>(std::move(post_value));
  CollectiveInfo& info = post->info;
  info.group_id = group.id;
  info.group_name = group.name();
  info.rank = rank;
  info.bytes = Overflows(info.count, DataTypeSize(info.dtype))
                   ? -1
                   : info.count * DataTypeSize(info.dtype);
  const bool p2p = info.op == CollectiveOp::kSend || info.op == CollectiveOp::kRecv;

  // A post that does not come from a member at group.rank_in_group cannot be matched to
  // any slot: fail it at once without consuming a sequence number.
  bool member = group.rank_in_group >= 0 && group.rank_in_group < group.size() &&
                group.ranks[group.rank_in_group] == rank;
  for (int r : group.ranks) member = member && r >= 0 && r < world_size_;
  // Likewise a send/recv whose peer is outside the group: there is no channel to match on.
  if (!member || (p2p && info.peer < 0)) {
    const absl::Status status = absl::InvalidArgumentError(
        !member ? absl::StrCat("InProcessHub: ", info.ToString(), ": rank ", rank,
                               " is not member ", group.rank_in_group, " of ", group.name(),
                               " ranks [", absl::StrJoin(group.ranks, ", "), "] (world ",
                               world_size_, ")")
                : absl::StrCat("InProcessHub: ", info.ToString(), ": ", post->invalid));
    if (post->done) post->done(info, status);
    return info;
  }
  if (info.count < 0) post->invalid = absl::StrCat("negative count ", info.count);
  if (info.bytes < 0) post->invalid = absl::StrCat("count ", info.count, " overflows");
  if ((info.op == CollectiveOp::kAllReduce || info.op == CollectiveOp::kReduceScatter) &&
      info.dtype != DataType::kFloat32) {
    post->invalid = "reductions are fp32 only";
  }
  if (p2p && info.peer == rank) post->invalid = "send/recv to itself";

  std::vector<int> members;
  Key key;
  CounterKey counter;
  if (p2p) {
    const int src = info.op == CollectiveOp::kSend ? rank : info.peer;
    const int dst = info.op == CollectiveOp::kSend ? info.peer : rank;
    members = {src, dst};
    counter = {group.id, src, dst, post->slot};
    key = {group.id, src, dst, 0};
  } else {
    post->slot = group.rank_in_group;
    members = group.ranks;
    counter = {group.id, rank, -1, 0};
    key = {group.id, -1, -1, 0};
  }

  std::vector<Notification> notes;
  absl::Status status;
  std::shared_ptr<Pending> ready;
  CollectiveInfo returned;
  {
    absl::MutexLock lock(&mu_);
    info.sequence = counters_[counter]++;
    std::get<3>(key) = info.sequence;
    returned = info;
    std::shared_ptr<Pending>& pending = pending_[key];
    if (pending == nullptr) {
      pending = std::make_shared<Pending>();
      pending->p2p = p2p;
      pending->members = members;
      pending->first_arrival = Now();
      pending->by_slot.assign(members.size(), nullptr);
    }
    // Mismatch checks against the first arrival.
    std::string mismatch = post->invalid;
    if (mismatch.empty() && !pending->arrivals.empty()) {
      const Post& first = *pending->arrivals.front();
      if (pending->members != members) {
        mismatch = absl::StrCat("group members differ: [", absl::StrJoin(members, ", "),
                                "] vs [", absl::StrJoin(pending->members, ", "), "]");
      } else if (pending->by_slot[post->slot] != nullptr) {
        mismatch = absl::StrCat("two posts for slot ", post->slot);
      } else if (!p2p && first.info.op != info.op) {
        mismatch = "different operations";
      } else if (first.info.dtype != info.dtype) {
        mismatch = "different data types";
      } else if (info.op != CollectiveOp::kAllToAllV && first.info.count != info.count) {
        mismatch = "different element counts";
      } else if (first.root_index != post->root_index) {
        mismatch = "different broadcast roots";
      }
    }
    const int slot = post->slot;
    const bool slot_free = pending->by_slot[slot] == nullptr;
    notes.emplace_back(post->done, info);
    pending->arrivals.push_back(std::move(post));
    if (slot_free) pending->by_slot[slot] = pending->arrivals.back().get();
    // A duplicate slot (inconsistent groups) is kept for the report; the operation has
    // failed already, and it is erased once every slot has been posted.

    if (!pending->failure.ok()) {
      status = pending->failure;  // failed earlier (mismatch or timeout): fail this post too
    } else if (!mismatch.empty()) {
      const std::string report = Report(pending->arrivals, pending->by_slot, pending->members);
      pending->failure = (mismatch == pending->arrivals.back()->invalid)
                             ? absl::InvalidArgumentError(absl::StrCat(
                                   "InProcessHub: invalid ", CollectiveOpName(info.op), " on ",
                                   info.group_name, " seq ", info.sequence, " (", mismatch,
                                   "): ", report))
                             : absl::FailedPreconditionError(absl::StrCat(
                                   "InProcessHub: mismatch on ", info.group_name, " (group ",
                                   info.group_id, ") seq ", info.sequence, " (", mismatch,
                                   "): ", report));
      status = pending->failure;
      notes.clear();
      for (const auto& p : pending->arrivals) notes.emplace_back(p->done, p->info);
    } else {
      notes.clear();  // completes below, or later when the last member posts
    }
    const bool all_slots = std::all_of(pending->by_slot.begin(), pending->by_slot.end(),
                                       [](const Post* p) { return p != nullptr; });
    if (all_slots) {
      if (pending->failure.ok()) ready = pending;
      pending_.erase(key);
    }
  }
  if (!notes.empty()) Notify(notes, status);
  if (ready != nullptr) {
    if (options_.executor) {
      options_.executor([ready] { Complete(ready); });
    } else {
      Complete(ready);
    }
  }
  return returned;
}

void InProcessHub::Complete(const std::shared_ptr<Pending>& pending) {
  const std::vector<Post*>& s = pending->by_slot;
  const int n = static_cast<int>(s.size());
  const Post& first = *s[0];
  const int64_t elem = DataTypeSize(first.info.dtype);
  absl::Status status;
  switch (first.info.op) {
    case CollectiveOp::kAllReduce:
    case CollectiveOp::kReduceScatter: {
      // Fixed group-rank order, starting from rank 0's value (see the header).
      const int64_t count = first.info.count;
      std::vector<float> acc(static_cast<const float*>(s[0]->send),
                             static_cast<const float*>(s[0]->send) + count);
      for (int r = 1; r < n; ++r) {
        const float* x = static_cast<const float*>(s[r]->send);
        for (int64_t i = 0; i < count; ++i) acc[i] += x[i];
      }
      if (first.info.op == CollectiveOp::kAllReduce) {
        for (int j = 0; j < n; ++j) CopyBytes(s[j]->recv, acc.data(), count * sizeof(float));
      } else {
        const int64_t chunk = count / n;
        for (int j = 0; j < n; ++j) {
          CopyBytes(s[j]->recv, acc.data() + j * chunk, chunk * sizeof(float));
        }
      }
      break;
    }
    case CollectiveOp::kAllGather: {
      const int64_t bytes = first.info.bytes;
      for (int j = 0; j < n; ++j) {
        for (int r = 0; r < n; ++r) {
          // Overlap-safe: rank j's send may be its own slot j of recv (in-place all-gather).
          CopyBytes(static_cast<char*>(s[j]->recv) + r * bytes, s[r]->send, bytes);
        }
      }
      break;
    }
    case CollectiveOp::kBroadcast: {
      const void* src = s[first.root_index]->send;
      for (int j = 0; j < n; ++j) {
        if (j != first.root_index) CopyBytes(s[j]->recv, src, first.info.bytes);
      }
      break;
    }
    case CollectiveOp::kSend:
    case CollectiveOp::kRecv:
      CopyBytes(s[1]->recv, s[0]->send, s[0]->info.bytes);
      break;
    case CollectiveOp::kAllToAllV: {
      std::vector<std::string> bad;
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          if (s[i]->send_counts[j] != s[j]->recv_counts[i]) {
            bad.push_back(absl::StrCat("rank ", s[i]->info.rank, " sends ",
                                       s[i]->send_counts[j], " to rank ", s[j]->info.rank,
                                       " which expects ", s[j]->recv_counts[i]));
          }
        }
      }
      if (!bad.empty()) {
        status = absl::FailedPreconditionError(absl::StrCat(
            "InProcessHub: mismatch on ", first.info.group_name, " (group ",
            first.info.group_id, ") seq ", first.info.sequence, " (all_to_all_v counts: ",
            absl::StrJoin(bad, "; "), "): ", Report(pending->arrivals, s, pending->members)));
        break;
      }
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          CopyBytes(static_cast<char*>(s[j]->recv) + s[j]->recv_displs[i] * elem,
                      static_cast<const char*>(s[i]->send) + s[i]->send_displs[j] * elem,
                      s[i]->send_counts[j] * elem);
        }
      }
      break;
    }
  }
  std::vector<Notification> notes;
  for (const auto& p : pending->arrivals) notes.emplace_back(p->done, p->info);
  Notify(notes, status);
}

std::vector<absl::Status> InProcessHub::CheckTimeouts(absl::Time now) {
  std::vector<absl::Status> reports;
  std::vector<std::pair<std::vector<Notification>, absl::Status>> to_notify;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, pending] : pending_) {
      if (!pending->failure.ok() || now - pending->first_arrival < options_.timeout) continue;
      const CollectiveInfo& first = pending->arrivals.front()->info;
      pending->failure = absl::DeadlineExceededError(absl::StrCat(
          "InProcessHub: ", CollectiveOpName(first.op), " on ", first.group_name, " (group ",
          first.group_id, ") seq ", first.sequence, " did not complete within ",
          absl::FormatDuration(options_.timeout), " (first post ",
          absl::FormatDuration(now - pending->first_arrival), " ago): ",
          Report(pending->arrivals, pending->by_slot, pending->members)));
      reports.push_back(pending->failure);
      std::vector<Notification> notes;
      for (const auto& p : pending->arrivals) notes.emplace_back(p->done, p->info);
      to_notify.emplace_back(std::move(notes), pending->failure);
    }
  }
  for (auto& [notes, status] : to_notify) Notify(notes, status);
  return reports;
}

}  // namespace mxmaca::transport
