// --optimizer-post-validation (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024,
// section 4): stages step optimistically from the partial grad-norm / NaN reduction, and
// the global decision confirms the step or rolls it back (exact copies) and redoes it.
// The results must be BIT-IDENTICAL to the synchronous step, so every check here is
// exact equality against the same run without the flag:
//  - synthetic pipelines (actors/synthetic_stage_program.h) under 1F1B, ZB-H1 and ZB-V,
//    whose gradients are known in closed form, so the clip threshold can be put between
//    the partial norms and the global one: every iteration then has optimistic steps that
//    must be rolled back (and redone clipped) and reports that must wait; one stage
//    injects a NaN into its gradients at one iteration, so optimistic steps are rolled back
//    to a skip and later ones skip optimistically; the run continues past it;
//  - the GPT of the parity tests through `mxmaca train` (api::Train) with a small
//    --clip-grad, under the same three schedules;
// Multi-process jobs: post_validation_multiprocess_test.sh.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "actors/coordinator.h"
#include "actors/data_actor.h"
#include "actors/pipeline_runtime.h"
#include "actors/synthetic_stage_program.h"
#include "layers/lr_schedule.h"
#include "scheduler/schedule_factory.h"
#include "tests/integration/parity_fixture.h"
#include "tests/integration/tiny_corpus.h"

namespace mxmaca::testing {
namespace {

using actors::StageProgram;

// NanInjector: forwards to a stage program; after the W of micro-batch 0 of `iteration`
// (training), one gradient element of that chunk becomes NaN — as an fp overflow would.
class NanInjector : public StageProgram {
 public:
  NanInjector(std::shared_ptr<StageProgram> inner, int64_t iteration)
      : inner_(std::move(inner)), iteration_(iteration) {}
  int num_chunks() const override { return inner_->num_chunks(); }
  absl::Status Forward(const actors::MicroBatchKey& key, const data::GptMicroBatch& batch,
                       const actors::Activation* input, actors::ForwardResult* result) override {
    return inner_->Forward(key, batch, input, result);
  }
  absl::Status BackwardInput(const actors::MicroBatchKey& key,
                             const actors::Activation* d_output, float loss_grad_scale,
                             std::vector<float>* d_input) override {
    return inner_->BackwardInput(key, d_output, loss_grad_scale, d_input);
  }
  absl::Status BackwardWeight(const actors::MicroBatchKey& key) override {
    absl::Status s = inner_->BackwardWeight(key);
    if (s.ok() && !key.eval && key.iteration == iteration_ && key.microbatch == 0) {
      inner_->parameters(key.chunk).grads_arena()[0] = std::numeric_limits<float>::quiet_NaN();
    }
    return s;
  }
  layers::ParameterStore& parameters(int chunk) override { return inner_->parameters(chunk); }
  int tied_embedding_parameter(int chunk) const override {
    return inner_->tied_embedding_parameter(chunk);
  }
  bool is_tied_copy(int chunk, int param) const override {
    return inner_->is_tied_copy(chunk, param);
  }
  bool counts_toward_grad_norm(int chunk, int param) const override {
    return inner_->counts_toward_grad_norm(chunk, param);
  }
  int64_t peak_activation_bytes() const override { return inner_->peak_activation_bytes(); }
  void ResetPeakActivationBytes() override { inner_->ResetPeakActivationBytes(); }

