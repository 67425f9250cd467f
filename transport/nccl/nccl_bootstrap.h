// transport/nccl/nccl_bootstrap.h: how the ranks of a job agree on one ncclUniqueId per
// process group before ncclCommInitRank, over the same TCP rendezvous the UCX backend
// uses (transport/ucx/rendezvous.h; torch.distributed does the same through its store).
//
// Scheme (eager, one round for all groups): every rank is given the list of the groups it
// belongs to. For each group whose FIRST member (group.ranks[0], i.e. group rank 0) it is,
// a rank calls make_id (ncclGetUniqueId) and puts (group id, member list, id) into its
// blob; one world-wide AllGather hands every rank every blob; each rank then takes the id
// of each of its groups from the blob of that group's first member, and checks that the
// first member lists the same members. One AllGather whatever the number of groups, and no
// rank needs to know the groups it is not in. No CUDA here: the id is opaque bytes, so the
// scheme is unit-tested without a GPU (nccl_bootstrap_test).
#ifndef MXMACA_TRANSPORT_NCCL_NCCL_BOOTSTRAP_H_
#define MXMACA_TRANSPORT_NCCL_NCCL_BOOTSTRAP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "transport/process_group.h"
#include "transport/ucx/rendezvous.h"

namespace mxmaca::transport::nccl {

// kUniqueIdBytes: sizeof(ncclUniqueId) (NCCL_UNIQUE_ID_BYTES in nccl.h, 128 since NCCL 2.0;
// nccl_communicator.cc static_asserts it).
inline constexpr int kUniqueIdBytes = 128;

// AllGatherFn: a world-wide all-gather of byte strings, indexed by global rank; every rank
// calls it once per exchange. Rendezvous::AllGather fits (RendezvousAllGather below).
using AllGatherFn = std::function<absl::StatusOr<std::vector<std::string>>(absl::string_view)>;

// MakeUniqueIdFn: a fresh unique id of kUniqueIdBytes bytes (ncclGetUniqueId in the
// backend; random bytes in tests).
using MakeUniqueIdFn = std::function<absl::StatusOr<std::string>()>;

// RendezvousAllGather: an AllGatherFn over `rendezvous` (borrowed: it must outlive the
// returned function's calls).
AllGatherFn RendezvousAllGather(ucx::Rendezvous* rendezvous);

// EncodeRootIds: rank `rank`'s blob — for each group of `groups` whose first member is
// `rank`, a fresh id from make_id. Errors: InvalidArgument when a group fails
// CheckMembership (nccl_plan.h) or two groups share an id; make_id's error; Internal when
// make_id returns a string of the wrong length.
absl::StatusOr<std::string> EncodeRootIds(int rank, int world_size,
                                          const std::vector<ProcessGroup>& groups,
                                          const MakeUniqueIdFn& make_id);

// DecodeUniqueIds: from the gathered blobs ([world_size], indexed by rank), the id of every
// group in `groups`, keyed by ProcessGroup::id. Errors: InvalidArgument (wrong number of
// blobs); FailedPrecondition when a group's first member sent no id for it ("rank 4, first
// member of data_parallel#1 (group 33), sent no NCCL id for it: was the group in its
// list?") or lists other members ("... lists members [4, 6], rank 6 has [4, 5]");
// DataLoss when a blob is malformed (names the rank).
absl::StatusOr<std::map<int64_t, std::string>> DecodeUniqueIds(
    int rank, const std::vector<ProcessGroup>& groups, const std::vector<std::string>& blobs);

// ExchangeUniqueIds: EncodeRootIds, one all_gather, DecodeUniqueIds. Every rank of the
// world must call it (with its own groups), even one whose list is empty.
absl::StatusOr<std::map<int64_t, std::string>> ExchangeUniqueIds(
    int rank, int world_size, const std::vector<ProcessGroup>& groups,
    const MakeUniqueIdFn& make_id, const AllGatherFn& all_gather);

}  // namespace mxmaca::transport::nccl

#endif  // MXMACA_TRANSPORT_NCCL_NCCL_BOOTSTRAP_H_
