// actors/activation_pool.h: the memory pool that activation and gradient messages point
// into (docs/ARCHITECTURE.md "Messages reference pooled memory").
//
// A producer StageActor owns one pool. Before an op that sends (F to the next virtual
// stage, B to the previous), it takes a buffer from the pool and the op writes its output
// into it (std::vector::assign keeps the capacity, so a warmed-up pool allocates nothing
// and its buffers keep fixed addresses, as captured graphs need); the actor then
// publishes the filled buffer as an immutable shared payload for one channel. When the
// consumer drops its last reference (after the op that read it ran), the buffer goes back
// to the pool and `on_release(channel)` runs — the producer's actor turns that into a
// message and frees a slot of that channel's quota (back-pressure,
// scheduler/edge_slots.h). Within a process the consumer reads the producer's buffer
// directly (zero copy).
//
// Thread-safe: Take/Publish from the producer's actor, release from whichever thread drops
// the last reference (a consumer's strand or actor).
#ifndef MXMACA_ACTORS_ACTIVATION_POOL_H_
#define MXMACA_ACTORS_ACTIVATION_POOL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace mxmaca::actors {

class ActivationPool : public std::enable_shared_from_this<ActivationPool> {
 public:
  using OnRelease = std::function<void(int32_t channel)>;

  // Create: a pool whose released buffers call `on_release` (may be empty).
  static std::shared_ptr<ActivationPool> Create(OnRelease on_release);

  // Take: a free buffer (size unspecified; fill it with assign/resize), or a new empty one.
  std::vector<float> Take();

  // Publish: `buffer` as an immutable payload of `channel`; see the file comment.
  std::shared_ptr<const std::vector<float>> Publish(std::vector<float> buffer, int32_t channel);

  // Counters (for tests and the memory report): buffers handed out by Take that were new
  // (allocations) or recycled (reuses); payloads currently published and not released.
  int64_t allocations() const;
  int64_t reuses() const;
  int64_t live_payloads() const;

 private:
  explicit ActivationPool(OnRelease on_release) : on_release_(std::move(on_release)) {}
  void Release(std::vector<float>* buffer, int32_t channel);

  const OnRelease on_release_;
  mutable std::mutex mu_;
  std::vector<std::vector<float>> free_;
  int64_t allocations_ = 0;
  int64_t reuses_ = 0;
  int64_t live_ = 0;
};

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_ACTIVATION_POOL_H_