 private:
  std::shared_ptr<StageProgram> inner_;
  int64_t iteration_;
};

// SyntheticRun: a finished synthetic job: its summary and, per rank, every parameter,
// Adam moment and step count flattened.
struct SyntheticRun {
  actors::TrainingSummary summary;
  std::vector<std::vector<float>> state;
};

struct SyntheticCase {
  scheduler::ScheduleKind schedule = scheduler::ScheduleKind::kOneFOneB;
  int32_t p = 4;
  int32_t dp = 1;
  int32_t m = 8;
  int64_t iters = 6;
  double clip_grad = 1.0;
  int32_t nan_stage = -1;  // pipeline rank whose gradients get a NaN at nan_iteration
  int64_t nan_iteration = 3;
  bool post_validation = false;
};

constexpr float kGradPerMicrobatch = 1.0e-3f;  // SyntheticStageOptions' default
constexpr int64_t kParametersPerChunk = 16;

// StageGradNorm: one stage's gradient norm in a synthetic job: each of its v chunks has
// 16 elements, each the sum of m micro-batches' 1e-3.
double StageGradNorm(int32_t v, int32_t m) {
  return std::sqrt(static_cast<double>(v * kParametersPerChunk)) * m * kGradPerMicrobatch;
}

SyntheticRun RunSynthetic(const SyntheticCase& k) {
  actors::SyntheticJobOptions o;
  o.schedule = k.schedule;
  o.pipeline_size = k.p;
  o.data_parallel_size = k.dp;
  o.num_chunks = k.schedule == scheduler::ScheduleKind::kZeroBubbleV ? 2 : 1;
  o.num_microbatches = k.m;
  o.train_iters = k.iters;
  o.parameters_per_chunk = kParametersPerChunk;
  // Tiny declared op times so the stages finish at different moments, as in real runs.
  o.uniform = {2e-4, 2e-4, 1e-4};
  absl::StatusOr<std::vector<actors::PipelineRank>> ranks = actors::BuildSyntheticRanks(o);
  REQUIRE(ranks.ok());
  std::vector<std::shared_ptr<StageProgram>> programs;
  std::vector<std::vector<std::shared_ptr<layers::AdamWOptimizer>>> optimizers;
  for (actors::PipelineRank& r : *ranks) {
    if (r.pipeline_rank == k.nan_stage) {
      r.program = std::make_shared<NanInjector>(r.program, k.nan_iteration);
    }
    programs.push_back(r.program);
    optimizers.push_back(r.optimizers);
  }
  scheduler::ScheduleOptions so;
  so.kind = k.schedule;
  so.num_stages = k.p;
  so.num_chunks = o.num_chunks;
  so.num_microbatches = k.m;
  absl::StatusOr<scheduler::PipelineSchedule> schedule = scheduler::BuildSchedule(so);
  REQUIRE(schedule.ok());
  layers::OptimizerParamSchedulerConfig lr;
  lr.max_lr = 1.0e-2;
  lr.min_lr = 1.0e-3;
  lr.lr_warmup_steps = 2 * k.m * k.dp;  // samples
  lr.lr_decay_steps = k.iters * k.m * k.dp;
  lr.lr_decay_style = layers::LrDecayStyle::kCosine;
  lr.start_wd = lr.end_wd = 0.1;
  absl::StatusOr<layers::OptimizerParamScheduler> lr_scheduler =
      layers::OptimizerParamScheduler::Create(lr);
  REQUIRE(lr_scheduler.ok());
  auto cc = std::make_shared<actors::CoordinatorConfig>();
  cc->train_iters = k.iters;
  cc->global_batch_size = k.m * k.dp;
  cc->micro_batch_size = 1;
  cc->num_microbatches = k.m;
  cc->seq_length = o.seq_length;
  cc->clip_grad = k.clip_grad;
  cc->max_consecutive_nan_iterations = 3;
  cc->log_interval = 0;
  cc->eval_interval = 0;
  cc->eval_iters = 0;
  cc->scheduler = *lr_scheduler;
  cc->train_schedule = std::move(*schedule);
  cc->optimizer_post_validation = k.post_validation;
  actors::DataActorConfig dc;
  dc.train = std::make_shared<actors::SyntheticSampleDataset>(k.iters * k.m * k.dp,
                                                              o.seq_length);
  dc.micro_batch_size = 1;
  dc.seq_length = o.seq_length;
  actors::PipelineRuntimeOptions ro;
  ro.pipeline_size = k.p;
  ro.data_parallel_size = k.dp;
  ro.compute_threads = k.p * k.dp;
  absl::StatusOr<actors::TrainingSummary> summary =
      actors::RunPipelineJob(std::move(*ranks), ro, cc, std::move(dc));
  REQUIRE(summary.ok());
  INFO(summary->error);
  REQUIRE(summary->ok);
  SyntheticRun run;
  run.summary = *summary;
  for (size_t r = 0; r < programs.size(); ++r) {
    std::vector<float> flat;
    for (int c = 0; c < programs[r]->num_chunks(); ++c) {
      const absl::Span<float> p = programs[r]->parameters(c).params_arena();
      flat.insert(flat.end(), p.begin(), p.end());
      layers::AdamWOptimizer& opt = *optimizers[r][c];
      for (size_t i = 0; i < opt.tensors().size(); ++i) {
        flat.insert(flat.end(), opt.exp_avg(i).begin(), opt.exp_avg(i).end());
        flat.insert(flat.end(), opt.exp_avg_sq(i).begin(), opt.exp_avg_sq(i).end());
      }
      flat.push_back(static_cast<float>(opt.step()));
    }
    run.state.push_back(std::move(flat));
  }
  return run;
}

// SameBits: NaN-aware equality of two loss (or norm) sequences: equal values, NaN where
// the other has NaN.
bool SameBits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) return false;
    if (!std::isnan(a[i]) && a[i] != b[i]) return false;
  }
  return true;
}

