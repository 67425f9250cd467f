// layers/moe/dispatch/buffer_pool.h: BufferPool, recycled fp32 row buffers for the token
// dispatchers (docs/ARCHITECTURE.md "Messages reference pooled memory").
//
// Fresh multi-MiB vectors come from mmap and cost a page fault per 4 KiB on first touch
// (moe_dispatch_bench: 1.3-2.8x of the dispatch + combine time at 8 MiB per rank);
// recycled ones are warm. One pool may serve every dispatcher of a rank (all MoE layers):
// it holds at most `max_bytes` of capacity in at most `max_buffers` buffers.
#ifndef MXMACA_LAYERS_MOE_DISPATCH_BUFFER_POOL_H_
#define MXMACA_LAYERS_MOE_DISPATCH_BUFFER_POOL_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace mxmaca::layers::moe::dispatch {

// BufferPool: thread-safe.
class BufferPool {
 public:
  // kDefaultMaxBytes: 256 MiB of held capacity.
  static constexpr int64_t kDefaultMaxBytes = int64_t{256} << 20;

  explicit BufferPool(int64_t max_bytes = kDefaultMaxBytes, int max_buffers = 32)
      : max_bytes_(max_bytes), max_buffers_(max_buffers) {}

  // Take: a buffer of exactly n floats. From the pool (the smallest one whose capacity
  // holds n) its contents are unspecified; a new one is zero-filled.
  std::vector<float> Take(int64_t n);
  // Give: returns a buffer's memory to the pool. When the limits would be exceeded, held
  // buffers smaller than this one are freed first (smallest first); if it still does not
  // fit, it is freed instead. Buffers without capacity are ignored.
  void Give(std::vector<float> buffer);

  // size: buffers held now. held_bytes: their total capacity in bytes.
  int size() const;
  int64_t held_bytes() const;

 private:
  const int64_t max_bytes_;
  const int max_buffers_;
  mutable absl::Mutex mu_;
  std::vector<std::vector<float>> free_ ABSL_GUARDED_BY(mu_);
  int64_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace mxmaca::layers::moe::dispatch

#endif  // MXMACA_LAYERS_MOE_DISPATCH_BUFFER_POOL_H_
