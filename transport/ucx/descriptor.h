// transport/ucx/descriptor.h (internal to transport/ucx): what a rank posted, as bytes
// that cross the wire in an operation's step 0, and the verdict every member computes
// from all members' descriptors (the same verdict on every rank, since all see the same
// set) — how the UCX backend reports a mismatch on every rank as InProcessHub does.
#ifndef MXMACA_TRANSPORT_UCX_DESCRIPTOR_H_
#define MXMACA_TRANSPORT_UCX_DESCRIPTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/communicator.h"
#include "transport/process_group.h"

namespace mxmaca::transport::ucx {

// Descriptor: one rank's post of one operation.
struct Descriptor {
  CollectiveInfo info;  // group_name rebuilt from (kind, index) on decoding
  GroupKind kind = GroupKind::kWorld;
  int index = 0;        // ProcessGroup::index
  int root_index = -1;  // broadcast root's index in the group
  int group_size = 0;
  uint64_t members_hash = 0;
  std::string invalid;  // non-empty: what is wrong with the post's arguments
  // All-to-all-v only: [group_size] counts in elements.
  std::vector<int64_t> send_counts, recv_counts;

  // Encode: the wire form (a fixed header, the invalid text, then the counts).
  std::string Encode() const;
  // MaxEncodedSize: the largest encoding for a group of `group_size` (receive buffer size).
  static int64_t MaxEncodedSize(int group_size);
  // Decode: InvalidArgument on a malformed or truncated buffer.
  static absl::StatusOr<Descriptor> Decode(const char* data, int64_t size);
};

// MembersHash: FNV-1a of the group's global ranks (order-sensitive).
uint64_t MembersHash(const std::vector<int>& ranks);

// Report: "rank R posted <info> [invalid: ...]; ..." for each descriptor, in order.
std::string Report(const std::vector<Descriptor>& posts);

// VerifyCollective: the verdict on one collective from all members' descriptors (group
// order). OK, or InvalidArgument (some post invalid) / FailedPrecondition (mismatch:
// membership, op, dtype, count, root, all-to-all-v count matrix) with the report, worded
// as InProcessHub words them.
absl::Status VerifyCollective(const std::vector<Descriptor>& posts);

// VerifyPointToPoint: the verdict on one send/recv pair (sender's and receiver's).
absl::Status VerifyPointToPoint(const Descriptor& send, const Descriptor& recv);

}  // namespace mxmaca::transport::ucx

#endif  // MXMACA_TRANSPORT_UCX_DESCRIPTOR_H_
