// transport/rank_grid.cc: Megatron-Core's RankGenerator order `tp-cp-ep-dp-pp` as values.
#include "transport/rank_grid.h"

#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mxmaca::transport {
namespace {

// Which grid a kind lives on and which axes vary inside its groups.
struct KindSpec {
  bool expert;
  std::array<bool, RankGrid::kNumAxes> mask;  // tp, cp, ep, dp, pp
};

constexpr bool T = true;
constexpr bool F = false;

// KindSpecFor: the RankGenerator token of each kind as an axis mask. Embedding kinds use
// the 'pp' mask and are then narrowed to first / last stage by the caller.
KindSpec KindSpecFor(GroupKind kind) {
  switch (kind) {
    case GroupKind::kTensorModelParallel: return {F, {T, F, F, F, F}};
    case GroupKind::kPipelineModelParallel: return {F, {F, F, F, F, T}};
    case GroupKind::kDataParallel: return {F, {F, F, F, T, F}};
    case GroupKind::kDataParallelWithCp: return {F, {F, T, F, T, F}};
    case GroupKind::kContextParallel: return {F, {F, T, F, F, F}};
    case GroupKind::kModelParallel: return {F, {T, F, F, F, T}};
    case GroupKind::kTensorAndDataParallel: return {F, {T, F, F, T, F}};
    case GroupKind::kTensorAndDataParallelWithCp: return {F, {T, T, F, T, F}};
    case GroupKind::kTensorAndContextParallel: return {F, {T, T, F, F, F}};
    case GroupKind::kEmbedding: return {F, {F, F, F, F, T}};
    case GroupKind::kPositionEmbedding: return {F, {F, F, F, F, T}};
    case GroupKind::kExpertModelParallel: return {T, {F, F, T, F, F}};
    case GroupKind::kExpertTensorParallel: return {T, {T, F, F, F, F}};
    case GroupKind::kExpertTensorAndModelParallel: return {T, {T, F, T, F, F}};
    case GroupKind::kExpertTensorModelPipelineParallel: return {T, {T, F, T, F, T}};
    case GroupKind::kExpertDataParallel: return {T, {F, F, F, T, F}};
    case GroupKind::kWorld: return {F, {T, T, T, T, T}};
  }
  std::abort();  // unreachable: every enumerator is handled above
}

bool IsEmbeddingKind(GroupKind kind) {
  return kind == GroupKind::kEmbedding || kind == GroupKind::kPositionEmbedding;
}

// EmbeddingRanks: Megatron's default_embedding_ranks / default_position_embedding_ranks.
std::vector<int> EmbeddingRanks(GroupKind kind, const std::vector<int>& pp_ranks) {
  if (kind == GroupKind::kPositionEmbedding || pp_ranks.size() == 1) return {pp_ranks.front()};
  return {pp_ranks.front(), pp_ranks.back()};
}

}  // namespace

std::vector<std::vector<int>> GenerateMaskedOrthogonalRankGroups(
    int world_size, const std::vector<int>& parallel_size, const std::vector<bool>& mask) {
  if (parallel_size.size() != mask.size()) std::abort();  // invariant, see header
  // Stride of each axis in the global rank (prefix products, axis 0 fastest).
  std::vector<int> masked_size, masked_stride, unmasked_size, unmasked_stride;
  int stride = 1;
  for (size_t i = 0; i < parallel_size.size(); ++i) {
    (mask[i] ? masked_size : unmasked_size).push_back(parallel_size[i]);
    (mask[i] ? masked_stride : unmasked_stride).push_back(stride);
    stride *= parallel_size[i];
  }
  if (stride != world_size) std::abort();  // invariant, see header
  int group_size = 1;
  for (int s : masked_size) group_size *= s;
  const int num_groups = world_size / group_size;

  // Offset of a mixed-radix index `index` (digits over `sizes`, first fastest) when each
  // digit is weighted by `strides`.
  auto offset = [](int index, const std::vector<int>& sizes, const std::vector<int>& strides) {
    int result = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      result += (index % sizes[k]) * strides[k];
      index /= sizes[k];
    }
    return result;
  };
  std::vector<std::vector<int>> groups(num_groups);
  for (int g = 0; g < num_groups; ++g) {
    const int base = offset(g, unmasked_size, unmasked_stride);
    groups[g].reserve(group_size);
    for (int r = 0; r < group_size; ++r) {
      groups[g].push_back(base + offset(r, masked_size, masked_stride));
    }
  }
  return groups;
}

