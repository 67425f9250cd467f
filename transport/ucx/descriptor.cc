// transport/ucx/descriptor.cc: descriptor wire form and verdicts.
#include "transport/ucx/descriptor.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mxmaca::transport::ucx {
namespace {

constexpr uint32_t kMagic = 0x4d584453;  // "MXDS"
constexpr int kMaxInvalidText = 160;

// Header: the fixed part of the wire form (same binary on every rank of a job).
struct Header {
  uint32_t magic;
  int32_t kind;
  int32_t index;
  int32_t op;
  int32_t dtype;
  int32_t rank;
  int32_t peer;
  int32_t root_index;
  int32_t group_size;
  int32_t invalid_size;
  int32_t num_counts;  // 0, or group_size for all-to-all-v
  int32_t pad;
  int64_t group_id;
  uint64_t sequence;
  int64_t count;
  int64_t bytes;
  uint64_t members_hash;
};

}  // namespace

uint64_t MembersHash(const std::vector<int>& ranks) {
  uint64_t h = 1469598103934665603ull;
  for (int r : ranks) {
    for (int b = 0; b < 4; ++b) {
      h ^= static_cast<uint64_t>((static_cast<uint32_t>(r) >> (8 * b)) & 0xff);
      h *= 1099511628211ull;
    }
  }
  return h;
}

std::string Descriptor::Encode() const {
  Header h = {};
  h.magic = kMagic;
  h.kind = static_cast<int32_t>(kind);
  h.index = index;
  h.op = static_cast<int32_t>(info.op);
  h.dtype = static_cast<int32_t>(info.dtype);
  h.rank = info.rank;
  h.peer = info.peer;
  h.root_index = root_index;
  h.group_size = group_size;
  const std::string text = invalid.substr(0, kMaxInvalidText);
  h.invalid_size = static_cast<int32_t>(text.size());
  h.num_counts = static_cast<int32_t>(send_counts.size());
  h.group_id = info.group_id;
  h.sequence = info.sequence;
  h.count = info.count;
  h.bytes = info.bytes;
  h.members_hash = members_hash;
  std::string out(reinterpret_cast<const char*>(&h), sizeof(h));
  out += text;
  for (const auto* v : {&send_counts, &recv_counts}) {
    out.append(reinterpret_cast<const char*>(v->data()), v->size() * sizeof(int64_t));
  }
  return out;
}

int64_t Descriptor::MaxEncodedSize(int group_size) {
  return static_cast<int64_t>(sizeof(Header)) + kMaxInvalidText + 16LL * group_size;
}

absl::StatusOr<Descriptor> Descriptor::Decode(const char* data, int64_t size) {
  Header h;
  if (size < static_cast<int64_t>(sizeof(h))) {
    return absl::InvalidArgumentError(absl::StrCat("descriptor of ", size, " bytes is truncated"));
  }
  std::memcpy(&h, data, sizeof(h));
  if (h.magic != kMagic || h.invalid_size < 0 || h.invalid_size > kMaxInvalidText ||
      h.num_counts < 0 ||
      size != static_cast<int64_t>(sizeof(h)) + h.invalid_size + 16LL * h.num_counts) {
    return absl::InvalidArgumentError(absl::StrCat("malformed descriptor of ", size, " bytes"));
  }
  Descriptor d;
  d.kind = static_cast<GroupKind>(h.kind);
  d.index = h.index;
  d.info.op = static_cast<CollectiveOp>(h.op);
  d.info.dtype = static_cast<DataType>(h.dtype);
  d.info.rank = h.rank;
  d.info.peer = h.peer;
  d.root_index = h.root_index;
  d.group_size = h.group_size;
  d.info.group_id = h.group_id;
  d.info.sequence = h.sequence;
  d.info.count = h.count;
  d.info.bytes = h.bytes;
  d.members_hash = h.members_hash;
  ProcessGroup g;
  g.kind = d.kind;
  g.index = d.index;
  d.info.group_name = g.name();
  const char* p = data + sizeof(h);
  d.invalid.assign(p, h.invalid_size);
  p += h.invalid_size;
  d.send_counts.resize(h.num_counts);
  d.recv_counts.resize(h.num_counts);
  if (h.num_counts > 0) {  // (memcpy from/to a null pointer is undefined even for 0 bytes)
    std::memcpy(d.send_counts.data(), p, 8 * h.num_counts);
    std::memcpy(d.recv_counts.data(), p + 8 * h.num_counts, 8 * h.num_counts);
  }
  return d;
}

