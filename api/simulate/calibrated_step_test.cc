// api/simulate/calibrated_step_test.cc: the shared-worker replay and `simulate
// --cost-table` against hand-computed step times.
#include "api/simulate/calibrated_step.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "api/calibrate/cost_table.h"
#include "api/simulate/shared_worker_replay.h"
#include "api/simulate/simulate_command.h"
#include "scheduler/schedule_factory.h"
#include "scheduler/schedule_simulator.h"

namespace mxmaca::api {
namespace {

scheduler::PipelineSchedule Schedule(scheduler::ScheduleKind kind, int p, int v, int m) {
  scheduler::ScheduleOptions o;
  o.kind = kind;
  o.num_stages = p;
  o.num_chunks = v;
  o.num_microbatches = m;
  auto s = scheduler::BuildSchedule(o);
  REQUIRE(s.ok());
  return *s;
}

scheduler::OpCosts RandomCosts(int p, uint32_t seed, double latency, bool fused) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.5, 2.0);
  scheduler::OpCosts c;
  for (int s = 0; s < p; ++s) c.per_stage.push_back({u(rng), u(rng), u(rng)});
  c.comm_latency = latency;
  c.fused_backward = fused;
  return c;
}

TEST_CASE("shared-worker replay: enough workers reproduce SimulateSchedule") {
  for (auto [kind, v] : {std::pair{scheduler::ScheduleKind::kOneFOneB, 1},
                         {scheduler::ScheduleKind::kInterleaved1F1B, 2},
                         {scheduler::ScheduleKind::kZeroBubbleH1, 1}}) {
    const auto schedule = Schedule(kind, 4, v, 8);
    const bool fused = kind != scheduler::ScheduleKind::kZeroBubbleH1;
    const auto costs = RandomCosts(4, 11, 0.3, fused);
    auto ref = scheduler::SimulateSchedule(schedule, costs);
    REQUIRE(ref.ok());
    auto got = ReplayOnSharedWorkers(schedule, costs, 1, 4);
    REQUIRE(got.ok());
    CHECK(got->makespan == Approx(ref->makespan).epsilon(1e-12));
    for (int s = 0; s < 4; ++s) {
      for (size_t i = 0; i < schedule.stages[s].size(); ++i) {
        CHECK(got->ops[s][i].start == Approx(ref->ops[s][i].start).margin(1e-12));
      }
    }
  }
}

TEST_CASE("shared-worker replay: one worker serialises every rank's work") {
  const auto schedule = Schedule(scheduler::ScheduleKind::kOneFOneB, 4, 1, 8);
  const auto costs = RandomCosts(4, 3, 0.0, true);
  double total = 0;
  for (const auto& c : costs.per_stage) total += 8 * (c[0] + c[1] + c[2]);
  for (int replicas : {1, 2}) {
    auto got = ReplayOnSharedWorkers(schedule, costs, replicas, 1);
    REQUIRE(got.ok());
    // Without message latency some op is always ready, so the one worker never idles.
    CHECK(got->makespan == Approx(replicas * total).epsilon(1e-12));
  }
  // Two workers and two replicas of a single stage: each replica gets a worker.
  const auto single = Schedule(scheduler::ScheduleKind::kOneFOneB, 1, 1, 5);
  const auto c1 = RandomCosts(1, 4, 0.0, true);
  auto two = ReplayOnSharedWorkers(single, c1, 2, 2);
  REQUIRE(two.ok());
  CHECK(two->makespan == Approx(5 * (c1.per_stage[0][0] + c1.per_stage[0][1] + c1.per_stage[0][2])));
  CHECK_FALSE(ReplayOnSharedWorkers(single, c1, 1, 0).ok());
}

