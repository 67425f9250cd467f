// transport/rank_grid.h: the rank layout of Megatron-Core (docs/ARCHITECTURE.md "Rank layout").
//
// Ranks are ordered `tp-cp-ep-dp-pp` as Megatron-Core's RankGenerator orders them
// (megatron/core/parallel_state.py): TP varies fastest, PP slowest. Two grids cover the
// same ranks and share the PP axis ("MoE parallel folding"):
//   decoder grid  sizes [tp, cp, 1, dp, pp]        dp  = world / (tp * cp * pp)
//   expert grid   sizes [etp, 1, ep, edp, pp]      edp = world / (etp * ep * pp)
// so ETP x EP x EDP = TP x CP x DP. A group of kind K (process_group.h) is what Megatron's
// generate_masked_orthogonal_rank_groups returns for K's token: the ranks that share every
// coordinate outside the token and vary those in it, the first axis of the order fastest.
//
// No global state: a RankGrid is an immutable value passed to whoever needs it; ForRank()
// gives one rank's view with Megatron's accessor names (tensor_model_parallel_rank(), ...).
#ifndef MXMACA_TRANSPORT_RANK_GRID_H_
#define MXMACA_TRANSPORT_RANK_GRID_H_

#include <array>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/process_group.h"

namespace mxmaca::transport {

// GenerateMaskedOrthogonalRankGroups: C++ port of Megatron-Core's function of the same
// name. `parallel_size[i]` is the size of axis i (axis 0 fastest); `mask[i]` selects the
// axes that vary inside a group. Returns world / prod(masked sizes) groups, each listing
// its ranks with the first masked axis fastest. Requires world == prod(parallel_size) and
// equal lengths (a broken invariant aborts; RankGrid::Create validates user input).
std::vector<std::vector<int>> GenerateMaskedOrthogonalRankGroups(
    int world_size, const std::vector<int>& parallel_size, const std::vector<bool>& mask);

class RankView;

// RankGrid: the decoder and expert grids for one world.
class RankGrid {
 public:
  // Axis positions in the order `tp-cp-ep-dp-pp`.
  enum Axis { kTp = 0, kCp = 1, kEp = 2, kDp = 3, kPp = 4, kNumAxes = 5 };

  // Create: validates and builds the grids, as Megatron's initialize_model_parallel does.
  //   world_size  number of ranks (>= 1)
  //   tp, pp, cp  tensor / pipeline / context parallel sizes (>= 1)
  //   ep          expert model parallel size (>= 1)
  //   etp         expert tensor parallel size; 0 means "same as tp" (Megatron's default)
  // Errors (InvalidArgument, naming the values): a size < 1; world not divisible by
  // tp*cp*pp; world not divisible by etp*ep*pp.
  static absl::StatusOr<RankGrid> Create(int world_size, int tp, int pp, int cp = 1,
                                         int ep = 1, int etp = 0);

  int world_size() const { return world_size_; }
  int tensor_model_parallel_size() const { return decoder_[kTp]; }
  int pipeline_model_parallel_size() const { return decoder_[kPp]; }
  int context_parallel_size() const { return decoder_[kCp]; }
  int data_parallel_size() const { return decoder_[kDp]; }
  int expert_model_parallel_size() const { return expert_[kEp]; }
  int expert_tensor_parallel_size() const { return expert_[kTp]; }
  int expert_data_parallel_size() const { return expert_[kDp]; }

  // Groups: every group of `kind`, in Megatron's generation order (group i has index i);
  // for kEmbedding / kPositionEmbedding one group per pipeline group.
  std::vector<std::vector<int>> Groups(GroupKind kind) const;

  // Group: the group of `kind` containing `rank`, or nullopt when the rank belongs to none
  // (only possible for kEmbedding and kPositionEmbedding). Errors: rank outside
  // [0, world_size) is InvalidArgument.
  absl::StatusOr<std::optional<ProcessGroup>> Group(GroupKind kind, int rank) const;

  // ForRank: one rank's view. Errors: rank outside [0, world_size).
  absl::StatusOr<RankView> ForRank(int rank) const;