std::string Report(const std::vector<Descriptor>& posts) {
  std::vector<std::string> lines;
  for (const Descriptor& d : posts) {
    lines.push_back(absl::StrCat("rank ", d.info.rank, " posted ", d.info.ToString(),
                                 d.invalid.empty() ? "" : " [invalid: ", d.invalid,
                                 d.invalid.empty() ? "" : "]"));
  }
  return absl::StrJoin(lines, "; ");
}

absl::Status VerifyCollective(const std::vector<Descriptor>& posts) {
  const Descriptor& first = posts.front();
  const CollectiveInfo& me = first.info;
  for (const Descriptor& d : posts) {
    if (!d.invalid.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "UcxCommunicator: invalid ", CollectiveOpName(d.info.op), " on ", d.info.group_name,
          " seq ", d.info.sequence, " (rank ", d.info.rank, ": ", d.invalid, "): ", Report(posts)));
    }
  }
  std::string mismatch;
  for (const Descriptor& d : posts) {
    if (d.group_size != first.group_size || d.members_hash != first.members_hash ||
        d.info.group_id != me.group_id) {
      mismatch = "group members differ";
    } else if (d.info.op != me.op) {
      mismatch = "different operations";
    } else if (d.info.dtype != me.dtype) {
      mismatch = "different data types";
    } else if (me.op != CollectiveOp::kAllToAllV && d.info.count != me.count) {
      mismatch = "different element counts";
    } else if (d.root_index != first.root_index) {
      mismatch = "different broadcast roots";
    }
    if (!mismatch.empty()) break;
  }
  if (mismatch.empty() && me.op == CollectiveOp::kAllToAllV) {
    std::vector<std::string> bad;
    const size_t n = posts.size();
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) {
        if (posts[i].send_counts.size() != n || posts[j].recv_counts.size() != n) continue;
        if (posts[i].send_counts[j] != posts[j].recv_counts[i]) {
          bad.push_back(absl::StrCat("rank ", posts[i].info.rank, " sends ",
                                     posts[i].send_counts[j], " to rank ", posts[j].info.rank,
                                     " which expects ", posts[j].recv_counts[i]));
        }
      }
    }
    if (!bad.empty()) mismatch = absl::StrCat("all_to_all_v counts: ", absl::StrJoin(bad, "; "));
  }
  if (mismatch.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("UcxCommunicator: mismatch on ", me.group_name,
                                                    " (group ", me.group_id, ") seq ", me.sequence,
                                                    " (", mismatch, "): ", Report(posts)));
}

absl::Status VerifyPointToPoint(const Descriptor& send, const Descriptor& recv) {
  const std::vector<Descriptor> both = {send, recv};
  for (const Descriptor& d : both) {
    if (!d.invalid.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "UcxCommunicator: invalid ", CollectiveOpName(d.info.op), " on ", d.info.group_name,
          " seq ", d.info.sequence, " (rank ", d.info.rank, ": ", d.invalid, "): ", Report(both)));
    }
  }
  std::string mismatch;
  if (send.info.op != CollectiveOp::kSend || recv.info.op != CollectiveOp::kRecv) {
    mismatch = "not a send/recv pair";
  } else if (send.info.dtype != recv.info.dtype) {
    mismatch = "different data types";
  } else if (send.info.count != recv.info.count) {
    mismatch = "different element counts";
  }
  if (mismatch.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "UcxCommunicator: mismatch on ", send.info.group_name, " (group ", send.info.group_id,
      ") seq ", send.info.sequence, " (", mismatch, "): ", Report(both)));
}

}  // namespace mxmaca::transport::ucx
