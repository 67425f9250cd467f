// actors/checkpoint/shard_snapshot.cc: the copy of a writer's shard views.
#include "actors/checkpoint/shard_snapshot.h"

#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace mxmaca::actors::checkpoint {
namespace {

// NumFloats: prod(shape), or an error naming the tensor for a negative or overflowing one.
absl::StatusOr<size_t> NumFloats(const std::string& writer, const TensorShardView& v) {
  size_t n = 1;
  for (int64_t d : v.shard_shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint snapshot of writer '", writer, "': tensor '", v.name,
          "' has a negative shard dimension ", d));
    }
    if (d > 0 && n > std::numeric_limits<size_t>::max() / sizeof(float) / static_cast<size_t>(d)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint snapshot of writer '", writer, "': tensor '", v.name,
          "' shard is too large to hold in memory"));
    }
    n *= static_cast<size_t>(d);
  }
  if (n > 0 && v.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint snapshot of writer '", writer, "': tensor '", v.name,
        "' is non-empty but has null data"));
  }
  return n;
}

}  // namespace

absl::StatusOr<ShardSnapshot> ShardSnapshot::Take(const std::string& writer_name,
                                                  absl::Span<const TensorShardView> tensors) {
  std::vector<size_t> sizes;
  sizes.reserve(tensors.size());
  size_t total = 0;
  for (const TensorShardView& v : tensors) {
    absl::StatusOr<size_t> n = NumFloats(writer_name, v);
    if (!n.ok()) return n.status();
    sizes.push_back(*n);
    total += *n;
  }
  ShardSnapshot s;
  s.writer_name_ = writer_name;
  s.num_floats_ = total;
  s.data_.reset(new float[total > 0 ? total : 1]);
  s.views_.reserve(tensors.size());
  size_t at = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    TensorShardView copy = tensors[i];
    copy.data = s.data_.get() + at;
    if (sizes[i] > 0) std::memcpy(s.data_.get() + at, tensors[i].data, sizes[i] * sizeof(float));
    at += sizes[i];
    s.views_.push_back(std::move(copy));
  }
  return s;
}

}  // namespace mxmaca::actors::checkpoint
