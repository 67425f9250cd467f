// layers/moe/dispatch/dispatch_rank_main.cc: one rank of a launched MoE dispatch job
// (launcher variables, transport/ucx/launch_env.h; run by dispatcher_two_host_test.sh as
// 2 nodes x 2 processes on network namespaces joined by a veth pair).
//
//   moe_dispatch_rank_main --ranks-per-node N      (the launcher's --nproc-per-node)
//
// Every rank runs the three dispatchers over UCX on seeded Zipf routings and checks
// dispatch, combine and both backward passes against the direct gather (CheckOneRank),
// then one hierarchical dispatch + combine with its cross-node messages counted: the
// leader of each node (local rank 0) must send exactly one count message and one row
// message to every other leader per dispatch and one row message per combine; the other
// ranks nothing across nodes. Prints
//   "rank R of W: dispatchers ok; hierarchical across nodes: dispatch D messages, combine C
//    messages, B row bytes"
// and exits 0; on a failure prints it and exits 1 (2 for a usage error).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "layers/moe/dispatch/counting_communicator.h"
#include "layers/moe/dispatch/dispatch_testing.h"
#include "layers/moe/dispatch/dispatcher_factory.h"
#include "transport/rank_grid.h"
#include "transport/ucx/launch_env.h"
#include "transport/ucx/ucx_communicator.h"

namespace mxmaca::layers::moe::dispatch {
namespace {

using transport::DataType;

constexpr absl::Duration kWait = absl::Seconds(60);

std::string Run(const transport::ucx::LaunchEnv& env, transport::Communicator* ucx,
                int ranks_per_node, std::string* summary) {
  const int world = env.world_size, rank = env.rank;
  if (world % ranks_per_node != 0) {
    return absl::StrCat("world size ", world, " is not a multiple of --ranks-per-node ",
                        ranks_per_node);
  }
  CountingCommunicator comm(ucx);
  auto grid = transport::RankGrid::Create(world, 1, 1, 1, /*ep=*/world);
  if (!grid.ok()) return grid.status().ToString();
  DispatcherOptions o;
  o.comm = &comm;
  o.ep_group = grid->ForRank(rank)->expert_model_parallel_group();
  o.num_experts = 2 * world;
  const int64_t h = 64;
  uint32_t seed = 4242;
  for (const char* type : {"alltoall", "allgather", "hierarchical"}) {
    auto disp = CreateTokenDispatcher(type, o, ranks_per_node);
    if (!disp.ok()) return disp.status().ToString();
    std::vector<testing::RankInput> inputs =
        testing::MakeInputs(world, o.num_experts, h, 100, 400, testing::Routing::kZipf, ++seed);
    std::string e = testing::CheckOneRank(**disp, inputs, o.num_experts, h, rank, seed, kWait);
    if (!e.empty()) return e;
  }
  // Hierarchical: count one dispatch and one combine.
  auto disp = CreateTokenDispatcher("hierarchical", o, ranks_per_node);
  if (!disp.ok()) return disp.status().ToString();
  std::vector<testing::RankInput> inputs =
      testing::MakeInputs(world, o.num_experts, h, 200, 400, testing::Routing::kUniform, 77);
  const testing::RankInput& in = inputs[rank];
  comm.Clear();
  auto got = DispatchAndWait(**disp, in.rows.data(), in.num_rows, h, in.tokens_per_expert, kWait);
  if (!got.ok()) return got.status().ToString();
  const std::vector<PostedOp> dispatch_sends = comm.CrossNodeSends(ranks_per_node);
  comm.Clear();
  auto back = CombineAndWait(**disp, got->layout, got->rows.data(),
                             static_cast<int64_t>(got->rows.size()) / h, kWait);
  if (!back.ok()) return back.status().ToString();
  const std::vector<PostedOp> combine_sends = comm.CrossNodeSends(ranks_per_node);
  if (!comm.SpanningCollectives(ranks_per_node).empty()) return "a collective spans nodes";
  std::string e = testing::FirstDifference(*back, in.rows, "hierarchical combine");
  if (!e.empty()) return e;
  const int nodes = world / ranks_per_node, node = rank / ranks_per_node;
  const bool leader = rank % ranks_per_node == 0;
  // Expected: per other node, one int64 (counts) and one fp32 (rows) message in dispatch
  // and one fp32 message in combine, each to that node's leader.
  auto check = [&](const std::vector<PostedOp>& sends, const std::vector<DataType>& kinds,
                   const char* phase) -> std::string {
    const size_t expected = leader ? kinds.size() * (nodes - 1) : 0;
    if (sends.size() != expected) {
      return absl::StrCat(phase, ": ", sends.size(), " messages across nodes, expected ", expected);
    }
    for (int k = 0; k < nodes && leader; ++k) {
      if (k == node) continue;
      for (DataType t : kinds) {
        int n = 0;
        for (const PostedOp& p : sends) n += p.dst == k * ranks_per_node && p.dtype == t;
        if (n != 1) {
          return absl::StrCat(phase, ": ", n, " ", transport::DataTypeName(t),
                              " messages to the leader of node ", k, ", expected 1");
        }
      }
    }
    return "";
  };
  e = check(dispatch_sends, {DataType::kInt64, DataType::kFloat32}, "dispatch");
  if (e.empty()) e = check(combine_sends, {DataType::kFloat32}, "combine");
  if (!e.empty()) return e;
  int64_t row_bytes = 0;
  for (const auto* sends : {&dispatch_sends, &combine_sends}) {
    for (const PostedOp& p : *sends) row_bytes += p.dtype == DataType::kFloat32 ? p.bytes : 0;
  }
  *summary = absl::StrCat("hierarchical across nodes: dispatch ", dispatch_sends.size(),
                          " messages, combine ", combine_sends.size(), " messages, ", row_bytes,
                          " row bytes");
  return "";
}

}  // namespace
}  // namespace mxmaca::layers::moe::dispatch

int main(int argc, char** argv) {
  using namespace mxmaca;
  int ranks_per_node = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--ranks-per-node" && i + 1 < argc &&
        absl::SimpleAtoi(argv[i + 1], &ranks_per_node) && ranks_per_node >= 1) {
      ++i;
      continue;
    }
    std::fprintf(stderr, "usage: moe_dispatch_rank_main --ranks-per-node N (bad argument \"%s\")\n",
                 flag.c_str());
    return 2;
  }
  if (ranks_per_node < 1) {
    std::fprintf(stderr, "usage: moe_dispatch_rank_main --ranks-per-node N\n");
    return 2;
  }
  auto env = transport::ucx::DetectLaunchEnv();
  if (!env.ok()) {
    std::fprintf(stderr, "%s\n", env.status().ToString().c_str());
    return 1;
  }
  transport::ucx::UcxCommunicator::Options options;
  options.timeout = absl::Seconds(60);
  auto comm =
      transport::ucx::UcxCommunicator::CreateFromLaunchEnv(*env, absl::Seconds(30), options);
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", env->rank, comm.status().ToString().c_str());
    return 1;
  }
  std::string summary;
  std::string error = layers::moe::dispatch::Run(*env, comm->get(), ranks_per_node, &summary);
  absl::Status closed = (*comm)->Close();
  if (!error.empty() || !closed.ok()) {
    std::fprintf(stderr, "rank %d: %s %s\n", env->rank, error.c_str(), closed.ToString().c_str());
    return 1;
  }
  std::printf("rank %d of %d: dispatchers ok; %s\n", env->rank, env->world_size, summary.c_str());
  return 0;
}
