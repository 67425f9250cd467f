// layers/micro_batch_stash_test.cc: MemoryTracker's cap (--memory-cap-per-shard) and bound
// (fixed-address) stash buffers.
#include "layers/micro_batch_stash.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace mxmaca::layers {
namespace {

TEST_CASE("MemoryTracker cap: the first allocation over it is recorded with its context") {
  std::mt19937 rng(std::random_device{}());
  const int64_t n = 1000 + static_cast<int64_t>(rng() % 1000);  // floats per buffer
  const int64_t cap = 2 * n * 4 + static_cast<int64_t>(rng() % (n * 4));  // 2 fit, 3 do not
  MemoryTracker tracker;
  tracker.SetCap(cap, "rank 5 (pipeline stage 1)");
  tracker.set_activity("the forward", 3, 7);
  StashBuffer<float> a, b, c;
  a.Allocate(&tracker, n);
  b.Allocate(&tracker, n);
  CHECK(tracker.cap_error().ok());
  c.Allocate(&tracker, n);  // over the cap: still allocated (callers have no error path)
  REQUIRE(c.data() != nullptr);
  const absl::Status& e = tracker.cap_error();
  CHECK(e.code() == absl::StatusCode::kResourceExhausted);
  const std::string want = "out of memory: shard rank 5 (pipeline stage 1): allocating " +
                           std::to_string(n * 4) + " bytes for the forward of layer 3 of "
                           "micro-batch 7 would use " + std::to_string(3 * n * 4) +
                           " of the " + std::to_string(cap) +
                           "-byte cap (--memory-cap-per-shard; " + std::to_string(2 * n * 4) +
                           " bytes already held)";
  CHECK(std::string(e.message()) == want);
  // Sticky: the first error stays, a later one does not replace it.
  c.Free();
  tracker.set_activity("the backward", 1, 8);
  StashBuffer<float> d;
  d.Allocate(&tracker, 4 * n);
  CHECK(std::string(tracker.cap_error().message()) == want);
  // Charge (MoE stash bytes) is checked too.
  MemoryTracker charged;
  charged.SetCap(100, "rank 0");
  charged.Charge(60);
  CHECK(charged.cap_error().ok());
  charged.Charge(60);
  CHECK(charged.cap_error().code() == absl::StatusCode::kResourceExhausted);
  charged.Discharge(120);
}

TEST_CASE("MemoryTracker without a cap (or cap 0) never records an error") {
  for (int64_t cap : {int64_t{-1}, int64_t{0}}) {
    MemoryTracker tracker;
    if (cap >= 0) tracker.SetCap(cap, "rank 0");
    StashBuffer<float> a;
    a.Allocate(&tracker, 1 << 20);
    CHECK(tracker.cap_error().ok());
    CHECK(tracker.peak() == (4 << 20));
  }
}

}  // namespace
}  // namespace mxmaca::layers

namespace mxmaca::layers {
namespace {

TEST_CASE("a bound StashBuffer keeps its address, counts nothing and frees nothing") {
  std::vector<float> slot(100, 7.0f);  // stands for a device slot's memory
  MemoryTracker tracker;
  StashBuffer<float> b;
  b.Bind(slot.data(), 64);
  CHECK(b.bound());
  CHECK(b.data() == slot.data());
  CHECK(b.empty());
  b.Allocate(&tracker, 64);  // at capacity
  CHECK(b.data() == slot.data());
  CHECK(b.size() == 64);
  CHECK(b.bytes() == 64 * 4);
  CHECK(tracker.live() == 0);  // not the tracker's memory
  b.Free();
  CHECK(b.empty());
  CHECK(b.data() == slot.data());  // still bound: the next Allocate reuses the address
  b.Allocate(nullptr, 10);
  CHECK(b.data() == slot.data());
  CHECK(b.size() == 10);
  CHECK(slot[0] == 7.0f);  // the buffer itself never writes the memory
  StashBuffer<float> moved(std::move(b));
  CHECK(moved.bound());
  CHECK(moved.data() == slot.data());
  CHECK(moved.size() == 10);
  CHECK_FALSE(b.bound());  // NOLINT(bugprone-use-after-move): a moved-from buffer is empty
  CHECK(b.data() == nullptr);

  // An unbound buffer still allocates through the tracker.
  StashBuffer<float> plain;
  plain.Allocate(&tracker, 16);
  CHECK(plain.data() != nullptr);
  CHECK(tracker.live() == 16 * 4);
  plain.Free();
  CHECK(tracker.live() == 0);
}

}  // namespace
}  // namespace mxmaca::layers
