// Tests for kernels/cuda/arena_plan.h (host only, no GPU needed): alignment, no overlap,
// capacity errors, and the slot quota against a straightforward model.
#include "kernels/cuda/arena_plan.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>

#include <catch2/catch.hpp>

namespace mxmaca::kernels::cuda {
namespace {

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST_CASE("ArenaPlan: aligned, disjoint reservations inside the capacity", "[arena_plan]") {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int64_t> size(1, 5000);
  const int64_t capacity = 1 << 20;
  ArenaPlan plan(capacity);
  int64_t requested = 0;
  for (int i = 0;; ++i) {
    const int64_t bytes = size(rng);
    int64_t offset = -1;
    const PlanStatus s = plan.Reserve(bytes, "r" + std::to_string(i), &offset);
    if (!s.ok()) {
      // Fails only when the request does not fit; the message names it.
      CHECK(bytes > plan.free_bytes());
      CHECK(Contains(s.message(), std::to_string(bytes) + " bytes for 'r" + std::to_string(i)));
      CHECK(Contains(s.message(), std::to_string(plan.used_bytes()) + " of " +
                                      std::to_string(capacity) + " bytes used"));
      break;
    }
    requested += bytes;
    CHECK(offset % kArenaAlignment == 0);
    CHECK(offset + bytes <= capacity);
  }
  const auto& regions = plan.regions();
  REQUIRE(regions.size() > 100);
  for (size_t i = 1; i < regions.size(); ++i) {
    CHECK(regions[i - 1].offset + regions[i - 1].bytes <= regions[i].offset);
    // Padding is below one alignment unit.
    CHECK(regions[i].offset - (regions[i - 1].offset + regions[i - 1].bytes) < kArenaAlignment);
  }
  CHECK(plan.used_bytes() >= requested);
  plan.Reset();
  int64_t offset = -1;
  REQUIRE(plan.Reserve(capacity, "all", &offset).ok());
  CHECK(offset == 0);
  CHECK(plan.free_bytes() == 0);
}

TEST_CASE("ArenaPlan: invalid sizes are errors", "[arena_plan]") {
  ArenaPlan plan(4096);
  int64_t offset = 0;
  CHECK(Contains(plan.Reserve(0, "zero", &offset).message(), "0 bytes for 'zero'"));
  CHECK(Contains(plan.Reserve(-5, "neg", &offset).message(), "-5 bytes"));
  CHECK_FALSE(plan.Reserve(INT64_MAX, "huge", &offset).ok());
  ArenaPlan empty(-1);
  CHECK(empty.capacity_bytes() == 0);
  CHECK_FALSE(empty.Reserve(1, "x", &offset).ok());
}

TEST_CASE("SlotBook: quota, lowest-first reuse, double release", "[arena_plan]") {
  SlotBook book;
  REQUIRE(SlotBook::Create("F act", 512, 1000, 4, &book).ok());
  CHECK(book.stride_bytes() == 1024);
  CHECK(SlotBook::TotalBytes(1000, 4) == 4096);
  std::mt19937_64 rng(5);
  std::set<int> model;  // slots in use
  for (int step = 0; step < 2000; ++step) {
    if (rng() % 2 == 0) {
      const int slot = book.Acquire();
      if (model.size() == 4) {
        CHECK(slot == SlotBook::kNoFreeSlot);
      } else {
        int want = 0;
        while (model.count(want) != 0) ++want;
        CHECK(slot == want);
        model.insert(slot);
      }
    } else {
      const int slot = static_cast<int>(rng() % 4);
      const PlanStatus s = book.Release(slot);
      CHECK(s.ok() == (model.count(slot) == 1));
      if (!s.ok()) CHECK(Contains(s.message(), "slot " + std::to_string(slot) + ", which"));
      model.erase(slot);
    }
    REQUIRE(book.num_in_use() == static_cast<int>(model.size()));
  }
  for (int i = 0; i < 4; ++i) CHECK(book.SlotOffset(i) == 512 + 1024 * i);
  const PlanStatus out = book.Release(4);
  CHECK(Contains(out.message(), "'F act'"));
  CHECK(Contains(out.message(), "expected 0..3"));
  while (book.num_in_use() > 0) {
    for (int i = 0; i < 4; ++i) {
      if (book.InUse(i)) REQUIRE(book.Release(i).ok());
    }
  }
  const PlanStatus twice = book.Release(2);
  CHECK(Contains(twice.message(), "not in use (double release?)"));
}

TEST_CASE("SlotBook: invalid layouts are errors", "[arena_plan]") {
  SlotBook book;
  CHECK(Contains(SlotBook::Create("e", 0, 0, 4, &book).message(), "slot pool 'e'"));
  CHECK_FALSE(SlotBook::Create("e", 0, 64, 0, &book).ok());
  CHECK(Contains(SlotBook::Create("e", 100, 64, 2, &book).message(), "base offset 100"));
  CHECK(Contains(SlotBook::Create("e", 0, INT64_MAX / 4, 1000, &book).message(), "overflow"));
  CHECK(SlotBook::TotalBytes(INT64_MAX / 4, 1000) == -1);
}

}  // namespace
}  // namespace mxmaca::kernels::cuda
