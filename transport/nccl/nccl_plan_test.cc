// transport/nccl/nccl_plan_test.cc: the NCCL backend's host logic without a GPU — argument
// checks against RankGrid's groups, the all-to-all-v plan replayed on host buffers for
// every rank of a group against a plain all-to-all-v loop (fresh random counts and
// layouts), sequence numbering and the timeout report.
#include "transport/nccl/nccl_plan.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "transport/rank_grid.h"

namespace mxmaca::transport::nccl {
namespace {

ProcessGroup MakeGroup(std::vector<int> ranks, int me, int64_t id = 32) {
  ProcessGroup g;
  g.id = id;
  g.kind = GroupKind::kDataParallel;
  g.ranks = std::move(ranks);
  g.rank_in_group = me;
  return g;
}

TEST_CASE("CheckMembership accepts every group of a RankGrid and names what is wrong") {
  auto grid = RankGrid::Create(16, /*tp=*/2, /*pp=*/2, /*cp=*/2, /*ep=*/2);
  REQUIRE(grid.ok());
  for (int rank = 0; rank < 16; ++rank) {
    for (int k = 0; k < kNumGroupKinds; ++k) {
      auto g = grid->Group(static_cast<GroupKind>(k), rank);
      REQUIRE(g.ok());
      if (!g->has_value()) continue;
      INFO("rank " << rank << " kind " << k);
      CHECK(CheckMembership(**g, rank, 16).ok());
      CHECK_FALSE(CheckMembership(**g, rank, (**g).ranks.back()).ok());  // a member >= world
    }
  }
  absl::Status s = CheckMembership(MakeGroup({0, 2}, 1), 3, 4);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message() == "rank 3 is not member 1 of data_parallel#0 ranks [0, 2] (world 4)");
  s = CheckMembership(MakeGroup({0, 2}, 2), 2, 4);
  CHECK(s.message() == "rank 2 is not member 2 of data_parallel#0 ranks [0, 2] (world 4)");
  s = CheckMembership(MakeGroup({2, 1}, 0), 2, 4);
  CHECK(s.message() == "data_parallel#0 ranks [2, 1] are not strictly ascending at member 1");
  s = CheckMembership(MakeGroup({1, 7}, 0), 1, 4);
  CHECK(s.message() == "member 1 of data_parallel#0 ranks [1, 7] is rank 7, outside the world "
                       "[0, 4)");
  CHECK_FALSE(CheckMembership(MakeGroup({}, 0), 0, 4).ok());
}

TEST_CASE("CheckCount and CheckIndex") {
  CHECK(CheckCount(0, DataType::kBFloat16).ok());
  CHECK(CheckCount(int64_t{1} << 40, DataType::kInt64).ok());
  CHECK(CheckCount(-1, DataType::kFloat32).message() == "negative count -1");
  CHECK(CheckCount(INT64_MAX / 8, DataType::kInt64).message() ==
        absl::StrCat("count ", INT64_MAX / 8, " of int64 overflows"));
  const ProcessGroup g = MakeGroup({1, 3, 5, 7}, 2);
  CHECK(CheckIndex(g, 0, "root").ok());
  CHECK(CheckIndex(g, 3, "peer").ok());
  CHECK(CheckIndex(g, 4, "peer").message() == "peer 4 outside [0, 4) of data_parallel#0");
  CHECK(CheckIndex(g, -1, "root").message() == "root -1 outside [0, 4) of data_parallel#0");
}

// Layout: counts[i][j] elements go from rank i to rank j. Each rank's send buffer packs
// its blocks in a random order with random gaps; so does its receive buffer.
struct Layout {
  std::vector<std::vector<int64_t>> send_counts, send_displs, recv_counts, recv_displs;
  std::vector<int64_t> send_size, recv_size;
};

Layout RandomLayout(int n, std::mt19937_64& gen) {
  std::uniform_int_distribution<int64_t> count(0, 9), gap(0, 3);
  Layout l;
  std::vector<std::vector<int64_t>> c(n, std::vector<int64_t>(n));
  for (auto& row : c) {
    for (auto& x : row) x = gen() % 4 == 0 ? 0 : count(gen);  // some empty blocks
  }
  auto place = [&](const std::vector<int64_t>& sizes, std::vector<int64_t>* displs) {
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), gen);
    displs->assign(n, 0);
    int64_t at = 0;
    for (int j : order) {
      at += gap(gen);
      (*displs)[j] = at;
      at += sizes[j];
    }
    return at + gap(gen);
  };
  l.send_counts = c;
  l.recv_counts.assign(n, std::vector<int64_t>(n));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) l.recv_counts[i][j] = c[j][i];
  }
  l.send_displs.resize(n);
  l.recv_displs.resize(n);
  for (int i = 0; i < n; ++i) {
    l.send_size.push_back(place(l.send_counts[i], &l.send_displs[i]));
    l.recv_size.push_back(place(l.recv_counts[i], &l.recv_displs[i]));
  }
  return l;
}

