// actors/checkpoint/flat_range.cc: recursive split of a flat range into boxes.
#include "actors/checkpoint/flat_range.h"

#include "absl/strings/str_cat.h"
#include "actors/checkpoint/checkpoint_format.h"

namespace mxmaca::actors::checkpoint {
namespace {

// Split: appends the boxes of elements [begin, end) of the sub-tensor `shape` (dims
// `dim`.. of the full shape) whose position in the full tensor is fixed by `prefix` (one
// offset per dim before `dim`, each with extent 1); `base` is the flat index of the
// sub-tensor's first element.
void Split(absl::Span<const int64_t> full, size_t dim, std::vector<int64_t>& prefix,
           int64_t base, int64_t begin, int64_t end, std::vector<FlatRangeBox>* out) {
  if (begin >= end) return;
  const size_t rank = full.size();
  if (dim == rank) {  // a single element (only reached for scalars)
    out->push_back({prefix, std::vector<int64_t>(rank, 1), base});
    return;
  }
  int64_t inner = 1;  // elements per index of `dim`
  for (size_t d = dim + 1; d < rank; ++d) inner *= full[d];
  auto box = [&](int64_t first, int64_t count) {  // indices [first, first+count) of dim
    FlatRangeBox b;
    b.offsets = prefix;
    b.offsets.push_back(first);
    b.shape.assign(prefix.size(), 1);
    b.shape.push_back(count);
    for (size_t d = dim + 1; d < rank; ++d) {
      b.offsets.push_back(0);
      b.shape.push_back(full[d]);
    }
    b.flat_begin = base + first * inner;
    out->push_back(std::move(b));
  };
  int64_t first = begin / inner;
  const int64_t last = end / inner;  // index of dim holding `end`, exclusive of full ones
  if (begin % inner != 0) {          // partial head inside index `first`
    const int64_t stop = first == last ? end % inner : inner;
    prefix.push_back(first);
    Split(full, dim + 1, prefix, base + first * inner, begin % inner, stop, out);
    prefix.pop_back();
    if (first == last) return;
    ++first;
  }
  if (last > first) box(first, last - first);  // whole indices
  if (end % inner != 0 && last >= first) {     // partial tail inside index `last`
    prefix.push_back(last);
    Split(full, dim + 1, prefix, base + last * inner, 0, end % inner, out);
    prefix.pop_back();
  }
}

}  // namespace

absl::StatusOr<std::vector<FlatRangeBox>> FlatRangeToBoxes(
    absl::Span<const int64_t> full_shape, int64_t begin, int64_t end) {
  auto numel = NumElements(full_shape, "FlatRangeToBoxes");
  if (!numel.ok()) return numel.status();
  if (begin < 0 || begin > end || end > *numel) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FlatRangeToBoxes: range [", begin, ", ", end, ") is not inside the ", *numel,
        " elements of shape ", ShapeToString(full_shape)));
  }
  std::vector<FlatRangeBox> boxes;
  std::vector<int64_t> prefix;
  if (full_shape.empty()) {
    if (end > begin) boxes.push_back({{}, {}, 0});
    return boxes;
  }
  Split(full_shape, 0, prefix, 0, begin, end, &boxes);
  return boxes;
}

}  // namespace mxmaca::actors::checkpoint
