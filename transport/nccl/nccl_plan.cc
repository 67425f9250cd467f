// transport/nccl/nccl_plan.cc: argument checks, all-to-all-v plan, sequence counters and the
// timeout report of the NCCL backend (no CUDA).
#include "transport/nccl/nccl_plan.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mxmaca::transport::nccl {
namespace {

constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max() / 4;

std::string Members(const ProcessGroup& group) {
  return absl::StrCat("[", absl::StrJoin(group.ranks, ", "), "]");
}

}  // namespace

absl::Status CheckMembership(const ProcessGroup& group, int rank, int world_size) {
  if (group.ranks.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(group.name(), " (group ", group.id,
                                                   ") has no members"));
  }
  if (group.rank_in_group < 0 || group.rank_in_group >= group.size() ||
      group.ranks[group.rank_in_group] != rank) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is not member ",
                                                   group.rank_in_group, " of ", group.name(),
                                                   " ranks ", Members(group), " (world ",
                                                   world_size, ")"));
  }
  for (int i = 0; i < group.size(); ++i) {
    const int r = group.ranks[i];
    if (r < 0 || r >= world_size) {
      return absl::InvalidArgumentError(absl::StrCat("member ", i, " of ", group.name(),
                                                     " ranks ", Members(group), " is rank ", r,
                                                     ", outside the world [0, ", world_size,
                                                     ")"));
    }
    if (i > 0 && r <= group.ranks[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(group.name(), " ranks ", Members(group),
                                                     " are not strictly ascending at member ",
                                                     i));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckCount(int64_t count, DataType dtype) {
  if (count < 0) return absl::InvalidArgumentError(absl::StrCat("negative count ", count));
  if (count > kMaxBytes / DataTypeSize(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("count ", count, " of ", DataTypeName(dtype), " overflows"));
  }
  return absl::OkStatus();
}

absl::Status CheckIndex(const ProcessGroup& group, int index, const char* what) {
  if (index < 0 || index >= group.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", index, " outside [0, ",
                                                   group.size(), ") of ", group.name()));
  }
  return absl::OkStatus();
}

absl::StatusOr<AllToAllVPlan> PlanAllToAllV(const ProcessGroup& group,
                                           const std::vector<int64_t>& send_counts,
                                           const std::vector<int64_t>& send_displs,
                                           const std::vector<int64_t>& recv_counts,
                                           const std::vector<int64_t>& recv_displs) {
  const int n = group.size();
  const std::pair<const char*, const std::vector<int64_t>*> vectors[] = {
      {"send_counts", &send_counts},
      {"send_displs", &send_displs},
      {"recv_counts", &recv_counts},
      {"recv_displs", &recv_displs}};
  for (const auto& [name, v] : vectors) {
    if (static_cast<int>(v->size()) != n) {
      return absl::InvalidArgumentError(absl::StrCat(name, " has ", v->size(),
                                                     " entries, the group ", group.name(),
                                                     " has ", n, " members"));
    }
    for (int j = 0; j < n; ++j) {
      if ((*v)[j] < 0 || (*v)[j] > kMaxBytes) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, "[", j, "] = ", (*v)[j], " is negative or too large"));
      }
    }
  }
  AllToAllVPlan plan;
  // [begin, end, member] of every non-empty receive range, to check they are disjoint.
  std::vector<std::tuple<int64_t, int64_t, int>> recv_ranges;
  for (int j = 0; j < n; ++j) {
    if (send_displs[j] > kMaxBytes - send_counts[j]) {
      return absl::InvalidArgumentError(absl::StrCat("send_displs[", j, "] + send_counts[", j,
                                                     "] overflows"));
    }
    if (recv_displs[j] > kMaxBytes - recv_counts[j]) {
      return absl::InvalidArgumentError(absl::StrCat("recv_displs[", j, "] + recv_counts[", j,
                                                     "] overflows"));
    }
    plan.total_send += send_counts[j];
    plan.total_recv += recv_counts[j];
    if (plan.total_send > kMaxBytes || plan.total_recv > kMaxBytes) {
      return absl::InvalidArgumentError("total all-to-all-v count overflows");
    }
    if (recv_counts[j] > 0) {
      recv_ranges.emplace_back(recv_displs[j], recv_displs[j] + recv_counts[j], j);
    }
  }
  std::sort(recv_ranges.begin(), recv_ranges.end());
  for (size_t i = 1; i < recv_ranges.size(); ++i) {
    const auto& [b0, e0, m0] = recv_ranges[i - 1];
    const auto& [b1, e1, m1] = recv_ranges[i];
    if (b1 < e0) {
      return absl::InvalidArgumentError(absl::StrCat("recv ranges of member ", m0, " [", b0,
                                                     ", ", e0, ") and member ", m1, " [", b1,
                                                     ", ", e1, ") overlap"));
    }
  }
  const int me = group.rank_in_group;
  for (int k = 0; k < n; ++k) {
    const int j = (me + k) % n;
    if (send_counts[j] == 0 && recv_counts[j] == 0) continue;
    AllToAllVPlan::Transfer t;
    t.peer = j;
    t.send_offset = send_displs[j];
    t.send_count = send_counts[j];
    t.recv_offset = recv_displs[j];
    t.recv_count = recv_counts[j];
    plan.transfers.push_back(t);
  }
  return plan;
}

uint64_t SequenceCounters::NextCollective(int64_t group_id) { return collectives_[group_id]++; }

uint64_t SequenceCounters::NextPointToPoint(int64_t group_id, int src, int dst, bool send) {
  return p2p_[{group_id, src, dst, send}]++;
}

std::string TimeoutReport(const PendingOp& op, const std::vector<int>& members,
                          const std::vector<PendingOp>& pending, int rank, absl::Duration timeout,
                          absl::Time now) {
  const CollectiveInfo& info = op.info;
  std::string s = absl::StrCat(
      "NcclCommunicator: ", CollectiveOpName(info.op), " on ", info.group_name, " (group ",
      info.group_id, ") seq ", info.sequence, " did not complete within ",
      absl::FormatDuration(timeout), " (posted ", absl::FormatDuration(now - op.posted),
      " ago): rank ", rank, " posted ", info.ToString(), "; members of the group: [",
      absl::StrJoin(members, ", "), "]; still in flight on rank ", rank, " (oldest first): ");
  for (size_t i = 0; i < pending.size(); ++i) {
    const CollectiveInfo& p = pending[i].info;
    absl::StrAppend(&s, i ? ", " : "", CollectiveOpName(p.op), " on ", p.group_name, " seq ",
                    p.sequence, " (", absl::FormatDuration(now - pending[i].posted), ")");
  }
  absl::StrAppend(&s,
                  "; NCCL does not report which member is missing: compare the reports of the "
                  "members (a member with no report, or whose oldest pending operation on "
                  "this group has a smaller sequence, is the one behind)");
  return s;
}

}  // namespace mxmaca::transport::nccl
