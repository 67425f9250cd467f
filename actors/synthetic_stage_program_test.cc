// actors/synthetic_stage_program_test.cc: SyntheticStageProgram honours its declared
// times, shapes and stash, and whole synthetic jobs run through RunPipelineJob (incl.
// failure injection ending the job with a summary that names the failing op).
#include "actors/synthetic_stage_program.h"

#include <chrono>
#include <cmath>
#include <random>
#include <string>

#include <catch2/catch.hpp>

#include "scheduler/schedule_factory.h"
#include "scheduler/schedule_simulator.h"

namespace mxmaca::actors {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

MicroBatchKey Key(int32_t microbatch, int32_t chunk = 0, int64_t iteration = 1) {
  MicroBatchKey k;
  k.iteration = iteration;
  k.microbatch = microbatch;
  k.chunk = chunk;
  k.global_microbatch = microbatch;
  return k;
}

TEST_CASE("SyntheticStageProgram: F, B and W take at least their declared times") {
  SyntheticStageOptions o;
  o.chunks = {{0.020, 0.010, 0.005}};  // one stage holding both ends (p = 1)
  auto program = SyntheticStageProgram::Create(o);
  REQUIRE(program.ok());
  data::GptMicroBatch batch;
  ForwardResult fr;
  std::vector<float> d_input;
  // sleep_until never returns early, so each lower bound holds on any machine; upper
  // bounds are not asserted (a loaded CI machine may wake a thread late).
  for (int mb = 0; mb < 2; ++mb) {
    auto t0 = Clock::now();
    REQUIRE((*program)->Forward(Key(mb), batch, nullptr, &fr).ok());
    CHECK(Seconds(t0) >= 0.020);
    t0 = Clock::now();
    REQUIRE((*program)->BackwardInput(Key(mb), nullptr, 1.0f, &d_input).ok());
    CHECK(Seconds(t0) >= 0.010);
    t0 = Clock::now();
    REQUIRE((*program)->BackwardWeight(Key(mb)).ok());
    CHECK(Seconds(t0) >= 0.005);
  }
  CHECK(d_input.empty());  // the first virtual stage sends no input gradient
}

TEST_CASE("SyntheticStageProgram: outputs, loss, payload and stash follow the declaration") {
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<int64_t> dim(1, 9);
  const int64_t b = dim(rng), s = dim(rng), h = dim(rng);
  const double loss = std::uniform_real_distribution<double>(0.5, 11.0)(rng);
  SyntheticStageOptions first;
  first.pipeline_rank = 0;
  first.pipeline_size = 2;
  first.micro_batch_size = b;
  first.seq_length = s;
  first.hidden_size = h;
  first.real_payload = true;
  first.loss_per_token = loss;
  SyntheticStageOptions last = first;
  last.pipeline_rank = 1;
  auto p0 = SyntheticStageProgram::Create(first);
  auto p1 = SyntheticStageProgram::Create(last);
  REQUIRE(p0.ok());
  REQUIRE(p1.ok());
  const int64_t stash = b * s * h * 4;
  CHECK((*p0)->stash_bytes() == stash);

  data::GptMicroBatch batch;
  ForwardResult f0, f1;
  REQUIRE((*p0)->Forward(Key(0), batch, nullptr, &f0).ok());
  CHECK(f0.output_shape == std::vector<int64_t>{b, s, h});
  CHECK(static_cast<int64_t>(f0.output.size()) == b * s * h);
  const Activation a0{f0.output_shape, std::make_shared<const std::vector<float>>(f0.output)};
  CHECK(f0.loss_sum == 0.0);
  // The last stage rejects a missing input, then produces the declared loss.
  CHECK((*p1)->Forward(Key(0), batch, nullptr, &f1).code() ==
        absl::StatusCode::kInvalidArgument);
  REQUIRE((*p1)->Forward(Key(0), batch, &a0, &f1).ok());
  CHECK(f1.num_tokens == static_cast<double>(b * s));
  CHECK(f1.loss_sum == Approx(loss * static_cast<double>(b * s)).epsilon(1e-12));
  CHECK(f1.output.empty());

  std::vector<float> g1, g0;
  REQUIRE((*p1)->BackwardInput(Key(0), nullptr, 1.0f, &g1).ok());
  CHECK(static_cast<int64_t>(g1.size()) == b * s * h);
  const Activation a1{{b, s, h}, std::make_shared<const std::vector<float>>(g1)};
  REQUIRE((*p0)->BackwardInput(Key(0), &a1, 1.0f, &g0).ok());
  CHECK(g0.empty());

  // Stash: two F on stage 0 hold two stashes; W frees them; B/W without F fail.
  REQUIRE((*p0)->Forward(Key(1), batch, nullptr, &f0).ok());
  CHECK((*p0)->live_activation_bytes() == 2 * stash);
  CHECK((*p0)->peak_activation_bytes() == 2 * stash);
  REQUIRE((*p0)->BackwardWeight(Key(0)).ok());
  REQUIRE((*p0)->BackwardWeight(Key(1)).ok());
  CHECK((*p0)->live_activation_bytes() == 0);
  CHECK((*p0)->peak_activation_bytes() == 2 * stash);
  (*p0)->ResetPeakActivationBytes();
  CHECK((*p0)->peak_activation_bytes() == 0);
  CHECK((*p0)->BackwardWeight(Key(1)).code() == absl::StatusCode::kFailedPrecondition);
  CHECK((*p0)->BackwardInput(Key(5), &a1, 1.0f, &g0).code() ==
        absl::StatusCode::kFailedPrecondition);
  CHECK((*p0)->Forward(Key(0, /*chunk=*/1), batch, nullptr, &f0).code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("SyntheticStageProgram: invalid options are rejected naming the field") {
  SyntheticStageOptions o;
  o.pipeline_rank = 3;
  o.pipeline_size = 2;
  auto bad_rank = SyntheticStageProgram::Create(o);
  REQUIRE(!bad_rank.ok());
  CHECK(std::string(bad_rank.status().message()).find("pipeline rank 3") != std::string::npos);
  o = SyntheticStageOptions();
  o.chunks = {{0.001, -1.0, 0.0}};
  auto bad_time = SyntheticStageProgram::Create(o);
  REQUIRE(!bad_time.ok());
  CHECK(std::string(bad_time.status().message()).find("B -1") != std::string::npos);
}

TEST_CASE("RunSyntheticJob: a one-rank job completes its iterations with the declared loss") {
  std::mt19937 rng(7);
  SyntheticJobOptions o;
  o.pipeline_size = 1;
  o.num_microbatches = 4;
  o.train_iters = 3;
  o.uniform = {0.001, 0.001, 0.001};
  o.loss_per_token = std::uniform_real_distribution<double>(1.0, 9.0)(rng);
  o.parameters_per_chunk = 20;  // padded to 32 in the arena: padding must not count
  absl::StatusOr<TrainingSummary> summary = RunSyntheticJob(o);
  REQUIRE(summary.ok());
  INFO(summary->error);
  REQUIRE(summary->ok);
  CHECK(summary->last_iteration == 3);
  REQUIRE(summary->train_losses.size() == 3);
  // Per-token loss: (sum over micro-batches of loss * b * s) / (m * b * s); tolerance is
  // fp64 rounding of a handful of sums.
  for (double l : summary->train_losses) CHECK(l == Approx(o.loss_per_token).epsilon(1e-12));
  // W adds 1e-3 per micro-batch to each of the 20 gradient elements: norm m * 1e-3 * sqrt(20)
  // (fp32 accumulation of 4 terms: relative error well under 1e-6).
  REQUIRE(summary->grad_norms.size() == 3);
  for (double g : summary->grad_norms) CHECK(g == Approx(4 * 1.0e-3 * std::sqrt(20.0)).epsilon(1e-6));
}

TEST_CASE("RunSyntheticJob: PP x DP interleaved job: grad averaging and per-rank stash peaks") {
  for (bool distributed : {false, true}) {
    SyntheticJobOptions o;
    o.schedule = scheduler::ScheduleKind::kInterleaved1F1B;
    o.pipeline_size = 2;
    o.data_parallel_size = 2;
    o.num_chunks = 2;
    o.num_microbatches = 4;
    o.train_iters = 2;
    o.uniform = {0.0005, 0.0005, 0.0005};
    o.stash_bytes = 1000;
    o.distributed_optimizer = distributed;
    absl::StatusOr<TrainingSummary> summary = RunSyntheticJob(o);
    REQUIRE(summary.ok());
    INFO(summary->error);
    REQUIRE(summary->ok);
    CHECK(summary->last_iteration == 2);
    // DP averages two equal replicas: every virtual stage's 16 elements hold m * 1e-3; four
    // virtual stages: norm = m * 1e-3 * sqrt(4 * 16).
    for (double g : summary->grad_norms) CHECK(g == Approx(4 * 1.0e-3 * 8.0).epsilon(1e-6));
    // Peak stash per rank = the scheduler's count of (micro-batch, chunk) stashes held at
    // once on its pipeline rank, times the declared bytes.
    scheduler::ScheduleOptions so;
    so.kind = o.schedule;
    so.num_stages = 2;
    so.num_chunks = 2;
    so.num_microbatches = 4;
    auto schedule = scheduler::BuildSchedule(so);
    REQUIRE(schedule.ok());
    const std::vector<int32_t> peaks = scheduler::PeakStashedMicrobatches(*schedule);
    REQUIRE(summary->rank_peak_activation_bytes.size() == 4);
    for (int rank = 0; rank < 4; ++rank) {
      CHECK(summary->rank_peak_activation_bytes[rank] == 1000LL * peaks[rank / 2]);
    }
    REQUIRE(summary->stage_bubble_fraction.size() == 2);
  }
}

TEST_CASE("RunSyntheticJob: an injected failure ends the job naming stage, iteration, "
          "micro-batch and op") {
  SECTION("returned error") {
    SyntheticJobOptions o;
    o.pipeline_size = 2;
    o.num_microbatches = 4;
    o.train_iters = 3;
    o.uniform = {0.0005, 0.0005, 0.0005};
    SyntheticFailure f;
    f.kind = SyntheticFailureKind::kReturnError;
    f.iteration = 2;
    f.microbatch = 1;
    f.op = scheduler::OpKind::kBackwardInput;
    o.failures = {{1, f}};
    absl::StatusOr<TrainingSummary> summary = RunSyntheticJob(o);
    REQUIRE(summary.ok());
    CHECK(!summary->ok);
    INFO(summary->error);
    CHECK(summary->error.find("stage 1 failed at iteration 2, micro-batch 1, op B1") !=
          std::string::npos);
    CHECK(summary->error.find("injected failure") != std::string::npos);
  }
  SECTION("exception, on a data-parallel rank") {
    SyntheticJobOptions o;
    o.schedule = scheduler::ScheduleKind::kGPipe;
    o.pipeline_size = 2;
    o.data_parallel_size = 2;
    o.num_microbatches = 3;
    o.train_iters = 2;
    SyntheticFailure f;
    f.kind = SyntheticFailureKind::kThrow;
    f.iteration = 1;
    f.microbatch = 2;
    f.op = scheduler::OpKind::kBackwardWeight;
    o.failures = {{1, f}};  // rank 1 = pipeline rank 0, data-parallel rank 1
    absl::StatusOr<TrainingSummary> summary = RunSyntheticJob(o);
    REQUIRE(summary.ok());
    CHECK(!summary->ok);
    INFO(summary->error);
    CHECK(summary->error.find("stage 0 (data-parallel rank 1) failed at iteration 1, "
                              "micro-batch 2, op W2") != std::string::npos);
    CHECK(summary->error.find("injected exception") != std::string::npos);
  }
}

}  // namespace
}  // namespace mxmaca::actors
