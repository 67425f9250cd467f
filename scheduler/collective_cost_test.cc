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

TEST_CASE("expert grid strides and the all-to-all across nodes", "[collective_cost]") {
  auto cluster = ClusterPreset("h100-sxm");  // 8 GPUs per node, NVLink 450, network 50 GB/s
  REQUIRE(cluster.ok());
  const ExpertParallelGroups e{2, 8, 4, 1};  // ETP 2, EP 8, EDP 4
  CHECK(e.ep_stride() == 2);
  CHECK(e.edp_stride() == 16);
  CHECK(GroupRanksPerNode(1, 8, 8) == 8);
  CHECK(GroupRanksPerNode(2, 8, 8) == 4);
  CHECK(GroupRanksPerNode(16, 4, 8) == 1);
  // Inside a node (EP 8, stride 1): the NVLink all-to-all, 7/8 x 1 GB / 360 GB/s + 7 x 2 us.
  const double bytes = 1e9;
  const double nvlink = 450e9 * 0.8, network = 50e9 * 0.8;
  CHECK(AllToAllOnClusterSeconds(*cluster, bytes, 1, 8) ==
        Approx(7.0 / 8 * bytes / nvlink + 7 * 2e-6).epsilon(kRel));
  CHECK(AllToAllOnClusterSeconds(*cluster, bytes, 1, 8) ==
        AllToAllSeconds(bytes, 8, GroupLink(*cluster, 1, 8)));
  // EP 16 with stride 1: 8 peers per node; 8/16 of the buffer leaves the node at 40 GB/s
  // (the NVLink share, 7/16 at 360 GB/s, runs alongside), 15 network latencies of 5 us.
  const double ep16 = AllToAllOnClusterSeconds(*cluster, bytes, 1, 16);
  CHECK(ep16 == Approx(8.0 / 16 * bytes / network + 15 * 5e-6).epsilon(kRel));
  // Crossing nodes costs far more than staying inside: about 450 / 50 x (8/16) / (7/8).
  CHECK(ep16 > 4 * AllToAllOnClusterSeconds(*cluster, bytes, 1, 8));
  // EP 8 with stride 2 (ETP 2): 4 per node, half the buffer leaves the node.
  CHECK(AllToAllOnClusterSeconds(*cluster, bytes, 2, 8) ==
        Approx(4.0 / 8 * bytes / network + 7 * 5e-6).epsilon(kRel));
  // One rank per node (stride 8): all but the own share over the network, as the plain
  // formula on the network link.
  CHECK(AllToAllOnClusterSeconds(*cluster, bytes, 8, 4) ==
        Approx(AllToAllSeconds(bytes, 4, GroupLink(*cluster, 8, 4))).epsilon(kRel));
  CHECK(AllToAllOnClusterSeconds(*cluster, bytes, 1, 1) == 0);
}

}  // namespace
}  // namespace mxmaca::scheduler
