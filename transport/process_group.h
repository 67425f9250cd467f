// transport/process_group.h: ProcessGroup, one rank's view of a communication group.
//
// A ProcessGroup is a plain value: the ordered global ranks of the group, the index of the
// owning rank in it, and an id that is unique among all groups of one RankGrid. RankGrid
// (rank_grid.h) creates them; Communicator (communicator.h) takes them. Member order is
// ascending global rank, as in torch.distributed.new_group, so index i of `ranks` is the
// group rank Megatron's get_*_rank() returns.
#ifndef MXMACA_TRANSPORT_PROCESS_GROUP_H_
#define MXMACA_TRANSPORT_PROCESS_GROUP_H_

#include <cstdint>
#include <string>
#include <vector>

namespace mxmaca::transport {

// GroupKind: which of Megatron-Core's process groups (megatron/core/parallel_state.py) a
// ProcessGroup is. The comment gives the RankGenerator token that builds it; "decoder" is
// the (tp, cp, dp, pp) grid, "expert" the (etp, ep, edp, pp) grid.
enum class GroupKind : int {
  kTensorModelParallel = 0,         // decoder 'tp'
  kPipelineModelParallel = 1,       // decoder 'pp'
  kDataParallel = 2,                // decoder 'dp' (without context parallel)
  kDataParallelWithCp = 3,          // decoder 'dp-cp' (gradient reduction group)
  kContextParallel = 4,             // decoder 'cp'
  kModelParallel = 5,               // decoder 'tp-pp'
  kTensorAndDataParallel = 6,       // decoder 'tp-dp'
  kTensorAndDataParallelWithCp = 7, // decoder 'tp-dp-cp'
  kTensorAndContextParallel = 8,    // decoder 'tp-cp'
  kEmbedding = 9,                   // first and last rank of each 'pp' group
  kPositionEmbedding = 10,          // first rank of each 'pp' group
  kExpertModelParallel = 11,        // expert 'ep'
  kExpertTensorParallel = 12,       // expert 'tp' (size ETP)
  kExpertTensorAndModelParallel = 13,       // expert 'tp-ep'
  kExpertTensorModelPipelineParallel = 14,  // expert 'tp-ep-pp'
  kExpertDataParallel = 15,         // expert 'dp' (size EDP)
  kWorld = 16,                      // all ranks
};

// kNumGroupKinds: number of GroupKind values (for iteration in tests and id arithmetic).
inline constexpr int kNumGroupKinds = 17;

// GroupKindName: Megatron's name of the group, e.g. "tensor_model_parallel",
// "data_parallel_with_cp", "expert_data_parallel".
const char* GroupKindName(GroupKind kind);

// ProcessGroup: the members of one group and the position of the owning rank in it.
struct ProcessGroup {
  // id: unique among all groups of one RankGrid: kind * world_size + index, where index
  // numbers the groups of that kind in Megatron's generation order.
  int64_t id = 0;
  GroupKind kind = GroupKind::kWorld;
  // index: which group of its kind this is (0-based, Megatron's generation order).
  int index = 0;
  // ranks: the global ranks of the members, ascending.
  std::vector<int> ranks;
  // rank_in_group: the owning rank's index into `ranks`.
  int rank_in_group = 0;

  int size() const { return static_cast<int>(ranks.size()); }
  int global_rank() const { return ranks[rank_in_group]; }
  // name: "<kind name>#<index>", e.g. "data_parallel#3", for error reports.
  std::string name() const;
};

}  // namespace mxmaca::transport

#endif  // MXMACA_TRANSPORT_PROCESS_GROUP_H_