  // DecoderCoordinates / ExpertCoordinates: the rank's index on each axis of the grid,
  // indexed by Axis. Requires 0 <= rank < world_size.
  std::array<int, kNumAxes> DecoderCoordinates(int rank) const;
  std::array<int, kNumAxes> ExpertCoordinates(int rank) const;

 private:
  RankGrid() = default;
  // MemberGroup: the group of `rank` for a mask on `sizes` (ranks, index, rank_in_group).
  ProcessGroup MemberGroup(const std::array<int, kNumAxes>& sizes,
                           const std::array<bool, kNumAxes>& mask, int rank) const;

  int world_size_ = 1;
  std::array<int, kNumAxes> decoder_{1, 1, 1, 1, 1};
  std::array<int, kNumAxes> expert_{1, 1, 1, 1, 1};
};

// RankView: one rank's place in a RankGrid, with Megatron's parallel_state accessor names
// (without the get_ prefix). Each *_group() returns the ranks of the group and this rank's
// index in it; *_rank() is that index and *_world_size() the group's size.
class RankView {
 public:
  RankView(const RankGrid& grid, int rank);

  int rank() const { return rank_; }
  const RankGrid& grid() const { return grid_; }

  ProcessGroup tensor_model_parallel_group() const;
  int tensor_model_parallel_rank() const;
  int tensor_model_parallel_world_size() const;

  ProcessGroup pipeline_model_parallel_group() const;
  int pipeline_model_parallel_rank() const;
  int pipeline_model_parallel_world_size() const;
  bool is_pipeline_first_stage() const;
  bool is_pipeline_last_stage() const;
  // pipeline_model_parallel_next_rank / prev_rank: global rank of the next / previous
  // stage, wrapping around as Megatron's get_pipeline_model_parallel_next_rank does.
  int pipeline_model_parallel_next_rank() const;
  int pipeline_model_parallel_prev_rank() const;
  int pipeline_model_parallel_first_rank() const;
  int pipeline_model_parallel_last_rank() const;

  // data_parallel_group(with_context_parallel): Megatron's get_data_parallel_group; with CP
  // the group is 'dp-cp' (the one gradients are reduced over), without it 'dp'.
  ProcessGroup data_parallel_group(bool with_context_parallel = false) const;
  int data_parallel_rank(bool with_context_parallel = false) const;
  int data_parallel_world_size(bool with_context_parallel = false) const;
  // data_parallel_src_rank: the first global rank of the 'dp' group.
  int data_parallel_src_rank(bool with_context_parallel = false) const;

  ProcessGroup context_parallel_group() const;
  int context_parallel_rank() const;
  int context_parallel_world_size() const;

  ProcessGroup model_parallel_group() const;  // 'tp-pp'
  ProcessGroup tensor_and_data_parallel_group(bool with_context_parallel = false) const;
  ProcessGroup tensor_and_context_parallel_group() const;

  // embedding_group: first and last pipeline stage of this rank's pipeline (one rank when
  // pp = 1), nullopt when this rank is neither. position_embedding_group: first stage only.
  std::optional<ProcessGroup> embedding_group() const;
  bool is_rank_in_embedding_group() const { return embedding_group().has_value(); }
  std::optional<ProcessGroup> position_embedding_group() const;
  bool is_rank_in_position_embedding_group() const {
    return position_embedding_group().has_value();
  }

  ProcessGroup expert_model_parallel_group() const;
  int expert_model_parallel_rank() const;
  int expert_model_parallel_world_size() const;
  ProcessGroup expert_tensor_parallel_group() const;
  int expert_tensor_parallel_rank() const;
  int expert_tensor_parallel_world_size() const;
  ProcessGroup expert_tensor_and_model_parallel_group() const;  // expert 'tp-ep'
  ProcessGroup expert_tensor_model_pipeline_parallel_group() const;  // expert 'tp-ep-pp'
  ProcessGroup expert_data_parallel_group() const;
  int expert_data_parallel_rank() const;
  int expert_data_parallel_world_size() const;

  ProcessGroup world_group() const;

 private:
  ProcessGroup Get(GroupKind kind) const;

  RankGrid grid_;
  int rank_;
};

}  // namespace mxmaca::transport

#endif  // MXMACA_TRANSPORT_RANK_GRID_H_
