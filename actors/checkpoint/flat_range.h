// actors/checkpoint/flat_range.h: a flat range of a tensor as boxes, for checkpointing
// state that is sharded by flat element ranges rather than by dimensions — Megatron's
// distributed optimizer gives each DP rank a contiguous range of the flattened parameter
// buffer (megatron/core/optimizer/distrib_optimizer.py), which cuts tensors mid-row.
//
// Example: full shape [4, 5], elements [3, 17) -> rows: [0, 3:5) + [1:3, 0:5) + [3, 0:2):
//   {offsets [0, 3], shape [1, 2], flat_begin 3},
//   {offsets [1, 0], shape [2, 5], flat_begin 5},
//   {offsets [3, 0], shape [1, 2], flat_begin 15}.
#ifndef MXMACA_ACTORS_CHECKPOINT_FLAT_RANGE_H_
#define MXMACA_ACTORS_CHECKPOINT_FLAT_RANGE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace mxmaca::actors::checkpoint {

// FlatRangeBox: one box of a flat range; its elements, in C order over `shape`, are the
// flat (C-order) elements [flat_begin, flat_begin + prod(shape)) of the full tensor.
struct FlatRangeBox {
  std::vector<int64_t> offsets;
  std::vector<int64_t> shape;
  int64_t flat_begin = 0;
};

// FlatRangeToBoxes: the elements [begin, end) of a C-order tensor of `full_shape` as at
// most 2·rank − 1 boxes (1 for a scalar), in flat order, each contiguous in the flat
// layout — so a box's data is `flat_shard + (box.flat_begin - begin)` in a buffer holding
// the range. Empty for begin == end. InvalidArgument unless 0 <= begin <= end <= numel.
absl::StatusOr<std::vector<FlatRangeBox>> FlatRangeToBoxes(
    absl::Span<const int64_t> full_shape, int64_t begin, int64_t end);

}  // namespace mxmaca::actors::checkpoint

#endif  // MXMACA_ACTORS_CHECKPOINT_FLAT_RANGE_H_
