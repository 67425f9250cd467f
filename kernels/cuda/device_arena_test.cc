// Tests for kernels/cuda/device_arena.h. SlotPool's pointers and errors and the
// no-device error run everywhere; the device region itself needs a GPU.
#include "kernels/cuda/device_arena.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "kernels/cuda/test_util.h"

namespace mxmaca::kernels::cuda {
namespace {

TEST_CASE("SlotPool: slot addresses, quota and release errors (host base)", "[device_arena]") {
  SlotBook book;
  REQUIRE(SlotBook::Create("B grad s1", 1024, 3000, 3, &book).ok());
  std::vector<char> host(1024 + 3 * 3072);
  SlotPool pool(std::move(book), host.data());
  const int a = pool.Acquire(), b = pool.Acquire(), c = pool.Acquire();
  CHECK(pool.Acquire() == SlotBook::kNoFreeSlot);  // quota of 3: back-pressure
  CHECK(pool.SlotPtr(a) == host.data() + 1024);
  CHECK(pool.SlotPtr(b) == host.data() + 1024 + 3072);
  CHECK(pool.SlotPtr(c) == host.data() + 1024 + 2 * 3072);
  CHECK(pool.SlotPtr(3) == nullptr);
  REQUIRE_OK(pool.Release(b));
  CHECK(pool.Acquire() == b);  // the freed slot, same address
  REQUIRE_OK(pool.Release(c));
  const CudaStatus twice = pool.Release(c);
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.message().find("'B grad s1'") != std::string::npos);
  CHECK(twice.message().find("double release") != std::string::npos);
  CHECK(twice.message().find("device_arena.cc:") != std::string::npos);
}

TEST_CASE("DeviceArena: invalid capacity and no-device errors", "[device_arena]") {
  std::unique_ptr<DeviceArena> arena;
  const CudaStatus zero = DeviceArena::Create(0, &arena);
  CHECK_FALSE(zero.ok());
  CHECK(zero.message().find("capacity 0 bytes") != std::string::npos);
  if (ProbeDevice().ok()) return;
  const CudaStatus s = DeviceArena::Create(1 << 20, &arena);
  INFO(s.message());
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("cudaMalloc(1048576 bytes)") != std::string::npos);
  CHECK(arena == nullptr);
}

TEST_CASE("DeviceArena: aligned, disjoint device regions and slot pools", "[device_arena]") {
  if (!testing::GpuOrSkip()) return;
  const int64_t capacity = 1 << 20;
  std::unique_ptr<DeviceArena> arena;
  REQUIRE_OK(DeviceArena::Create(capacity, &arena));
  const char* base = static_cast<const char*>(arena->base());
  std::vector<std::pair<char*, int64_t>> regions;
  for (int64_t bytes : {1, 300, 4096, 5000, 77}) {
    void* p = nullptr;
    REQUIRE_OK(arena->Carve(bytes, "r", &p));
    CHECK(reinterpret_cast<uintptr_t>(p) % kArenaAlignment == 0);
    regions.push_back({static_cast<char*>(p), bytes});
  }
  float* floats = nullptr;
  REQUIRE_OK(arena->CarveArray(1000, "floats", &floats));
  regions.push_back({reinterpret_cast<char*>(floats), 4000});
  std::unique_ptr<SlotPool> pool;
  REQUIRE_OK(arena->MakeSlotPool("F act", 1000, 4, &pool));
  for (int i = 0; i < 4; ++i) regions.push_back({static_cast<char*>(pool->SlotPtr(i)), 1000});
  // Each region filled with its own byte; reading everything back shows no overlap.
  for (size_t i = 0; i < regions.size(); ++i) {
    CHECK(regions[i].first >= base);
    CHECK(regions[i].first + regions[i].second <= base + capacity);
    REQUIRE(cudaMemset(regions[i].first, static_cast<int>(i + 1), regions[i].second) ==
            cudaSuccess);
  }
  std::vector<char> host(static_cast<size_t>(capacity));
  REQUIRE(cudaMemcpy(host.data(), base, host.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
  for (size_t i = 0; i < regions.size(); ++i) {
    const int64_t off = regions[i].first - base;
    int64_t wrong = 0;
    for (int64_t j = 0; j < regions[i].second; ++j) wrong += host[off + j] != static_cast<char>(i + 1);
    CHECK(wrong == 0);
  }
  void* p = nullptr;
  const CudaStatus full = arena->Carve(capacity, "too much", &p);
  CHECK(full.message().find("cannot reserve 1048576 bytes for 'too much'") != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::kernels::cuda