absl::StatusOr<RankGrid> RankGrid::Create(int world_size, int tp, int pp, int cp, int ep,
                                          int etp) {
  if (etp == 0) etp = tp;
  const std::pair<const char*, int> sizes[] = {{"world_size", world_size},
                                               {"tensor_model_parallel_size", tp},
                                               {"pipeline_model_parallel_size", pp},
                                               {"context_parallel_size", cp},
                                               {"expert_model_parallel_size", ep},
                                               {"expert_tensor_parallel_size", etp}};
  for (const auto& [name, value] : sizes) {
    if (value < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("RankGrid: ", name, " is ", value, ", expected >= 1"));
    }
  }
  const int64_t model_size = static_cast<int64_t>(tp) * cp * pp;
  if (world_size % model_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RankGrid: world_size ", world_size, " is not divisible by tensor (", tp,
        ") x context (", cp, ") x pipeline (", pp, ") parallel size = ", model_size));
  }
  const int64_t expert_model_size = static_cast<int64_t>(etp) * ep * pp;
  if (world_size % expert_model_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RankGrid: world_size ", world_size, " is not divisible by expert tensor (", etp,
        ") x expert model (", ep, ") x pipeline (", pp, ") parallel size = ",
        expert_model_size));
  }
  RankGrid grid;
  grid.world_size_ = world_size;
  grid.decoder_ = {tp, cp, 1, static_cast<int>(world_size / model_size), pp};
  grid.expert_ = {etp, 1, ep, static_cast<int>(world_size / expert_model_size), pp};
  return grid;
}

std::vector<std::vector<int>> RankGrid::Groups(GroupKind kind) const {
  const KindSpec spec = KindSpecFor(kind);
  const auto& sizes = spec.expert ? expert_ : decoder_;
  auto groups = GenerateMaskedOrthogonalRankGroups(
      world_size_, std::vector<int>(sizes.begin(), sizes.end()),
      std::vector<bool>(spec.mask.begin(), spec.mask.end()));
  if (IsEmbeddingKind(kind)) {
    for (auto& g : groups) g = EmbeddingRanks(kind, g);
  }
  return groups;
}

ProcessGroup RankGrid::MemberGroup(const std::array<int, kNumAxes>& sizes,
                                   const std::array<bool, kNumAxes>& mask, int rank) const {
  std::array<int, kNumAxes> stride;
  std::array<int, kNumAxes> coord;
  int s = 1;
  for (int i = 0; i < kNumAxes; ++i) {
    stride[i] = s;
    coord[i] = (rank / s) % sizes[i];
    s *= sizes[i];
  }
  ProcessGroup group;
  // Group index: the unmasked coordinates as a mixed-radix number (first axis fastest);
  // rank in group: the same for the masked coordinates; base: the rank with all masked
  // coordinates zero.
  int index = 0, index_radix = 1, in_group = 0, in_group_radix = 1, base = rank;
  for (int i = 0; i < kNumAxes; ++i) {
    if (mask[i]) {
      in_group += coord[i] * in_group_radix;
      in_group_radix *= sizes[i];
      base -= coord[i] * stride[i];
    } else {
      index += coord[i] * index_radix;
      index_radix *= sizes[i];
    }
  }
  group.index = index;
  group.rank_in_group = in_group;
  group.ranks.reserve(in_group_radix);
  for (int r = 0; r < in_group_radix; ++r) {
    int offset = 0, rest = r;
    for (int i = 0; i < kNumAxes; ++i) {
      if (!mask[i]) continue;
      offset += (rest % sizes[i]) * stride[i];
      rest /= sizes[i];
    }
    group.ranks.push_back(base + offset);
  }
  return group;
}

