// api/calibrate/calibrate_command_test.cc: a tiny calibration end to end (a 1-layer model,
// 1 repeat): every measured field is positive, the file round-trips and `simulate
// --cost-table` uses it.
#include "api/calibrate/calibrate_command.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "api/calibrate/cost_table.h"
#include "api/simulate/simulate_command.h"
#include "api/simulate/step_model.h"

namespace mxmaca::api {
namespace {

const std::vector<std::string> kModel = {
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
    "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size", "2",
    "--tokenizer-type", "NullTokenizer", "--vocab-size", "255"};

TEST_CASE("calibrate: measures every op and simulate reads the table") {
  CalibrateOptions o;
  o.tp_sizes = {1, 2};
  o.concurrency = {1, 2};
  o.repeats = 1;
  std::string log;
  auto table = Calibrate(kModel, o, &log);
  REQUIRE(table.ok());
  CHECK(table->threads_per_op == 1);  // no --num-threads in kModel
  // TP 1 x concurrency {1, 2} + TP 2 (with and without SP) x concurrency 1, three entries
  // each: the layer (kModel has 2 layers, so the two measured depths coincide), the
  // embedding and the loss head.
  CHECK(table->ops.size() == 12);
  for (const CostEntry& e : table->ops) {
    // Every op does some work in F and W (B of the embedding is empty on the first stage).
    CHECK(e.seconds[0] > 0);
    CHECK(e.seconds[2] > 0);
    CHECK(e.work[0] > 0);
  }
  CHECK(table->gemm_gflops > 0);
  CHECK(table->optimizer_seconds_per_parameter > 0);
  // The runtime terms are differences of measured steps (clamped at 0 under heavy load).
  CHECK(table->step_overhead_s >= 0);
  CHECK(table->op_overhead_s >= 0);
  CHECK(table->p2p.latency_s >= 0);
  CHECK(table->allreduce.Seconds(1 << 24) > table->allreduce.Seconds(1 << 20));
  CHECK(log.find("layer") != std::string::npos);

  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/calibrate_test.json";
  REQUIRE(SaveCostTable(*table, path).ok());
  std::vector<std::string> argv = kModel;
  for (const char* x : {"--global-batch-size", "8", "--world-size", "4",
                        "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size",
                        "2", "--num-threads", "2", "--cost-table"}) {
    argv.push_back(x);
  }
  argv.push_back(path);
  auto job = PrepareSimulation(argv);
  REQUIRE(job.ok());
  auto step = SimulateStep(job->inputs);
  REQUIRE(step.ok());
  CHECK(step->workers == 1);  // TP 2 on 2 cores: one TP group runs at a time
  CHECK(step->step_seconds > step->timing.makespan);
}

TEST_CASE("calibrate: threads per op follow --num-threads unless given") {
  CalibrateOptions o;
  o.repeats = 1;
  o.skip_runtime = true;
  std::vector<std::string> argv = kModel;
  argv.push_back("--num-threads");
  argv.push_back("2");
  auto two = Calibrate(argv, o, nullptr);
  REQUIRE(two.ok());
  CHECK(two->threads_per_op == 2);
  o.threads_per_op = 1;
  auto one = Calibrate(argv, o, nullptr);
  REQUIRE(one.ok());
  CHECK(one->threads_per_op == 1);
}

TEST_CASE("calibrate: flag errors") {
  CHECK(RunCalibrate(kModel).message().find("--output FILE") != absl::string_view::npos);
  std::vector<std::string> bad = kModel;
  for (const char* x : {"--output", "/tmp/x.json", "--calibrate-tp", "1,zero"}) bad.push_back(x);
  CHECK(RunCalibrate(bad).message().find("--calibrate-tp '1,zero'") != absl::string_view::npos);
}

}  // namespace
}  // namespace mxmaca::api
