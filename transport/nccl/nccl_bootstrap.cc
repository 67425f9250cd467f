// transport/nccl/nccl_bootstrap.cc: the ncclUniqueId exchange over the rendezvous.
//
// Blob layout (host byte order: every rank of a job runs the same binary on the same
// architecture): repeated { int64 group id, int32 member count m, int32 members[m],
// kUniqueIdBytes id bytes }.
#include "transport/nccl/nccl_bootstrap.h"

#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "transport/nccl/nccl_plan.h"

namespace mxmaca::transport::nccl {
namespace {

template <typename T>
void Put(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// Reader: bounds-checked reads from one blob.
class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}
  bool done() const { return pos_ == data_.size(); }
  template <typename T>
  bool Get(T* value) {
    if (data_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(value, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetBytes(size_t n, std::string* out) {
    if (data_.size() - pos_ < n) return false;
    out->assign(data_.data() + pos_, n);
    pos_ += n;
    return true;
  }

 private:
  absl::string_view data_;
  size_t pos_ = 0;
};

struct RootEntry {
  std::vector<int> members;
  std::string id;
};

absl::StatusOr<std::map<int64_t, RootEntry>> ParseBlob(int from_rank, absl::string_view blob) {
  std::map<int64_t, RootEntry> entries;
  Reader reader(blob);
  while (!reader.done()) {
    int64_t group_id = 0;
    int32_t m = 0;
    RootEntry e;
    bool ok = reader.Get(&group_id) && reader.Get(&m) && m >= 0 &&
              static_cast<size_t>(m) <= blob.size() / sizeof(int32_t);
    for (int32_t i = 0; ok && i < m; ++i) {
      int32_t r = 0;
      ok = reader.Get(&r);
      e.members.push_back(r);
    }
    ok = ok && reader.GetBytes(kUniqueIdBytes, &e.id);
    if (!ok) {
      return absl::DataLossError(absl::StrCat("NCCL id blob of rank ", from_rank, " (",
                                              blob.size(), " bytes) is malformed"));
    }
    entries[group_id] = std::move(e);
  }
  return entries;
}

}  // namespace

AllGatherFn RendezvousAllGather(ucx::Rendezvous* rendezvous) {
  return [rendezvous](absl::string_view blob) { return rendezvous->AllGather(blob); };
}

absl::StatusOr<std::string> EncodeRootIds(int rank, int world_size,
                                          const std::vector<ProcessGroup>& groups,
                                          const MakeUniqueIdFn& make_id) {
  std::set<int64_t> seen;
  std::string blob;
  for (const ProcessGroup& g : groups) {
    MXMACA_RETURN_IF_ERROR(CheckMembership(g, rank, world_size));
    if (!seen.insert(g.id).second) {
      return absl::InvalidArgumentError(absl::StrCat("group id ", g.id, " (", g.name(),
                                                     ") appears twice in the group list"));
    }
    if (g.ranks[0] != rank) continue;
    MXMACA_ASSIGN_OR_RETURN(std::string id, make_id());
    if (static_cast<int>(id.size()) != kUniqueIdBytes) {
      return absl::InternalError(absl::StrCat("NCCL unique id for ", g.name(), " has ",
                                              id.size(), " bytes, expected ", kUniqueIdBytes));
    }
    Put<int64_t>(&blob, g.id);
    Put<int32_t>(&blob, g.size());
    for (int r : g.ranks) Put<int32_t>(&blob, r);
    blob += id;
  }
  return blob;
}

absl::StatusOr<std::map<int64_t, std::string>> DecodeUniqueIds(
    int rank, const std::vector<ProcessGroup>& groups, const std::vector<std::string>& blobs) {
  std::map<int, std::map<int64_t, RootEntry>> parsed;  // by root rank, parsed when needed
  std::map<int64_t, std::string> ids;
  for (const ProcessGroup& g : groups) {
    const int root = g.ranks.empty() ? -1 : g.ranks[0];
    if (root < 0 || root >= static_cast<int>(blobs.size())) {
      return absl::InvalidArgumentError(absl::StrCat("first member ", root, " of ", g.name(),
                                                     " has no blob (", blobs.size(),
                                                     " blobs gathered)"));
    }
    auto it = parsed.find(root);
    if (it == parsed.end()) {
      MXMACA_ASSIGN_OR_RETURN(auto entries, ParseBlob(root, blobs[root]));
      it = parsed.emplace(root, std::move(entries)).first;
    }
    auto e = it->second.find(g.id);
    if (e == it->second.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", root, ", first member of ", g.name(), " (group ", g.id,
          "), sent no NCCL id for it: was the group in its list?"));
    }
    if (e->second.members != g.ranks) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", root, ", first member of ", g.name(), " (group ", g.id, "), lists members [",
          absl::StrJoin(e->second.members, ", "), "], rank ", rank, " has [",
          absl::StrJoin(g.ranks, ", "), "]"));
    }
    ids[g.id] = e->second.id;
  }
  return ids;
}

absl::StatusOr<std::map<int64_t, std::string>> ExchangeUniqueIds(
    int rank, int world_size, const std::vector<ProcessGroup>& groups,
    const MakeUniqueIdFn& make_id, const AllGatherFn& all_gather) {
  MXMACA_ASSIGN_OR_RETURN(std::string blob, EncodeRootIds(rank, world_size, groups, make_id));
  MXMACA_ASSIGN_OR_RETURN(std::vector<std::string> blobs, all_gather(blob));
  if (static_cast<int>(blobs.size()) != world_size) {
    return absl::InvalidArgumentError(absl::StrCat("the NCCL id all-gather returned ",
                                                   blobs.size(), " blobs for a world of ",
                                                   world_size));
  }
  return DecodeUniqueIds(rank, groups, blobs);
}

}  // namespace mxmaca::transport::nccl