void CheckSameRun(const SyntheticRun& ref, const SyntheticRun& run) {
  CHECK(SameBits(ref.summary.train_losses, run.summary.train_losses));
  CHECK(SameBits(ref.summary.grad_norms, run.summary.grad_norms));
  CHECK(ref.summary.skipped_iterations == run.summary.skipped_iterations);
  REQUIRE(ref.state.size() == run.state.size());
  for (size_t r = 0; r < ref.state.size(); ++r) {
    INFO("rank " << r);
    CHECK(ref.state[r] == run.state[r]);
  }
}

const char* Name(scheduler::ScheduleKind kind) {
  switch (kind) {
    case scheduler::ScheduleKind::kOneFOneB: return "1f1b";
    case scheduler::ScheduleKind::kZeroBubbleH1: return "zb-h1";
    case scheduler::ScheduleKind::kZeroBubbleV: return "zb-v";
    default: return "other";
  }
}

TEST_CASE("post-validation: rollbacks under clipping and a NaN give the synchronous bits") {
  for (scheduler::ScheduleKind kind :
       {scheduler::ScheduleKind::kOneFOneB, scheduler::ScheduleKind::kZeroBubbleH1,
        scheduler::ScheduleKind::kZeroBubbleV}) {
    SyntheticCase k;
    k.schedule = kind;
    const int32_t v = kind == scheduler::ScheduleKind::kZeroBubbleV ? 2 : 1;
    // Every stage has the same norm n; after j reports the partial norm is sqrt(j) n and
    // the global one (p = 4) 2n. A threshold of 1.5 n: the first two reporters step
    // optimistically (n, 1.41 n < 1.5 n) and must roll back and redo the clipped step
    // (2n > 1.5n); the third waits (1.73 n).
    k.clip_grad = 1.5 * StageGradNorm(v, k.m);
    k.nan_stage = 2;
    INFO(Name(kind) << " clip " << k.clip_grad);
    const SyntheticRun ref = RunSynthetic(k);
    k.post_validation = true;
    const SyntheticRun run = RunSynthetic(k);
    // The scenario happened: the NaN iteration was skipped, steps were clipped.
    CHECK(ref.summary.skipped_iterations == 1);
    REQUIRE(ref.summary.grad_norms.size() == static_cast<size_t>(k.iters));
    CHECK(ref.summary.grad_norms[0] ==
          Approx(2 * StageGradNorm(v, k.m)).epsilon(1e-6));  // clipped: 2n > 1.5n
    CHECK(ref.summary.optimistic_steps_confirmed + ref.summary.optimistic_steps_rolled_back ==
          0);
    // Two rollbacks per iteration from the clipping alone.
    CHECK(run.summary.optimistic_steps_rolled_back >= 2 * (k.iters - 1));
    CheckSameRun(ref, run);
  }
}

