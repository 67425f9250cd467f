// layers/moe/dispatch/dispatcher_test.cc: the three dispatchers on the in-process hub,
// every EP rank's calls on its own thread.
//
// For EP in {1, 2, 4} (and EP 4 inside a TP2 world of 8, where EP groups are not
// contiguous), 1 or 2 local experts, uniform / Zipf / one-expert / sparse routings, empty
// ranks: Dispatch against a direct gather from all ranks' inputs (dispatch_testing.h),
// Combine of identity experts giving back the input, Combine of per-expert functions,
// CombineBackward and DispatchBackward against the same references — all bit for bit
// (data movement is exact, so no tolerance applies), and identical across dispatchers
// because each is compared with the same reference. The hierarchical dispatcher's
// cross-node messages are counted (2 nodes x 2 ranks and 4 x 2). Errors: bad input on one
// rank, hidden sizes that differ, a rank that never arrives (DeadlineExceeded through the
// watchdog), a layout from another call, options.
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "layers/moe/dispatch/all_gather_dispatcher.h"
#include "layers/moe/dispatch/all_to_all_dispatcher.h"
#include "layers/moe/dispatch/counting_communicator.h"
#include "layers/moe/dispatch/dispatch_testing.h"
#include "layers/moe/dispatch/dispatcher_factory.h"
#include "layers/moe/dispatch/hierarchical_dispatcher.h"
#include "transport/collective_watchdog.h"
#include "transport/inprocess_communicator.h"
#include "transport/rank_grid.h"

