// actors/checkpoint/shard_snapshot.h: a host-memory copy of one writer's shard views, so
// that a checkpoint can be written after the training thread has moved on (--async-save;
// docs/CHECKPOINTS.md "Asynchronous saves").
#ifndef MXMACA_ACTORS_CHECKPOINT_SHARD_SNAPSHOT_H_
#define MXMACA_ACTORS_CHECKPOINT_SHARD_SNAPSHOT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "actors/checkpoint/checkpoint_writer.h"

namespace mxmaca::actors::checkpoint {

// ShardSnapshot: what one WriteShard call would write, owned: the writer name and the
// views, each view's data copied (one memcpy per view) into one buffer held here. Views()
// point into that buffer, so they stay valid as long as the snapshot lives and do not
// depend on the caller's tensors. Move-only; not thread-safe (one owner at a time).
class ShardSnapshot {
 public:
  // Take: copies `tensors` (prod(shard_shape) fp32 values each, read from view.data; null
  // data is allowed for an empty shard) and their names and shapes. Runs on the calling
  // thread; the copy is the only work (no CRC, no I/O).
  // Errors: InvalidArgument for a negative or overflowing shape, or null data for a
  // non-empty shard (naming the writer and tensor).
  static absl::StatusOr<ShardSnapshot> Take(const std::string& writer_name,
                                            absl::Span<const TensorShardView> tensors);

  ShardSnapshot(ShardSnapshot&&) noexcept = default;
  ShardSnapshot& operator=(ShardSnapshot&&) noexcept = default;
  ShardSnapshot(const ShardSnapshot&) = delete;
  ShardSnapshot& operator=(const ShardSnapshot&) = delete;

  // writer_name: the name given to Take.
  const std::string& writer_name() const { return writer_name_; }
  // views: the copied views, in the order given to Take; data points into this snapshot.
  absl::Span<const TensorShardView> views() const { return views_; }
  // bytes: the tensor bytes held (sum of prod(shard_shape) x 4).
  int64_t bytes() const { return static_cast<int64_t>(num_floats_ * sizeof(float)); }

 private:
  ShardSnapshot() = default;
  std::string writer_name_;
  std::vector<TensorShardView> views_;
  std::unique_ptr<float[]> data_;
  size_t num_floats_ = 0;
};

}  // namespace mxmaca::actors::checkpoint

#endif  // MXMACA_ACTORS_CHECKPOINT_SHARD_SNAPSHOT_H_