TEST_CASE("post-validation: confirmed optimistic steps give the synchronous bits") {
  for (scheduler::ScheduleKind kind :
       {scheduler::ScheduleKind::kOneFOneB, scheduler::ScheduleKind::kZeroBubbleH1,
        scheduler::ScheduleKind::kZeroBubbleV}) {
    for (int dp : {1, 2}) {
      SyntheticCase k;
      k.schedule = kind;
      k.dp = dp;
      k.iters = 5;
      k.clip_grad = 1.0;  // far above the global norm (~0.06): nothing clips
      INFO(Name(kind) << " dp " << dp);
      const SyntheticRun ref = RunSynthetic(k);
      k.post_validation = true;
      const SyntheticRun run = RunSynthetic(k);
      // Every rank but the iteration's last reporter steps optimistically and is confirmed.
      CHECK(run.summary.optimistic_steps_confirmed == (k.p * dp - 1) * k.iters);
      CHECK(run.summary.optimistic_steps_rolled_back == 0);
      CheckSameRun(ref, run);
    }
  }
}

// The GPT of the parity tests (pipeline_parity_test.cc), PP 4.
std::vector<std::string> GptArgs(const ParityCorpus& corpus, const std::string& schedule,
                                 const std::string& clip, bool post_validation,
                                 bool per_token) {
  std::vector<std::string> a = {
      "--num-layers", "8", "--hidden-size", "32", "--num-attention-heads", "4",
      "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size", "1",
      "--global-batch-size", "8", "--train-iters", "10", "--lr", "3e-3", "--min-lr", "3e-4",
      "--lr-decay-style", "cosine", "--lr-warmup-iters", "2", "--weight-decay", "0.1",
      "--clip-grad", clip, "--hidden-dropout", "0.1", "--attention-dropout", "0.1",
      "--eval-interval", "5", "--eval-iters", "1", "--pipeline-model-parallel-size", "4",
      "--world-size", "4", "--untie-embeddings-and-output-weights",
      "--pipeline-schedule", schedule};
  const std::vector<std::string> common = corpus.CommonArgs(kTinyVocab);
  a.insert(a.end(), common.begin(), common.end());
  if (schedule == "zb-v") a.insert(a.end(), {"--num-virtual-stages-per-pipeline-rank", "2"});
  if (post_validation) a.push_back("--optimizer-post-validation");
  if (per_token) a.push_back("--calculate-per-token-loss");
  return a;
}

TEST_CASE("post-validation on the GPT: 1F1B, ZB-H1, ZB-V with clipping give the same bits") {
  ParityCorpus corpus("post_validation");
  int64_t optimistic = 0, rolled_back = 0;
  // With --calculate-per-token-loss a step is optimistic only once the loss head (the
  // last stage in 1F1B, which reports first) has given the global token count.
  for (auto [schedule, per_token] : {std::pair{"1f1b", false}, {"zb-h1", false},
                                     {"zb-v", false}, {"1f1b", true}}) {
    const std::string name = std::string(schedule) + (per_token ? " per-token" : "");
    // The first run finds this seed's grad norms; the clip threshold is then set between
    // the smallest and the largest, so some steps clip and some do not.
    const Run probe = corpus.Train(name + " probe",
                                   GptArgs(corpus, schedule, "1.0", false, per_token), 10);
    std::vector<double> norms = probe.summary.grad_norms;
    std::sort(norms.begin(), norms.end());
    const std::string clip = std::to_string(0.5 * (norms.front() + norms[norms.size() / 2]));
    const Run ref = corpus.Train(name + " sync clip " + clip,
                                 GptArgs(corpus, schedule, clip, false, per_token), 10);
    const Run run = corpus.Train(name + " post-validation clip " + clip,
                                 GptArgs(corpus, schedule, clip, true, per_token), 10);
    INFO(run.log);
    CheckBitIdentical(ref, run);
    CHECK(ref.summary.optimistic_steps_confirmed == 0);
    optimistic += run.summary.optimistic_steps_confirmed + run.summary.optimistic_steps_rolled_back;
    rolled_back += run.summary.optimistic_steps_rolled_back;
    if (per_token) {
      CHECK(run.summary.optimistic_steps_confirmed + run.summary.optimistic_steps_rolled_back >
            0);
    }
    WARN(name << ": clip " << clip << ", optimistic steps confirmed "
                  << run.summary.optimistic_steps_confirmed << ", rolled back "
                  << run.summary.optimistic_steps_rolled_back);
  }
  CHECK(optimistic > 0);
  CHECK(rolled_back > 0);
}

}  // namespace
}  // namespace mxmaca::testing
