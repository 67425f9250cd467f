// Tests ComputePool: a strand's tasks run in order and never overlap; strands run in
// parallel on a pool with several threads; destruction runs what was queued.
#include "actors/compute_pool.h"

#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <vector>

namespace mxmaca::actors {
namespace {

TEST_CASE("a strand runs its tasks in FIFO order, one at a time") {
  std::vector<int> order;
  std::atomic<int> running{0};
  std::atomic<int> max_running{0};
  {
    ComputePool pool(3);
    auto strand = pool.MakeStrand();
    for (int i = 0; i < 200; ++i) {
      strand->Post([&, i] {
        const int now = ++running;
        int prev = max_running.load();
        while (now > prev && !max_running.compare_exchange_weak(prev, now)) {}
        order.push_back(i);  // safe: the strand serialises its tasks
        --running;
      });
    }
  }  // joins after the queue drains
  REQUIRE(order.size() == 200);
  for (int i = 0; i < 200; ++i) CHECK(order[i] == i);
  CHECK(max_running.load() == 1);
}

TEST_CASE("different strands use different pool threads concurrently") {
  ComputePool pool(2);
  auto a = pool.MakeStrand();
  auto b = pool.MakeStrand();
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  std::atomic<int> done{0};
  auto task = [&] {
    if (++inside == 2) overlapped = true;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    while (std::chrono::steady_clock::now() < until && !overlapped) {}
    --inside;
    ++done;
  };
  a->Post(task);
  b->Post(task);
  while (done.load() < 2) std::this_thread::yield();
  CHECK(overlapped.load());
}

}  // namespace
}  // namespace mxmaca::actors
