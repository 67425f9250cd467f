// layers/moe/dispatch/dispatcher_ucx_test.cc (tag multiprocess): the three dispatchers
// over UcxCommunicator with 4 forked processes (one EP rank each, UCX_TLS=shm,tcp on lo).
// Each child builds every rank's inputs from the shared seed, runs CheckOneRank
// (dispatch, combine, both backward passes against the direct-gather reference, bit for
// bit) and, for the hierarchical dispatcher as 2 nodes x 2 ranks, counts its own
// cross-node messages: each leader exactly one count message and one row message to the
// other leader per dispatch and one row message per combine; non-leaders none; no
// collective spans the nodes. And a rank that never dispatches: the others get
// DeadlineExceeded from the transport's timeout (through CollectiveWatchdog), not a hang.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "layers/moe/dispatch/counting_communicator.h"
#include "layers/moe/dispatch/dispatch_testing.h"
#include "layers/moe/dispatch/dispatcher_factory.h"
#include "transport/collective_watchdog.h"
#include "transport/rank_grid.h"
#include "transport/ucx/multiprocess_testing.h"
#include "transport/ucx/ucx_communicator.h"

namespace mxmaca::layers::moe::dispatch {
namespace {

using transport::DataType;
using transport::ucx::RankResult;
using transport::ucx::UcxCommunicator;

constexpr int kWorld = 4;
constexpr int kRanksPerNode = 2;
constexpr absl::Duration kWait = absl::Seconds(30);

// CheckCrossNode: this rank's cross-node sends of one phase against the protocol.
std::string CheckCrossNode(const std::vector<PostedOp>& sends, int rank,
                           const std::vector<DataType>& expected, const std::string& phase) {
  const bool leader = rank % kRanksPerNode == 0;
  if (!leader) {
    if (sends.empty()) return "";
    return absl::StrCat(phase, ": non-leader rank ", rank, " sent ", sends.size(),
                        " messages across nodes");
  }
  if (sends.size() != expected.size()) {
    return absl::StrCat(phase, ": leader rank ", rank, " sent ", sends.size(),
                        " messages across nodes, expected ", expected.size());
  }
  const int other_leader = (rank + kRanksPerNode) % kWorld;
  for (size_t i = 0; i < sends.size(); ++i) {
    if (sends[i].dtype != expected[i] || sends[i].dst != other_leader) {
      return absl::StrCat(phase, ": leader rank ", rank, " message ", i, " went to rank ",
                          sends[i].dst, " as ", transport::DataTypeName(sends[i].dtype));
    }
  }
  return "";
}

std::string RunRank(int rank, int port) {
  setenv("UCX_TLS", "shm,tcp", 1);
  setenv("UCX_NET_DEVICES", "lo", 1);
  setenv("UCX_WARN_UNUSED_ENV_VARS", "n", 1);
  transport::ucx::RendezvousOptions rv;
  rv.master_port = port;
  rv.timeout = absl::Seconds(20);
  UcxCommunicator::Options uo;
  uo.timeout = absl::Seconds(20);
  auto ucx = UcxCommunicator::Create(rv, rank, kWorld, uo);
  if (!ucx.ok()) return ucx.status().ToString();
  CountingCommunicator comm(ucx->get());
  auto grid = transport::RankGrid::Create(kWorld, 1, 1, 1, /*ep=*/kWorld);
  if (!grid.ok()) return grid.status().ToString();
  DispatcherOptions o;
  o.comm = &comm;
  o.ep_group = grid->ForRank(rank)->expert_model_parallel_group();
  std::string error;
  const int64_t h = 24;
  uint32_t seed = 900;
  for (const char* type : {"alltoall", "allgather", "hierarchical"}) {
    for (int local : {1, 2}) {
      for (auto routing : {testing::Routing::kZipf, testing::Routing::kOneExpert}) {
        o.num_experts = kWorld * local;
        auto disp = CreateTokenDispatcher(type, o, kRanksPerNode);
        if (!disp.ok()) return disp.status().ToString();
        std::vector<testing::RankInput> inputs =
            testing::MakeInputs(kWorld, o.num_experts, h, 0, 300, routing, ++seed);
        error = testing::CheckOneRank(**disp, inputs, o.num_experts, h, rank, seed + 50, kWait);
        if (!error.empty()) break;
      }
      if (!error.empty()) break;
    }
    if (!error.empty()) break;
  }
  if (error.empty()) {
    // Hierarchical 2 x 2: count the messages of one dispatch and one combine.
    o.num_experts = 8;
    auto disp = CreateTokenDispatcher("hierarchical", o, kRanksPerNode);
    if (!disp.ok()) return disp.status().ToString();
    std::vector<testing::RankInput> inputs =
        testing::MakeInputs(kWorld, 8, h, 50, 200, testing::Routing::kUniform, 999);
    comm.Clear();
    const testing::RankInput& in = inputs[rank];
    auto got = DispatchAndWait(**disp, in.rows.data(), in.num_rows, h, in.tokens_per_expert, kWait);
    if (!got.ok()) return got.status().ToString();
    error = CheckCrossNode(comm.CrossNodeSends(kRanksPerNode), rank,
                           {DataType::kInt64, DataType::kFloat32}, "dispatch");
    if (error.empty() && !comm.SpanningCollectives(kRanksPerNode).empty()) {
      error = "a collective spans nodes";
    }
    comm.Clear();
    if (error.empty()) {
      auto back = CombineAndWait(**disp, got->layout, got->rows.data(),
                                 static_cast<int64_t>(got->rows.size()) / h, kWait);
      if (!back.ok()) return back.status().ToString();
      error =
          CheckCrossNode(comm.CrossNodeSends(kRanksPerNode), rank, {DataType::kFloat32}, "combine");
      if (error.empty()) error = testing::FirstDifference(*back, in.rows, "combine");
    }
  }
  absl::Status closed = (*ucx)->Close();
  if (error.empty() && !closed.ok()) error = closed.ToString();
  return error;
}

TEST_CASE("4 processes over UCX: all dispatchers exact, hierarchical 2x2 message count") {
  const int port = transport::ucx::FreeTcpPort();
  std::vector<RankResult> results = transport::ucx::RunRanks(
      kWorld, [port](int rank) { return RunRank(rank, port); }, absl::Seconds(120));
  for (size_t r = 0; r < results.size(); ++r) {
    INFO("rank " << r);
    CHECK(results[r].text == "");
    CHECK(results[r].exit_code == 0);
    CHECK_FALSE(results[r].timed_out);
  }
}

// RunAbsentRank: rank 3 never dispatches; ranks 0-2 must fail with DeadlineExceeded.
std::string RunAbsentRank(int rank, int port, const char* type) {
  setenv("UCX_TLS", "shm,tcp", 1);
  setenv("UCX_NET_DEVICES", "lo", 1);
  setenv("UCX_WARN_UNUSED_ENV_VARS", "n", 1);
  transport::ucx::RendezvousOptions rv;
  rv.master_port = port;
  rv.timeout = absl::Seconds(20);
  UcxCommunicator::Options uo;
  uo.timeout = absl::Milliseconds(500);
  auto ucx = UcxCommunicator::Create(rv, rank, kWorld, uo);
  if (!ucx.ok()) return ucx.status().ToString();
  std::string error;
  if (rank != 3) {
    UcxCommunicator* comm = ucx->get();
    transport::CollectiveWatchdog dog(
        absl::Milliseconds(50), [comm](absl::Time t) { return comm->CheckTimeouts(t); },
        [](std::vector<absl::Status>) {});
    auto grid = transport::RankGrid::Create(kWorld, 1, 1, 1, kWorld);
    DispatcherOptions o;
    o.comm = comm;
    o.ep_group = grid->ForRank(rank)->expert_model_parallel_group();
    o.num_experts = 4;
    auto disp = CreateTokenDispatcher(type, o, kRanksPerNode);
    if (!disp.ok()) return disp.status().ToString();
    std::vector<float> rows(4 * 8, 1.0f);
    auto got = DispatchAndWait(**disp, rows.data(), 4, 8, {1, 1, 1, 1}, kWait);
    if (got.status().code() != absl::StatusCode::kDeadlineExceeded) {
      error = absl::StrCat(type, ": expected DEADLINE_EXCEEDED, got ", got.status().ToString());
    }
  }
  absl::Status closed = (*ucx)->Close();
  if (error.empty() && !closed.ok()) error = closed.ToString();
  return error;
}

TEST_CASE("4 processes over UCX: a rank that never dispatches gives DeadlineExceeded") {
  for (const char* type : {"alltoall", "hierarchical"}) {
    INFO(type);
    const int port = transport::ucx::FreeTcpPort();
    std::vector<RankResult> results = transport::ucx::RunRanks(
        kWorld, [port, type](int rank) { return RunAbsentRank(rank, port, type); },
        absl::Seconds(60));
    for (size_t r = 0; r < results.size(); ++r) {
      INFO("rank " << r);
      CHECK(results[r].text == "");
      CHECK(results[r].exit_code == 0);
    }
  }
}

}  // namespace
}  // namespace mxmaca::layers::moe::dispatch
