// Tests the log lines against Megatron's format strings (training.py training_log and
// evaluate_and_print_results, core_v0.15.0) written out here.
#include "actors/training_log.h"

#include <catch2/catch.hpp>
#include <regex>

namespace mxmaca::actors {
namespace {

TEST_CASE("iteration line has Megatron's segments in Megatron's order and format") {
  IterationLogRecord r;
  r.now = absl::FromUnixSeconds(1700000000);
  r.iteration = 20;
  r.train_iters = 300;
  r.consumed_samples = 160;
  r.elapsed_ms_per_iteration = 1234.56;
  r.tflops_per_device = 0.04;
  r.learning_rate = 3e-4;
  r.global_batch_size = 8;
  r.lm_loss = 7.25;
  r.grad_norm = 1.23456;
  r.tokens_per_second = 1660.2;
  r.model_gflops_per_second = 150.0;
  r.gemm_peak_gflops = 300.0;
  const std::string line = FormatIterationLog(r);
  const std::regex megatron(
      R"(^ \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] iteration       20/     300 \| consumed samples:          160 \| )"
      R"(elapsed time per iteration \(ms\): 1234\.6 \| throughput per GPU \(TFLOP/s/GPU\): 0\.0 \| )"
      R"(learning rate: 3\.000000E-04 \| global batch size:     8 \| lm loss: 7\.250000E\+00 \| )"
      R"(loss scale: 1\.0 \| grad norm: 1\.235 \| number of skipped iterations:   0 \| )"
      R"(number of nan iterations:   0 \|)");
  INFO(line);
  CHECK(std::regex_search(line, megatron));
  CHECK(line.find("MFU (vs measured GEMM peak 300 GFLOP/s): 50.0% |") != std::string::npos);
  CHECK(line.back() == '|');
}

TEST_CASE("--log-params-norm adds Megatron's params norm segment after grad norm") {
  // training.py (core_v0.19.0) training_log: f' grad norm: {grad_norm:.3f} |', then
  // (num zeros), then f' params norm: {params_norm:.3f} |' when params_norm is not None.
  IterationLogRecord r;
  r.grad_norm = 1.23456;
  CHECK(FormatIterationLog(r).find("params norm") == std::string::npos);
  r.params_norm = 12.3456;
  CHECK(FormatIterationLog(r).find(" grad norm: 1.235 | params norm: 12.346 | number of skipped "
                                   "iterations:") != std::string::npos);
  // --log-num-zeros-in-grad: f' num zeros: {num_zeros_in_grad} |' between the two.
  r.num_zeros_in_grad = 4064;
  CHECK(FormatIterationLog(r).find(" grad norm: 1.235 | num zeros: 4064 | params norm: 12.346 |") !=
        std::string::npos);
}

TEST_CASE("validation block is framed by dashes one longer than the line") {
  const std::string block = FormatValidationLog("iteration 100", 5.0);
  const std::string line =
      " validation loss at iteration 100 | lm loss value: 5.000000E+00 | lm loss PPL: "
      "1.484132E+02 | ";
  const std::string dashes(line.size() + 1, '-');
  CHECK(block == dashes + "\n" + line + "\n" + dashes);
}

}  // namespace
}  // namespace mxmaca::actors