// A table with the model below's exact shapes (so no scaling applies).
CostTable TableFor(double p2p_latency) {
  OpShape x;
  x.b = 2;
  x.s = 64;
  x.h = 128;
  x.a = 4;
  x.g = 4;
  x.d = 32;
  x.f = 512;
  x.f1 = 512;
  x.V = 1024;
  CostTable t;
  t.cores = 2;
  t.threads_per_op = 1;
  t.gemm_gflops = 100;
  const std::array<std::array<double, 3>, 3> secs = {
      {{3e-3, 5e-3, 4e-3}, {2e-4, 1e-5, 3e-4}, {6e-3, 7e-3, 5e-3}}};
  int i = 0;
  for (CostOpKind op : {CostOpKind::kLayer, CostOpKind::kEmbedding, CostOpKind::kLossHead}) {
    CostEntry e;
    e.op = op;
    e.work = WorkOf(op, x);
    e.seconds = secs[i++];
    t.ops.push_back(e);
  }
  t.optimizer_seconds_per_parameter = 2e-9;
  t.allreduce = {5e-5, 1e-10};
  t.p2p = {p2p_latency, 0};
  t.op_overhead_s = 2e-5;
  t.step_overhead_s = 1e-3;
  return t;
}

absl::StatusOr<StepResult> Run(const CostTable& table, std::vector<std::string> layout) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/calibrated_step_test.json";
  REQUIRE(SaveCostTable(table, path).ok());
  std::vector<std::string> argv = {
      "--num-layers", "2", "--hidden-size", "128", "--num-attention-heads", "4",
      "--seq-length", "64", "--max-position-embeddings", "64", "--micro-batch-size", "2",
      "--global-batch-size", "8", "--tokenizer-type", "NullTokenizer", "--vocab-size", "1023",
      "--cost-table", path};
  argv.insert(argv.end(), layout.begin(), layout.end());
  auto job = PrepareSimulation(argv);
  if (!job.ok()) return job.status();
  REQUIRE(job->inputs.model.padded_vocab_size == 1024);
  return SimulateStep(job->inputs);
}

TEST_CASE("simulate --cost-table: one rank's step by hand") {
  const CostTable t = TableFor(0);
  auto r = Run(t, {"--world-size", "1", "--num-threads", "1"});
  REQUIRE(r.ok());
  // 4 micro-batches, each F + B + W of 2 layers, the embedding and the loss head, plus the
  // turnaround per op; then AdamW over the stage's parameters and the step overhead.
  double per_mb = 0;
  for (int k = 0; k < 3; ++k) {
    per_mb += 2 * t.ops[0].seconds[k] + t.ops[1].seconds[k] + t.ops[2].seconds[k] + 2e-5;
  }
  const double expected = 4 * per_mb +
                          static_cast<double>(r->stages[0].parameters) * 2e-9 + 1e-3;
  CHECK(r->workers == 1);
  CHECK(r->step_seconds == Approx(expected).epsilon(1e-9));
}

TEST_CASE("simulate --cost-table: PP 2 on one pool thread serialises, on two overlaps") {
  const CostTable t = TableFor(0);
  auto one = Run(t, {"--world-size", "2", "--pipeline-model-parallel-size", "2",
                     "--num-threads", "1"});
  auto two = Run(t, {"--world-size", "2", "--pipeline-model-parallel-size", "2",
                     "--num-threads", "2"});
  REQUIRE(one.ok());
  REQUIRE(two.ok());
  CHECK(one->workers == 1);
  CHECK(two->workers == 2);
  // One thread: all of both stages' ops back to back (no latency, never idle).
  double busy = 0;
  for (const StageResult& st : one->stages) {
    busy += 4 * (st.op[0].total() + st.op[1].total() + st.op[2].total());
  }
  const double tail = one->step_seconds - one->timing.makespan;
  CHECK(one->timing.makespan == Approx(busy).epsilon(1e-9));
  // Two threads: the 1F1B replay of SimulateSchedule with the same per-stage op times.
  scheduler::OpCosts costs;
  for (const StageResult& st : two->stages) {
    costs.per_stage.push_back({st.op[0].total(), st.op[1].total(), st.op[2].total()});
  }
  costs.fused_backward = true;
  auto schedule = Schedule(scheduler::ScheduleKind::kOneFOneB, 2, 1, 4);
  auto ref = scheduler::SimulateSchedule(schedule, costs);
  REQUIRE(ref.ok());
  CHECK(two->timing.makespan == Approx(ref->makespan).epsilon(1e-9));
  CHECK(two->step_seconds < one->step_seconds);
  CHECK(tail > 1e-3);  // the optimizer and step overhead follow the pipeline
}

TEST_CASE("simulate --cost-table: a TP size the table lacks is an error naming it") {
  auto r = Run(TableFor(0), {"--world-size", "2", "--tensor-model-parallel-size", "2"});
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.status().message()).find("tp 2") != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::api
