// Megatron-Core's distributed-optimizer buffer layout (distrib_optim_layout.h) on cases
// worked by hand from _compute_per_buffer_param_layout and get_parameter_state_dp_zero
// (core_v0.19.0); the torch model of the same files is checked in megatron_checkpoint_test.
#include "actors/checkpoint/megatron/distrib_optim_layout.h"

#include <catch2/catch.hpp>
#include <optional>
#include <vector>

namespace mxmaca::actors::checkpoint::megatron {
namespace {

TEST_CASE("one bucket: reverse order, starts padded to 64 elements") {
  // Named order a (100), b (10): b at 0..10, a at pad64(10) = 64..164.
  const CoalescedLayout l =
      CoalescedBufferLayout({{100, false}, {10, false}}, std::nullopt, 1, false);
  CHECK(l.offset == std::vector<int64_t>{64, 0});
  CHECK(l.numel_unpadded == 164);
}

TEST_CASE("buckets: the padding between buckets is dropped, inside them kept") {
  // a (100), b (60), c (10), bucket size 50: c 0..10, b 64..124 closes bucket 0 (124
  // unpadded, end padded to lcm(dp, 128)); a starts bucket 1 at its padded start and ends
  // it at +100. Coalesced: bucket 1 follows bucket 0's 124 elements, whatever dp.
  for (const int64_t dp : {1, 3, 8}) {
    for (const bool busbw : {false, true}) {
      const CoalescedLayout l =
          CoalescedBufferLayout({{100, false}, {60, false}, {10, false}}, 50, dp, busbw);
      CHECK(l.offset == std::vector<int64_t>{124, 64, 0});
      CHECK(l.numel_unpadded == 224);
    }
  }
}

TEST_CASE("a shared embedding gets a bucket of its own") {
  // emb (40, shared) then x (10): x at 0..10; before emb the open bucket closes at
  // pad64(10) = 64 (64 unpadded), emb fills the next bucket alone (40).
  const CoalescedLayout l =
      CoalescedBufferLayout({{40, true}, {10, false}}, std::nullopt, 2, false);
  CHECK(l.offset == std::vector<int64_t>{64, 0});
  CHECK(l.numel_unpadded == 104);
  // First in the reversed order (nothing open): its own bucket, then the rest.
  const CoalescedLayout last =
      CoalescedBufferLayout({{10, false}, {40, true}}, std::nullopt, 2, false);
  CHECK(last.offset == std::vector<int64_t>{40, 0});
  CHECK(last.numel_unpadded == 50);
}

TEST_CASE("bucket size as Megatron's get_model resolves it") {
  CHECK(!DistOptBucketSize(false, std::nullopt, 4, 0, 0, false).has_value());
  CHECK(DistOptBucketSize(true, std::nullopt, 4, 0, 0, false) == 40000000);
  CHECK(DistOptBucketSize(true, std::nullopt, 64, 0, 0, false) == 64000000);
  CHECK(DistOptBucketSize(true, 1000, 4, 0, 0, false) == 1000);
  CHECK(!DistOptBucketSize(true, 1000, 4, 1, 0, false).has_value());  // a later chunk
  CHECK(!DistOptBucketSize(true, 1000, 4, 0, 1, false).has_value());  // pipeline rank 1
  CHECK(!DistOptBucketSize(true, 1000, 4, 0, 0, true).has_value());
}

}  // namespace
}  // namespace mxmaca::actors::checkpoint::megatron