absl::StatusOr<std::optional<ProcessGroup>> RankGrid::Group(GroupKind kind, int rank) const {
  if (rank < 0 || rank >= world_size_) {
    return absl::InvalidArgumentError(absl::StrCat("RankGrid::Group(", GroupKindName(kind),
                                                   "): rank ", rank, " is outside [0, ",
                                                   world_size_, ")"));
  }
  const KindSpec spec = KindSpecFor(kind);
  ProcessGroup group = MemberGroup(spec.expert ? expert_ : decoder_, spec.mask, rank);
  group.kind = kind;
  group.id = static_cast<int64_t>(kind) * world_size_ + group.index;
  if (IsEmbeddingKind(kind)) {
    group.ranks = EmbeddingRanks(kind, group.ranks);
    int position = -1;
    for (int i = 0; i < group.size(); ++i) {
      if (group.ranks[i] == rank) position = i;
    }
    if (position < 0) return std::optional<ProcessGroup>();
    group.rank_in_group = position;
  }
  return std::optional<ProcessGroup>(std::move(group));
}

absl::StatusOr<RankView> RankGrid::ForRank(int rank) const {
  if (rank < 0 || rank >= world_size_) {
    return absl::InvalidArgumentError(absl::StrCat("RankGrid::ForRank: rank ", rank,
                                                   " is outside [0, ", world_size_, ")"));
  }
  return RankView(*this, rank);
}

std::array<int, RankGrid::kNumAxes> RankGrid::DecoderCoordinates(int rank) const {
  std::array<int, kNumAxes> coord;
  for (int i = 0; i < kNumAxes; ++i) {
    coord[i] = rank % decoder_[i];
    rank /= decoder_[i];
  }
  return coord;
}

std::array<int, RankGrid::kNumAxes> RankGrid::ExpertCoordinates(int rank) const {
  std::array<int, kNumAxes> coord;
  for (int i = 0; i < kNumAxes; ++i) {
    coord[i] = rank % expert_[i];
    rank /= expert_[i];
  }
  return coord;
}

// ---------------------------------------------------------------------------------------
// RankView

RankView::RankView(const RankGrid& grid, int rank) : grid_(grid), rank_(rank) {
  if (rank < 0 || rank >= grid.world_size()) std::abort();  // use RankGrid::ForRank
}

ProcessGroup RankView::Get(GroupKind kind) const {
  // Non-embedding kinds always contain the rank, and rank_ was validated on construction.
  return **grid_.Group(kind, rank_);
}

ProcessGroup RankView::tensor_model_parallel_group() const {
  return Get(GroupKind::kTensorModelParallel);
}
int RankView::tensor_model_parallel_rank() const {
  return grid_.DecoderCoordinates(rank_)[RankGrid::kTp];
}
int RankView::tensor_model_parallel_world_size() const {
  return grid_.tensor_model_parallel_size();
}

ProcessGroup RankView::pipeline_model_parallel_group() const {
  return Get(GroupKind::kPipelineModelParallel);
}
int RankView::pipeline_model_parallel_rank() const {
  return grid_.DecoderCoordinates(rank_)[RankGrid::kPp];
}
int RankView::pipeline_model_parallel_world_size() const {
  return grid_.pipeline_model_parallel_size();
}
bool RankView::is_pipeline_first_stage() const { return pipeline_model_parallel_rank() == 0; }
bool RankView::is_pipeline_last_stage() const {
  return pipeline_model_parallel_rank() == pipeline_model_parallel_world_size() - 1;
}
int RankView::pipeline_model_parallel_next_rank() const {
  const ProcessGroup g = pipeline_model_parallel_group();
  return g.ranks[(g.rank_in_group + 1) % g.size()];
}
int RankView::pipeline_model_parallel_prev_rank() const {
  const ProcessGroup g = pipeline_model_parallel_group();
  return g.ranks[(g.rank_in_group + g.size() - 1) % g.size()];
}
int RankView::pipeline_model_parallel_first_rank() const {
  return pipeline_model_parallel_group().ranks.front();
}
int RankView::pipeline_model_parallel_last_rank() const {
  return pipeline_model_parallel_group().ranks.back();
}