TEST_CASE("the all-to-all-v plan, replayed on host buffers, equals a plain all-to-all-v") {
  std::mt19937_64 gen(std::random_device{}());
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(gen() % 7);
    INFO("trial " << trial << " n " << n);
    const Layout l = RandomLayout(n, gen);
    std::vector<int> ranks(n);
    for (int i = 0; i < n; ++i) ranks[i] = 3 * i + 1;  // global ranks need not be 0..n-1
    std::vector<std::vector<float>> send(n), want(n), got(n);
    std::normal_distribution<float> normal;
    for (int i = 0; i < n; ++i) {
      send[i].resize(l.send_size[i]);
      for (float& x : send[i]) x = normal(gen);
      want[i].assign(l.recv_size[i], -7.0f);
      got[i].assign(l.recv_size[i], -7.0f);
    }
    // Reference: the definition in communicator.h.
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        for (int64_t e = 0; e < l.send_counts[i][j]; ++e) {
          want[j][l.recv_displs[j][i] + e] = send[i][l.send_displs[i][j] + e];
        }
      }
    }
    std::vector<AllToAllVPlan> plans;
    for (int i = 0; i < n; ++i) {
      auto plan = PlanAllToAllV(MakeGroup(ranks, i), l.send_counts[i], l.send_displs[i],
                                l.recv_counts[i], l.recv_displs[i]);
      REQUIRE(plan.ok());
      CHECK(plan->total_send ==
            std::accumulate(l.send_counts[i].begin(), l.send_counts[i].end(), int64_t{0}));
      // Self first, then the rotation; empty pairs left out.
      int last_step = -1;
      for (const auto& t : plan->transfers) {
        const int step = (t.peer - i + n) % n;
        CHECK(step > last_step);
        last_step = step;
        CHECK((t.send_count > 0 || t.recv_count > 0));
      }
      plans.push_back(*plan);
    }
    // Replay: every ncclSend of rank i to j meets the ncclRecv of rank j from i.
    for (int i = 0; i < n; ++i) {
      for (const auto& t : plans[i].transfers) {
        if (t.send_count == 0) continue;
        const auto& theirs = plans[t.peer].transfers;
        auto match = std::find_if(theirs.begin(), theirs.end(),
                                  [&](const auto& u) { return u.peer == i; });
        REQUIRE(match != theirs.end());
        REQUIRE(match->recv_count == t.send_count);
        std::copy_n(send[i].begin() + t.send_offset, t.send_count,
                    got[t.peer].begin() + match->recv_offset);
      }
    }
    for (int i = 0; i < n; ++i) CHECK(got[i] == want[i]);
  }
}

TEST_CASE("PlanAllToAllV refuses bad vectors with the member and value") {
  const ProcessGroup g = MakeGroup({0, 1, 2, 3}, 1);
  const std::vector<int64_t> c = {1, 2, 3, 4}, d = {0, 1, 3, 6};
  REQUIRE(PlanAllToAllV(g, c, d, c, d).ok());
  auto s = PlanAllToAllV(g, c, d, {1, 2, 3}, d).status();
  CHECK(s.message() == "recv_counts has 3 entries, the group data_parallel#0 has 4 members");
  s = PlanAllToAllV(g, {1, -2, 3, 4}, d, c, d).status();
  CHECK(s.message() == "send_counts[1] = -2 is negative or too large");
  s = PlanAllToAllV(g, c, d, c, {0, 1, 2, 6}).status();  // member 2's [2, 5) meets 1's [1, 3)
  CHECK(s.message() == "recv ranges of member 1 [1, 3) and member 2 [2, 5) overlap");
  CHECK(PlanAllToAllV(g, c, {0, 0, 0, 0}, c, d).ok());  // overlapping sends are only reads
  s = PlanAllToAllV(g, c, d, c, {0, 1, 3, INT64_MAX / 4}).status();
  CHECK(s.message() == "recv_displs[3] + recv_counts[3] overflows");
  CHECK(PlanAllToAllV(g, {0, 0, 0, 0}, d, {0, 0, 0, 0}, d)->transfers.empty());
}

TEST_CASE("sequence numbers: per group for collectives, per channel for send/recv") {
  SequenceCounters c;
  CHECK(c.NextCollective(5) == 0);
  CHECK(c.NextCollective(5) == 1);
  CHECK(c.NextCollective(6) == 0);
  CHECK(c.NextPointToPoint(5, 1, 2, true) == 0);   // send 1 -> 2
  CHECK(c.NextPointToPoint(5, 2, 1, false) == 0);  // recv at 1 from 2: another channel
  CHECK(c.NextPointToPoint(5, 1, 2, true) == 1);
  CHECK(c.NextPointToPoint(5, 1, 3, true) == 0);
  CHECK(c.NextPointToPoint(6, 1, 2, true) == 0);
  CHECK(c.NextCollective(5) == 2);  // collectives untouched by p2p
}

TEST_CASE("the timeout report names the operation, the members and what is in flight") {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  PendingOp late;
  late.info.group_id = 32;
  late.info.group_name = "data_parallel#0";
  late.info.sequence = 7;
  late.info.op = CollectiveOp::kAllReduce;
  late.info.count = 1024;
  late.info.bytes = 4096;
  late.info.rank = 3;
  late.posted = t0;
  PendingOp other = late;
  other.info.op = CollectiveOp::kBroadcast;
  other.info.group_name = "tensor_model_parallel#1";
  other.info.sequence = 0;
  other.posted = t0 + absl::Seconds(299);
  const std::string r = TimeoutReport(late, {1, 3, 5, 7}, {late, other}, 3, absl::Minutes(5),
                                      t0 + absl::Seconds(300));
  CHECK(r == absl::StrCat("NcclCommunicator: all_reduce on data_parallel#0 (group 32) seq 7 "
                          "did not complete within 5m (posted 5m ago): rank 3 posted ",
                          late.info.ToString(),
                          "; members of the group: [1, 3, 5, 7]; still in flight on rank 3 "
                          "(oldest first): all_reduce on data_parallel#0 seq 7 (5m), "
                          "broadcast on tensor_model_parallel#1 seq 0 (1s); NCCL does not "
                          "report which member is missing: compare the reports of the "
                          "members (a member with no report, or whose oldest pending "
                          "operation on this group has a smaller sequence, is the one "
                          "behind)"));
}

}  // namespace
}  // namespace mxmaca::transport::nccl