namespace mxmaca::layers::moe::dispatch {
namespace {

using testing::FirstDifference;
using testing::RankInput;
using testing::Routing;
using transport::CollectiveOp;
using transport::DataType;
using transport::InProcessHub;
using transport::ProcessGroup;
using transport::RankGrid;

// Safety net only: a correct exchange finishes in milliseconds; a hang fails the test.
constexpr absl::Duration kWait = absl::Seconds(60);

enum class Kind { kAllToAll, kAllGather, kHierarchical };

struct Variant {
  Kind kind;
  int ranks_per_node = 0;  // hierarchical only
  std::string Name() const {
    switch (kind) {
      case Kind::kAllToAll:
        return "alltoall";
      case Kind::kAllGather:
        return "allgather";
      case Kind::kHierarchical:
        return absl::StrCat("hierarchical(ranks_per_node=", ranks_per_node, ")");
    }
    return "";
  }
};

absl::StatusOr<std::unique_ptr<TokenDispatcher>> Make(const Variant& v, DispatcherOptions options) {
  const char* type = v.kind == Kind::kAllToAll    ? "alltoall"
                     : v.kind == Kind::kAllGather ? "allgather"
                                                  : "hierarchical";
  return CreateTokenDispatcher(type, std::move(options), v.ranks_per_node);
}

// RunOnThreads: body(r) on n threads; returns each thread's report ("" = success).
std::vector<std::string> RunOnThreads(int n, const std::function<std::string(int)>& body) {
  std::vector<std::string> reports(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r]() { reports[r] = body(r); });
  for (std::thread& t : threads) t.join();
  return reports;
}

void RequireAllEmpty(const std::vector<std::string>& reports) {
  for (size_t r = 0; r < reports.size(); ++r) {
    INFO("rank " << r);
    CHECK(reports[r] == "");
  }
}

// RunScenario: world ranks (TP = world / ep), every EP group runs `variant` on inputs
// made from `seed`; returns the ranks' reports. `counters` (optional) receives each
// rank's CountingCommunicator records.
std::vector<std::string> RunScenario(const Variant& variant, int world, int ep, int num_experts,
                                     int64_t h, int64_t min_rows, int64_t max_rows, Routing routing,
                                     uint32_t seed, const std::vector<int>& empty_ranks = {},
                                     std::vector<std::vector<PostedOp>>* counters = nullptr) {
  auto grid = RankGrid::Create(world, /*tp=*/world / ep, /*pp=*/1, /*cp=*/1, ep);
  if (!grid.ok()) return {grid.status().ToString()};
  InProcessHub hub(world);
  std::vector<std::unique_ptr<CountingCommunicator>> comms;
  for (int r = 0; r < world; ++r) {
    comms.push_back(std::make_unique<CountingCommunicator>(hub.ForRank(r)));
  }
  // One pool for every rank's dispatcher (as one pool may serve all layers of a rank):
  // exercises it from several threads at once.
  auto pool = std::make_shared<BufferPool>();
  std::vector<std::string> reports = RunOnThreads(world, [&](int r) -> std::string {
    const ProcessGroup g = grid->ForRank(r)->expert_model_parallel_group();
    DispatcherOptions o;
    o.comm = comms[r].get();
    o.ep_group = g;
    o.num_experts = num_experts;
    o.buffer_pool = pool;
    auto disp = Make(variant, o);
    if (!disp.ok()) return disp.status().ToString();
    const uint32_t group_seed = seed + 1000u * static_cast<uint32_t>(g.index);
    std::vector<RankInput> inputs = testing::MakeInputs(ep, num_experts, h, min_rows, max_rows,
                                                        routing, group_seed, empty_ranks);
    // Two micro-batches in a row: layouts and sequence numbers must not leak between them.
    for (int mb = 0; mb < 2; ++mb) {
      std::string e = testing::CheckOneRank(**disp, inputs, num_experts, h, g.rank_in_group,
                                            group_seed + 77 + mb, kWait);
      if (!e.empty()) return absl::StrCat(variant.Name(), " micro-batch ", mb, ": ", e);
      inputs = testing::MakeInputs(ep, num_experts, h, min_rows, max_rows, routing,
                                   group_seed + 5 + mb, empty_ranks);
    }
    return "";
  });
  if (counters != nullptr) {
    counters->clear();
    for (auto& c : comms) counters->push_back(c->Posted());
  }
  return reports;
}

std::vector<Variant> AllVariants(int ep) {
  std::vector<Variant> v = {{Kind::kAllToAll}, {Kind::kAllGather}, {Kind::kHierarchical, 1}};
  if (ep >= 2) v.push_back({Kind::kHierarchical, 2});
  if (ep >= 4) v.push_back({Kind::kHierarchical, 4});
  if (ep >= 4) v.push_back({Kind::kHierarchical, 3});  // uneven nodes: {0, 1, 2}, {3}
  return v;
}

TEST_CASE("dispatchers match the direct gather for EP 1, 2, 4") {
  for (int ep : {1, 2, 4}) {
    for (int local : {1, 2}) {
      for (Routing routing : {Routing::kUniform, Routing::kZipf}) {
        for (const Variant& v : AllVariants(ep)) {
          INFO("EP " << ep << " local experts " << local << " " << v.Name() << " routing "
                     << static_cast<int>(routing));
          RequireAllEmpty(RunScenario(v, ep, ep, ep * local, /*h=*/6, /*min_rows=*/0,
                                      /*max_rows=*/40, routing, 100u * ep + local));
        }
      }
    }
  }
}

TEST_CASE("skewed routings: one expert, unused experts, ranks sending nothing") {
  for (int ep : {2, 4}) {
    for (const Variant& v : AllVariants(ep)) {
      INFO("EP " << ep << " " << v.Name());
      // Every row of every rank to expert 0.
      RequireAllEmpty(RunScenario(v, ep, ep, 2 * ep, 5, 10, 30, Routing::kOneExpert, 11));
      // Most experts (and so some ranks' experts) receive nothing.
      RequireAllEmpty(RunScenario(v, ep, ep, 2 * ep, 5, 10, 30, Routing::kSparse, 12));
      // Rank 1 sends nothing.
      RequireAllEmpty(RunScenario(v, ep, ep, ep, 5, 1, 30, Routing::kUniform, 13, {1}));
      // Nobody sends anything.
      std::vector<int> all(ep);
      for (int r = 0; r < ep; ++r) all[r] = r;
      RequireAllEmpty(RunScenario(v, ep, ep, ep, 5, 1, 30, Routing::kUniform, 14, all));
    }
  }
}

TEST_CASE("EP 4 inside a TP2 world of 8 (strided EP groups, two exchanges at once)") {
  for (const Variant& v : {Variant{Kind::kAllToAll}, Variant{Kind::kAllGather},
                           Variant{Kind::kHierarchical, 4}, Variant{Kind::kHierarchical, 2}}) {
    INFO(v.Name());
    RequireAllEmpty(RunScenario(v, 8, 4, 8, 4, 0, 25, Routing::kZipf, 21));
  }
}

// CrossNodeCounts: per (step kind, src node, dst node) the number of cross-node Sends of
// all ranks; int64 sends are the count step, fp32 the row steps.
std::map<std::tuple<int, int, int>, int> CrossNodeCounts(
    const std::vector<std::vector<PostedOp>>& posted, int ranks_per_node) {
  std::map<std::tuple<int, int, int>, int> counts;
  for (const auto& rank_ops : posted) {
    for (const PostedOp& p : rank_ops) {
      if (p.op != CollectiveOp::kSend) continue;
      const int a = p.src / ranks_per_node, b = p.dst / ranks_per_node;
      if (a != b) ++counts[{static_cast<int>(p.dtype), a, b}];
    }
  }
  return counts;
}

TEST_CASE("hierarchical: exactly one message per node pair and direction per step") {
  for (auto [world, rpn] : {std::pair{4, 2}, std::pair{8, 2}, std::pair{8, 4}}) {
    INFO(world << " ranks, " << rpn << " per node");
    const int nodes = world / rpn;
    std::vector<std::vector<PostedOp>> posted;
    RequireAllEmpty(RunScenario({Kind::kHierarchical, rpn}, world, world, 2 * world, 3, 5, 20,
                                Routing::kUniform, 31, {}, &posted));
    // Per micro-batch (2 of them): count exchange C2 (int64); rows: dispatch D2, combine R2
    // twice (identity and expert outputs), combine backward (= D2), dispatch backward
    // (= R2), all fp32: 5 fp32 row steps per micro-batch.
    const std::map<std::tuple<int, int, int>, int> counts = CrossNodeCounts(posted, rpn);
    int pairs = 0;
    for (int a = 0; a < nodes; ++a) {
      for (int b = 0; b < nodes; ++b) {
        if (a == b) continue;
        ++pairs;
        auto find = [&](DataType t) {
          auto it = counts.find({static_cast<int>(t), a, b});
          return it == counts.end() ? 0 : it->second;
        };
        CHECK(find(DataType::kInt64) == 2 * 1);
        CHECK(find(DataType::kFloat32) == 2 * 5);
      }
    }
    CHECK(static_cast<int>(counts.size()) == 2 * pairs);  // nothing else crossed
    for (const auto& rank_ops : posted) {
      for (const PostedOp& p : rank_ops) {
        CHECK(p.op != CollectiveOp::kAllGather);
        CHECK(p.op != CollectiveOp::kAllToAllV);
        CHECK(p.op != CollectiveOp::kReduceScatter);
      }
    }
  }
}

TEST_CASE("hierarchical: cross-node messages of one dispatch and one combine, 2 nodes x 2") {
  const int world = 4, rpn = 2, E = 8;
  const int64_t h = 4;
  auto grid = RankGrid::Create(world, 1, 1, 1, world);
  REQUIRE(grid.ok());
  InProcessHub hub(world);
  std::vector<std::unique_ptr<CountingCommunicator>> comms;
  for (int r = 0; r < world; ++r) {
    comms.push_back(std::make_unique<CountingCommunicator>(hub.ForRank(r)));
  }
  std::vector<RankInput> inputs = testing::MakeInputs(world, E, h, 3, 9, Routing::kZipf, 41);
  std::vector<std::vector<PostedOp>> after_dispatch(world), after_combine(world);
  RequireAllEmpty(RunOnThreads(world, [&](int r) -> std::string {
    DispatcherOptions o;
    o.comm = comms[r].get();
    o.ep_group = grid->ForRank(r)->expert_model_parallel_group();
    o.num_experts = E;
    auto disp = HierarchicalDispatcher::Create(o, rpn);
    if (!disp.ok()) return disp.status().ToString();
    if ((*disp)->topology().num_nodes() != 2) return "expected 2 nodes";
    auto got = DispatchAndWait(**disp, inputs[r].rows.data(), inputs[r].num_rows, h,
                               inputs[r].tokens_per_expert, kWait);
    if (!got.ok()) return got.status().ToString();
    after_dispatch[r] = comms[r]->CrossNodeSends(rpn);
    comms[r]->Clear();
    auto back = CombineAndWait(**disp, got->layout, got->rows.data(),
                               static_cast<int64_t>(got->rows.size()) / h, kWait);
    if (!back.ok()) return back.status().ToString();
    after_combine[r] = comms[r]->CrossNodeSends(rpn);
    if (!comms[r]->SpanningCollectives(rpn).empty()) return "a collective spans nodes";
    return FirstDifference(*back, inputs[r].rows, "combine");
  }));
  // Leaders are ranks 0 and 2: dispatch = counts (int64) + rows (fp32) to the other leader;
  // combine = rows back. Non-leaders send nothing across.
  for (int r : {0, 2}) {
    REQUIRE(after_dispatch[r].size() == 2);
    CHECK(after_dispatch[r][0].dtype == DataType::kInt64);
    CHECK(after_dispatch[r][0].dst == 2 - r);
    CHECK(after_dispatch[r][1].dtype == DataType::kFloat32);
    CHECK(after_dispatch[r][1].dst == 2 - r);
    REQUIRE(after_combine[r].size() == 1);
    CHECK(after_combine[r][0].dtype == DataType::kFloat32);
    CHECK(after_combine[r][0].dst == 2 - r);
  }
  for (int r : {1, 3}) {
    CHECK(after_dispatch[r].empty());
    CHECK(after_combine[r].empty());
  }
}

TEST_CASE("bad input on one rank fails every rank promptly") {
  for (const Variant& v : AllVariants(4)) {
    INFO(v.Name());
    const int world = 4, E = 4;
    const int64_t h = 3;
    auto grid = RankGrid::Create(world, 1, 1, 1, world);
    REQUIRE(grid.ok());
    InProcessHub hub(world);
    std::vector<RankInput> inputs = testing::MakeInputs(world, E, h, 2, 6, Routing::kUniform, 51);
    ++inputs[1].tokens_per_expert[2];  // no longer sums to num_rows
    std::vector<absl::Status> statuses(world);
    RunOnThreads(world, [&](int r) -> std::string {
      DispatcherOptions o;
      o.comm = hub.ForRank(r);
      o.ep_group = grid->ForRank(r)->expert_model_parallel_group();
      o.num_experts = E;
      auto disp = Make(v, o);
      if (!disp.ok()) return disp.status().ToString();
      statuses[r] = DispatchAndWait(**disp, inputs[r].rows.data(), inputs[r].num_rows, h,
                                    inputs[r].tokens_per_expert, kWait)
                        .status();
      return "";
    });
    CHECK(statuses[1].code() == absl::StatusCode::kInvalidArgument);
    CHECK(statuses[1].message().find("EP rank 1") != std::string::npos);
    CHECK(statuses[1].message().find("sums to") != std::string::npos);
    for (int r : {0, 2, 3}) {
      CHECK(statuses[r].code() == absl::StatusCode::kFailedPrecondition);
      CHECK(statuses[r].message().find("EP ranks [1]") != std::string::npos);
    }
  }
}

TEST_CASE("ranks that disagree on the hidden size fail together") {
  for (const Variant& v : AllVariants(2)) {
    INFO(v.Name());
    auto grid = RankGrid::Create(2, 1, 1, 1, 2);
    REQUIRE(grid.ok());
    InProcessHub hub(2);
    std::vector<absl::Status> statuses(2);
    RunOnThreads(2, [&](int r) -> std::string {
      DispatcherOptions o;
      o.comm = hub.ForRank(r);
      o.ep_group = grid->ForRank(r)->expert_model_parallel_group();
      o.num_experts = 2;
      auto disp = Make(v, o);
      const int64_t h = 4 + r;
      std::vector<float> rows(2 * h, 1.0f);
      statuses[r] = DispatchAndWait(**disp, rows.data(), 2, h, {1, 1}, kWait).status();
      return "";
    });
    for (const absl::Status& s : statuses) {
      CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
      CHECK(s.message().find("rank 0: 4, rank 1: 5") != std::string::npos);
    }
  }
}

TEST_CASE("a rank that never arrives gives DeadlineExceeded, not a hang") {
  for (const Variant& v : AllVariants(2)) {
    INFO(v.Name());
    auto grid = RankGrid::Create(2, 1, 1, 1, 2);
    REQUIRE(grid.ok());
    InProcessHub::Options ho;
    ho.timeout = absl::Milliseconds(200);
    InProcessHub hub(2, ho);
    transport::CollectiveWatchdog dog(
        absl::Milliseconds(20), [&hub](absl::Time t) { return hub.CheckTimeouts(t); },
        [](std::vector<absl::Status>) {});
    DispatcherOptions o;
    o.comm = hub.ForRank(0);
    o.ep_group = grid->ForRank(0)->expert_model_parallel_group();
    o.num_experts = 2;
    auto disp = Make(v, o);
    REQUIRE(disp.ok());
    std::vector<float> rows(3 * 4, 0.5f);
    auto got = DispatchAndWait(**disp, rows.data(), 3, 4, {2, 1}, kWait);
    CHECK(got.status().code() == absl::StatusCode::kDeadlineExceeded);
    // The report names the group and the missing rank.
    CHECK(got.status().message().find("expert_model_parallel") != std::string::npos);
  }
}

TEST_CASE("combine rejects a layout of another rank or the wrong row count") {
  auto grid = RankGrid::Create(2, 1, 1, 1, 2);
  REQUIRE(grid.ok());
  InProcessHub hub(2);
  std::vector<RankInput> inputs = testing::MakeInputs(2, 2, 3, 2, 5, Routing::kUniform, 61);
  std::vector<std::shared_ptr<const DispatchLayout>> layouts(2);
  std::vector<std::unique_ptr<TokenDispatcher>> disps(2);
  RequireAllEmpty(RunOnThreads(2, [&](int r) -> std::string {
    DispatcherOptions o;
    o.comm = hub.ForRank(r);
    o.ep_group = grid->ForRank(r)->expert_model_parallel_group();
    o.num_experts = 2;
    disps[r] = *Make({Kind::kAllToAll}, o);
    auto got = DispatchAndWait(*disps[r], inputs[r].rows.data(), inputs[r].num_rows, 3,
                               inputs[r].tokens_per_expert, kWait);
    if (!got.ok()) return got.status().ToString();
    layouts[r] = got->layout;
    return "";
  }));
  std::vector<float> rows(1000);
  auto s = CombineAndWait(*disps[0], layouts[1], rows.data(), layouts[1]->OutputRows(1), kWait);
  CHECK(s.status().code() == absl::StatusCode::kFailedPrecondition);
  s = CombineAndWait(*disps[0], layouts[0], rows.data(), layouts[0]->OutputRows(0) + 1, kWait);
  CHECK(s.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(s.status().message().find("the layout says") != std::string::npos);
  s = CombineAndWait(*disps[0], nullptr, rows.data(), 0, kWait);
  CHECK(s.status().code() == absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("options are validated") {
  auto grid = RankGrid::Create(4, 1, 1, 1, 4);
  REQUIRE(grid.ok());
  InProcessHub hub(4);
  DispatcherOptions o;
  o.comm = hub.ForRank(1);
  o.ep_group = grid->ForRank(1)->expert_model_parallel_group();
  o.num_experts = 6;  // not a multiple of EP 4
  auto a = AllToAllDispatcher::Create(o);
  CHECK(a.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(a.status().message().find("--num-experts 6") != std::string::npos);
  o.num_experts = 8;
  o.comm = hub.ForRank(2);  // endpoint of another rank
  CHECK(AllGatherDispatcher::Create(o).status().code() == absl::StatusCode::kInvalidArgument);
  o.comm = hub.ForRank(1);
  CHECK(HierarchicalDispatcher::Create(o, 0).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(HierarchicalDispatcher::Create(o, 2).ok());
  auto flex = CreateTokenDispatcher("flex", o);
  CHECK(flex.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(flex.status().message().find("alltoall, allgather or hierarchical") != std::string::npos);
  o.comm = nullptr;
  CHECK(AllToAllDispatcher::Create(o).status().code() == absl::StatusCode::kInvalidArgument);
}

// WorkQueue: one thread running continuations in order (stands in for an actor's mailbox).
class WorkQueue {
 public:
  WorkQueue() : thread_([this]() { Run(); }) {}
  ~WorkQueue() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }
  void Post(std::function<void()> fn) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(fn));
  }
  int ran() {
    absl::MutexLock lock(&mu_);
    return ran_;
  }

 private:
  void Run() {
    for (;;) {
      std::function<void()> fn;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](WorkQueue* q) { return q->stop_ || !q->queue_.empty(); }, this));
        if (queue_.empty()) return;
        fn = std::move(queue_.front());
        queue_.erase(queue_.begin());
      }
      fn();
      absl::MutexLock lock(&mu_);
      ++ran_;
    }
  }
  absl::Mutex mu_;
  std::vector<std::function<void()>> queue_;
  bool stop_ = false;
  int ran_ = 0;
  std::thread thread_;
};

