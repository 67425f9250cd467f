// layers/context_parallel/memory_cap_test.cc: ShardMemoryCap, CappedReservation and the
// --memory-cap-per-shard value parser.
#include "layers/context_parallel/memory_cap.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace mxmaca::layers::cp {
namespace {

TEST_CASE("memory cap: the error names the shard, the size, the purpose, total and cap",
          "[memory_cap]") {
  ShardMemoryCap cap("context_parallel rank 3", 1000);
  REQUIRE(cap.Reserve(600, "q").ok());
  const absl::Status st = cap.Reserve(500, "ring attention K/V receive buffers");
  REQUIRE(st.code() == absl::StatusCode::kResourceExhausted);
  const std::string want =
      "shard context_parallel rank 3: allocating 500 bytes for ring attention K/V receive "
      "buffers would use 1100 of the 1000-byte cap";
  CHECK(std::string(st.message()).rfind(want, 0) == 0);
  // A failed Reserve charges nothing; exactly filling the cap is allowed.
  CHECK(cap.live() == 600);
  CHECK(cap.Reserve(400, "k").ok());
  CHECK(cap.live() == 1000);
  CHECK(cap.Reserve(1, "v").code() == absl::StatusCode::kResourceExhausted);
  cap.Release(1000);
  CHECK(cap.live() == 0);
  CHECK(cap.peak() == 1000);
  cap.ResetPeak();
  CHECK(cap.peak() == 0);
  CHECK(cap.Reserve(-1, "x").code() == absl::StatusCode::kInvalidArgument);
  // Check does not charge; huge requests do not overflow.
  CHECK(cap.Check(999, 1, "y").ok());
  CHECK(cap.Check(999, 2, "y").code() == absl::StatusCode::kResourceExhausted);
  CHECK(cap.Check(10, INT64_MAX, "y").code() == absl::StatusCode::kResourceExhausted);
  CHECK(cap.live() == 0);
}

TEST_CASE("memory cap: 0 means no cap; live and peak follow random traffic", "[memory_cap]") {
  ShardMemoryCap unlimited("s", 0);
  CHECK(unlimited.Reserve(int64_t{1} << 50, "big").ok());
  // Random reserve/release sequence against a plain model of the counter.
  std::mt19937 gen(7);
  std::uniform_int_distribution<int64_t> size(1, 5000);
  ShardMemoryCap cap("s", 20000);
  int64_t live = 0, peak = 0;
  std::vector<int64_t> held;
  for (int i = 0; i < 2000; ++i) {
    if (!held.empty() && gen() % 2 == 0) {
      cap.Release(held.back());
      live -= held.back();
      held.pop_back();
    } else {
      const int64_t n = size(gen);
      const bool fits = live + n <= 20000;
      REQUIRE(cap.Reserve(n, "t").ok() == fits);
      if (fits) {
        live += n;
        peak = std::max(peak, live);
        held.push_back(n);
      }
    }
    REQUIRE(cap.live() == live);
  }
  CHECK(cap.peak() == peak);
}

TEST_CASE("memory cap: thread-safe counting and RAII reservations", "[memory_cap]") {
  ShardMemoryCap cap("s", int64_t{1} << 40);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cap, t] {
      for (int i = 0; i < 1000; ++i) {
        auto r = CappedReservation::Make(&cap, 8 + t, "block");
        REQUIRE(r.ok());
      }
      REQUIRE(cap.Reserve(100 + t, "kept").ok());
    });
  }
  for (auto& th : threads) th.join();
  CHECK(cap.live() == 100 + 101 + 102 + 103);

  ShardMemoryCap small("s", 100);
  {
    auto a = CappedReservation::Make(&small, 60, "a");
    REQUIRE(a.ok());
    CHECK(small.live() == 60);
    CHECK(CappedReservation::Make(&small, 60, "b").status().code() ==
          absl::StatusCode::kResourceExhausted);
    CappedReservation moved = std::move(*a);
    CHECK(moved.bytes() == 60);
    CHECK(small.live() == 60);
  }
  CHECK(small.live() == 0);
  auto none = CappedReservation::Make(nullptr, 1 << 30, "uncounted");
  REQUIRE(none.ok());
  CHECK(none->bytes() == 0);
}

TEST_CASE("memory cap: --memory-cap-per-shard values", "[memory_cap]") {
  CHECK(*ParseMemoryCap("0") == 0);
  CHECK(*ParseMemoryCap("1073741824") == 1073741824);
  CHECK(*ParseMemoryCap("512M") == 512LL << 20);
  CHECK(*ParseMemoryCap("2GiB") == 2LL << 30);
  CHECK(*ParseMemoryCap("3GB") == 3000000000LL);
  CHECK(*ParseMemoryCap("4kb") == 4000);
  CHECK(*ParseMemoryCap(" 7 ") == 7);
  for (const char* bad :
       {"", "-5", "1.5G", "12XB", "G", "99999999999999999999", "9000000000000T"}) {
    auto r = ParseMemoryCap(bad);
    INFO(bad);
    REQUIRE(!r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(r.status().message()).find("--memory-cap-per-shard") != std::string::npos);
  }
}

}  // namespace
}  // namespace mxmaca::layers::cp
