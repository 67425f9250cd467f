// scheduler/collective_cost_test.cc: the alpha-beta formulas on hand-computed cases and
// the group-to-link rule for Megatron's rank order.
#include "scheduler/collective_cost.h"

#include <catch2/catch.hpp>

namespace mxmaca::scheduler {
namespace {

// Hand-computed with a link of 100 GB/s and 10 us per step. Tolerance: relative 1e-12
// (a handful of double operations).
constexpr double kRel = 1e-12;
const LinkCost kLink{100e9, 10e-6, true};

TEST_CASE("ring all-reduce, all-gather, reduce-scatter, p2p", "[collective_cost]") {
  // 8 ranks, 1 GB: 2 * 7/8 * 1e9 / 1e11 = 0.0175 s; 14 steps * 10 us = 0.00014 s.
  CHECK(RingAllReduceSeconds(1e9, 8, kLink) == Approx(0.01764).epsilon(kRel));
  // all-gather: 7/8 * 0.01 = 0.00875; 7 * 10 us = 0.00007.
  CHECK(AllGatherSeconds(1e9, 8, kLink) == Approx(0.00882).epsilon(kRel));
  CHECK(ReduceScatterSeconds(1e9, 8, kLink) == Approx(0.00882).epsilon(kRel));
  CHECK(SendRecvSeconds(1e6, kLink) == Approx(1e-5 + 1e-5).epsilon(kRel));
  CHECK(RingAllReduceSeconds(1e9, 1, kLink) == 0);
  CHECK(AllGatherSeconds(1e9, 1, kLink) == 0);
}

TEST_CASE("tree all-reduce wins for small messages at scale", "[collective_cost]") {
  // 1,024 ranks, 1 KB: ring 2*1023/1024*1e3/1e11 + 2046*1e-5 = 0.02046002 s; tree
  // 2*1e3/1e11 + 2*10*1e-5 = 0.00020002 s.
  CHECK(RingAllReduceSeconds(1e3, 1024, kLink) == Approx(2.0 * 1023 / 1024 * 1e-8 + 0.02046)
                                                      .epsilon(kRel));
  CHECK(TreeAllReduceSeconds(1e3, 1024, kLink) == Approx(2e-8 + 2e-4).epsilon(kRel));
  CHECK(AllReduceSeconds(1e3, 1024, kLink) == TreeAllReduceSeconds(1e3, 1024, kLink));
  // 8 ranks, 1 GB: the ring's 7/8 bandwidth term beats the tree's 2x.
  CHECK(AllReduceSeconds(1e9, 8, kLink) == RingAllReduceSeconds(1e9, 8, kLink));
}

TEST_CASE("groups map to NVLink or the network by Megatron's rank order",
          "[collective_cost]") {
  auto cluster = ClusterPreset("h100-sxm");
  REQUIRE(cluster.ok());
  ParallelGroups g{8, 1, 16, 8};  // TP 8, DP 16, PP 8 on 1,024 GPUs
  const LinkCost tp = GroupLink(*cluster, g.tp_stride(), g.tp);
  CHECK(tp.intra_node);
  CHECK(tp.bytes_per_s == Approx(450e9 * 0.8));
  CHECK(tp.latency_s == Approx(2e-6));
  const LinkCost dp = GroupLink(*cluster, g.dp_stride(), g.dp);
  CHECK_FALSE(dp.intra_node);
  CHECK(dp.bytes_per_s == Approx(50e9 * 0.8));
  CHECK_FALSE(PipelineNeighbourLink(*cluster, g).intra_node);
  // TP 2, DP 4 on one node: both inside; TP 2 x DP 8: DP spans 16 ranks, crosses nodes.
  CHECK(GroupLink(*cluster, ParallelGroups{2, 1, 4, 1}.dp_stride(), 4).intra_node);
  CHECK_FALSE(GroupLink(*cluster, ParallelGroups{2, 1, 8, 1}.dp_stride(), 8).intra_node);
  // PP neighbours with TP 2, DP 1: stride 2, share a node.
  CHECK(PipelineNeighbourLink(*cluster, ParallelGroups{2, 1, 1, 4}).intra_node);
}

}  // namespace
}  // namespace mxmaca::scheduler
