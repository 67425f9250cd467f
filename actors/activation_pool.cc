// actors/activation_pool.cc: see activation_pool.h.
#include "actors/activation_pool.h"

#include <utility>

namespace mxmaca::actors {

std::shared_ptr<ActivationPool> ActivationPool::Create(OnRelease on_release) {
  return std::shared_ptr<ActivationPool>(new ActivationPool(std::move(on_release)));
}

std::vector<float> ActivationPool::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.empty()) {
    ++allocations_;
    return {};
  }
  ++reuses_;
  std::vector<float> buffer = std::move(free_.back());
  free_.pop_back();
  return buffer;
}

std::shared_ptr<const std::vector<float>> ActivationPool::Publish(std::vector<float> buffer,
                                                                  int32_t channel) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++live_;
  }
  auto* owned = new std::vector<float>(std::move(buffer));
  // The deleter keeps the pool alive until every payload has come back.
  std::shared_ptr<ActivationPool> self = shared_from_this();
  return std::shared_ptr<const std::vector<float>>(
      owned, [self, channel](const std::vector<float>* p) {
        self->Release(const_cast<std::vector<float>*>(p), channel);
      });
}

void ActivationPool::Release(std::vector<float>* buffer, int32_t channel) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(*buffer));
    --live_;
  }
  delete buffer;
  if (on_release_) on_release_(channel);
}

int64_t ActivationPool::allocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocations_;
}

int64_t ActivationPool::reuses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reuses_;
}

int64_t ActivationPool::live_payloads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_;
}

}  // namespace mxmaca::actors
