// Tests for actors/activation_pool.h: buffers are recycled (same address, no new
// allocation), releases report their channel from whichever thread drops the payload,
// and the pool outlives its owner while payloads are out.
#include "actors/activation_pool.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <random>
#include <thread>

namespace mxmaca::actors {
namespace {

TEST_CASE("a released payload's buffer is reused with its address and capacity") {
  std::vector<int32_t> released;
  auto pool = ActivationPool::Create([&](int32_t c) { released.push_back(c); });
  std::mt19937 rng(std::random_device{}());
  const size_t n = 1000 + rng() % 1000;
  std::vector<float> a = pool->Take();
  a.assign(n, 1.5f);
  const float* address = a.data();
  auto payload = pool->Publish(std::move(a), 1);
  CHECK(payload->data() == address);  // published without a copy
  CHECK(pool->live_payloads() == 1);
  payload.reset();
  CHECK(released == std::vector<int32_t>{1});
  CHECK(pool->live_payloads() == 0);
  std::vector<float> b = pool->Take();
  b.assign(n, 2.5f);  // fits the recycled capacity: no reallocation
  CHECK(b.data() == address);
  CHECK(pool->allocations() == 1);
  CHECK(pool->reuses() == 1);
}

TEST_CASE("releases from other threads, after the owner dropped the pool") {
  std::atomic<int> count{0};
  auto pool = ActivationPool::Create([&](int32_t c) { count += c; });
  std::vector<std::shared_ptr<const std::vector<float>>> out;
  for (int i = 0; i < 8; ++i) {
    std::vector<float> v = pool->Take();
    v.assign(64, static_cast<float>(i));
    out.push_back(pool->Publish(std::move(v), 2));
  }
  pool.reset();  // payloads keep it alive
  std::thread t([&] { out.clear(); });
  t.join();
  CHECK(count == 16);
}

}  // namespace
}  // namespace mxmaca::actors