ProcessGroup RankView::data_parallel_group(bool with_context_parallel) const {
  return Get(with_context_parallel ? GroupKind::kDataParallelWithCp : GroupKind::kDataParallel);
}
int RankView::data_parallel_rank(bool with_context_parallel) const {
  return data_parallel_group(with_context_parallel).rank_in_group;
}
int RankView::data_parallel_world_size(bool with_context_parallel) const {
  return grid_.data_parallel_size() * (with_context_parallel ? grid_.context_parallel_size() : 1);
}
int RankView::data_parallel_src_rank(bool with_context_parallel) const {
  return data_parallel_group(with_context_parallel).ranks.front();
}

ProcessGroup RankView::context_parallel_group() const {
  return Get(GroupKind::kContextParallel);
}
int RankView::context_parallel_rank() const {
  return grid_.DecoderCoordinates(rank_)[RankGrid::kCp];
}
int RankView::context_parallel_world_size() const { return grid_.context_parallel_size(); }

ProcessGroup RankView::model_parallel_group() const { return Get(GroupKind::kModelParallel); }
ProcessGroup RankView::tensor_and_data_parallel_group(bool with_context_parallel) const {
  return Get(with_context_parallel ? GroupKind::kTensorAndDataParallelWithCp
                                   : GroupKind::kTensorAndDataParallel);
}
ProcessGroup RankView::tensor_and_context_parallel_group() const {
  return Get(GroupKind::kTensorAndContextParallel);
}

std::optional<ProcessGroup> RankView::embedding_group() const {
  return *grid_.Group(GroupKind::kEmbedding, rank_);
}
std::optional<ProcessGroup> RankView::position_embedding_group() const {
  return *grid_.Group(GroupKind::kPositionEmbedding, rank_);
}

ProcessGroup RankView::expert_model_parallel_group() const {
  return Get(GroupKind::kExpertModelParallel);
}
int RankView::expert_model_parallel_rank() const {
  return grid_.ExpertCoordinates(rank_)[RankGrid::kEp];
}
int RankView::expert_model_parallel_world_size() const {
  return grid_.expert_model_parallel_size();
}
ProcessGroup RankView::expert_tensor_parallel_group() const {
  return Get(GroupKind::kExpertTensorParallel);
}
int RankView::expert_tensor_parallel_rank() const {
  return grid_.ExpertCoordinates(rank_)[RankGrid::kTp];
}
int RankView::expert_tensor_parallel_world_size() const {
  return grid_.expert_tensor_parallel_size();
}
ProcessGroup RankView::expert_tensor_and_model_parallel_group() const {
  return Get(GroupKind::kExpertTensorAndModelParallel);
}
ProcessGroup RankView::expert_tensor_model_pipeline_parallel_group() const {
  return Get(GroupKind::kExpertTensorModelPipelineParallel);
}
ProcessGroup RankView::expert_data_parallel_group() const {
  return Get(GroupKind::kExpertDataParallel);
}
int RankView::expert_data_parallel_rank() const {
  return grid_.ExpertCoordinates(rank_)[RankGrid::kDp];
}
int RankView::expert_data_parallel_world_size() const {
  return grid_.expert_data_parallel_size();
}

ProcessGroup RankView::world_group() const { return Get(GroupKind::kWorld); }

}  // namespace mxmaca::transport