TEST_CASE("continuations run through the executor") {
  const int world = 4, E = 8;
  const int64_t h = 5;
  auto grid = RankGrid::Create(world, 1, 1, 1, world);
  REQUIRE(grid.ok());
  InProcessHub hub(world);
  std::vector<RankInput> inputs = testing::MakeInputs(world, E, h, 0, 20, Routing::kZipf, 71);
  std::vector<std::unique_ptr<WorkQueue>> queues(world);
  for (auto& q : queues) q = std::make_unique<WorkQueue>();
  for (const Variant& v : AllVariants(world)) {
    INFO(v.Name());
    RequireAllEmpty(RunOnThreads(world, [&](int r) -> std::string {
      DispatcherOptions o;
      o.comm = hub.ForRank(r);
      o.ep_group = grid->ForRank(r)->expert_model_parallel_group();
      o.num_experts = E;
      WorkQueue* q = queues[r].get();
      o.executor = [q](std::function<void()> fn) { q->Post(std::move(fn)); };
      auto disp = Make(v, o);
      if (!disp.ok()) return disp.status().ToString();
      return testing::CheckOneRank(**disp, inputs, E, h, r, 72, kWait);
    }));
  }
  for (auto& q : queues) CHECK(q->ran() > 0);
}

}  // namespace
}  // namespace mxmaca::layers::moe::dispatch
