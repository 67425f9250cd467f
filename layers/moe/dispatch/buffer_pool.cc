// layers/moe/dispatch/buffer_pool.cc: best-fit reuse of fp32 vectors under a byte cap.
#include "layers/moe/dispatch/buffer_pool.h"

#include <algorithm>
#include <utility>

namespace mxmaca::layers::moe::dispatch {

namespace {

int64_t Bytes(const std::vector<float>& v) {
  return static_cast<int64_t>(v.capacity() * sizeof(float));
}

}  // namespace

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
      held_bytes_ -= Bytes(out);
    }
  }
  out.resize(n);  // shrinking is free; growing within capacity writes warm memory
  return out;
}

void BufferPool::Give(std::vector<float> buffer) {
  const int64_t bytes = Bytes(buffer);
  if (bytes == 0 || bytes > max_bytes_ || max_buffers_ < 1) return;
  std::vector<std::vector<float>> evicted;  // freed after the lock is released
  {
    absl::MutexLock lock(&mu_);
    // Free smaller held buffers, smallest first, while the limits would be exceeded.
    std::sort(free_.begin(), free_.end(),
              [](const std::vector<float>& a, const std::vector<float>& b) {
                return a.capacity() > b.capacity();
              });
    while (
        !free_.empty() &&
        (held_bytes_ + bytes > max_bytes_ || static_cast<int>(free_.size()) + 1 > max_buffers_) &&
        free_.back().capacity() < buffer.capacity()) {
      held_bytes_ -= Bytes(free_.back());
      evicted.push_back(std::move(free_.back()));
      free_.pop_back();
    }
    if (held_bytes_ + bytes > max_bytes_ || static_cast<int>(free_.size()) + 1 > max_buffers_) {
      evicted.push_back(std::move(buffer));
    } else {
      held_bytes_ += bytes;
      free_.push_back(std::move(buffer));
    }
  }
}

int BufferPool::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(free_.size());
}

int64_t BufferPool::held_bytes() const {
  absl::MutexLock lock(&mu_);
  return held_bytes_;
}

}  // namespace mxmaca::layers::moe::dispatch
