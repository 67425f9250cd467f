// layers/moe/dispatch/internal/buffer_pool.cc: best-fit reuse of fp32 vectors.
#include "layers/moe/dispatch/internal/buffer_pool.h"

#include <utility>

namespace mxmaca::layers::moe::dispatch::internal {

std::vector<float> BufferPool::Take(int64_t n) {
  std::vector<float> out;
  {
    absl::MutexLock lock(&mu_);
    int best = -1;
    for (int i = 0; i < static_cast<int>(free_.size()); ++i) {
      const size_t cap = free_[i].capacity();
      if (cap >= static_cast<size_t>(n) && (best < 0 || cap < free_[best].capacity())) best = i;
    }
    if (best >= 0) {
      out = std::move(free_[best]);
      free_.erase(free_.begin() + best);
    }
  }
  out.resize(n);  // shrinking is free; growing within capacity writes warm memory
  return out;
}

void BufferPool::Give(std::vector<float> buffer) {
  if (buffer.capacity() == 0) return;
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(free_.size()) >= max_buffers_) {
    // Keep the larger buffers: replace the smallest if this one is bigger.
    int smallest = 0;
    for (int i = 1; i < static_cast<int>(free_.size()); ++i) {
      if (free_[i].capacity() < free_[smallest].capacity()) smallest = i;
    }
    if (free_[smallest].capacity() >= buffer.capacity()) return;
    free_[smallest] = std::move(buffer);
    return;
  }
  free_.push_back(std::move(buffer));
}

int BufferPool::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(free_.size());
}

}  // namespace mxmaca::layers::moe::dispatch::internal
