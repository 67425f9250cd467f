// layers/moe/dispatch/internal/buffer_pool.h: BufferPool, recycled fp32 row buffers for
// one dispatcher (DESIGN.md "Messages reference pooled memory").
//
// Fresh multi-MiB vectors come from mmap and cost a page fault per 4 KiB on first touch
// (measured in moe_dispatch_bench: about half the dispatch time at 8 MiB per rank);
// recycled ones are warm. The pool keeps at most `max_buffers` buffers.
#ifndef MXMACA_LAYERS_MOE_DISPATCH_INTERNAL_BUFFER_POOL_H_
#define MXMACA_LAYERS_MOE_DISPATCH_INTERNAL_BUFFER_POOL_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace mxmaca::layers::moe::dispatch::internal {

// BufferPool: thread-safe.
class BufferPool {
 public:
  explicit BufferPool(int max_buffers = 16) : max_buffers_(max_buffers) {}

  // Take: a buffer of exactly n floats. From the pool (the smallest one whose capacity
  // holds n) its contents are unspecified; a new one is zero-filled.
  std::vector<float> Take(int64_t n);
  // Give: returns a buffer's memory to the pool (dropped when the pool is full or the
  // buffer has no capacity).
  void Give(std::vector<float> buffer);
  // size: buffers held now.
  int size() const;

 private:
  const int max_buffers_;
  mutable absl::Mutex mu_;
  std::vector<std::vector<float>> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mxmaca::layers::moe::dispatch::internal

#endif  // MXMACA_LAYERS_MOE_DISPATCH_INTERNAL_BUFFER_POOL_H_
