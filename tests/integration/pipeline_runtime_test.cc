// Runtime tests of in-process pipeline (PP) x data parallel (DP) jobs
// (actors::RunPipelineJob): stage actors run exactly the op lists they are handed
// (checked in the --trace-file timeline), bad op lists and layouts are refused before
// anything runs, 1F1B / GPipe stash no more micro-batches than the schedule implies,
// a failing or throwing stage and a stuck or mismatched collective end the job promptly
// with a report, and 8-rank grids match the single-device run.
//
// The jobs are built the way `mxmaca train` builds them (api/train/train_command.cc):
// api::BuildStageRanks over a pipeline placement of a tiny GPT, a CoordinatorConfig with
// Megatron's linear LR schedule, a DataActorConfig over a seeded random-token dataset —
// but the tests hand the coordinator their own (hand-written) schedules and wrap stage
// programs to inject faults.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "actors/pipeline_runtime.h"
#include "actors/stage_program.h"
#include "api/train/stage_ranks.h"
#include "api/train/train_command.h"
#include "data/gpt_dataset.h"
#include "layers/gpt_config.h"
#include "layers/grad_buckets.h"
#include "layers/lr_schedule.h"
#include "layers/pipeline_placement.h"
#include "layers/stage_memory.h"
#include "layers/testing/gpt_test_configs.h"
#include "scheduler/pipeline_schedule.h"
#include "scheduler/schedule_factory.h"
#include "scheduler/schedule_validator.h"

namespace mxmaca::testing {
namespace {

using scheduler::OpKind;
using scheduler::PipelineOp;
using scheduler::PipelineSchedule;
using Clock = std::chrono::steady_clock;

// ---- the model and the data ----

// TinyConfig: the GPT of the task's tiny run (--num-layers 4 --hidden-size 32
// --num-attention-heads 4 --seq-length 16, NullTokenizer --vocab-size 5000: V = 5001,
// padded to a multiple of 128), with Megatron's default dropouts so that the dropout keys
// (iteration, global micro-batch) are exercised too.
layers::GptConfig TinyConfig(int64_t num_layers = 4) {
  return layers::testing::Gpt2StyleConfig({num_layers, 32, 128, 4, 16, 16, 5001, 5120}, /*seed=*/4321);
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// RandomTokenDataset: `size` samples of seq_length + 1 tokens, token j of sample i a hash
// of (seed, i, j) in [0, vocab): random, but the same on every call and every rank.
class RandomTokenDataset : public data::SampleDataset {
 public:
  RandomTokenDataset(int64_t size, int64_t seq_length, int64_t vocab, uint64_t seed)
      : size_(size), length_(seq_length + 1), vocab_(vocab), seed_(seed) {}
  int64_t size() const override { return size_; }
  int64_t sample_length() const override { return length_; }
  absl::Status GetSample(int64_t i, absl::Span<int32_t> out) const override {
    if (i < 0 || i >= size_) {
      return absl::OutOfRangeError(absl::StrCat("sample ", i, " of ", size_));
    }
    if (static_cast<int64_t>(out.size()) != length_) {
      return absl::InvalidArgumentError("wrong sample buffer size");
    }
    for (int64_t j = 0; j < length_; ++j) {
      const uint64_t h = SplitMix64(seed_ ^ SplitMix64(static_cast<uint64_t>(i * length_ + j)));
      out[j] = static_cast<int32_t>(h % static_cast<uint64_t>(vocab_));
    }
    return absl::OkStatus();
  }

 private:
  int64_t size_, length_, vocab_;
  uint64_t seed_;
};

// ---- fault injection ----

// Fault: what FaultyProgram does when it runs `kind` of `microbatch` in `iteration`.
struct Fault {
  enum class Action { kError, kThrow, kSleep };
  int64_t iteration = 0;
  int32_t microbatch = 0;
  OpKind kind = OpKind::kForward;
  Action action = Action::kError;
  std::chrono::milliseconds sleep{0};  // kSleep: then run the op normally
};

// FaultyProgram: a StageProgram that delegates every call to `inner` (a GptStageProgram)
// except the one op `fault` names, where it returns an error, throws, or sleeps first.
// Counts the F/B/W calls it sees (from the strand; read after the job).
class FaultyProgram : public actors::StageProgram {
 public:
  FaultyProgram(std::shared_ptr<actors::StageProgram> inner, std::optional<Fault> fault)
      : inner_(std::move(inner)), fault_(fault) {}

  int num_chunks() const override { return inner_->num_chunks(); }
  absl::Status Forward(const actors::MicroBatchKey& key, const data::GptMicroBatch& batch,
                       const actors::Activation* input, actors::ForwardResult* result) override {
    if (absl::Status s = Inject(key, OpKind::kForward); !s.ok()) return s;
    return inner_->Forward(key, batch, input, result);
  }
  absl::Status BackwardInput(const actors::MicroBatchKey& key, const actors::Activation* d_output,
                             float loss_grad_scale, std::vector<float>* d_input) override {
    if (absl::Status s = Inject(key, OpKind::kBackwardInput); !s.ok()) return s;
    return inner_->BackwardInput(key, d_output, loss_grad_scale, d_input);
  }
  absl::Status BackwardWeight(const actors::MicroBatchKey& key) override {
    if (absl::Status s = Inject(key, OpKind::kBackwardWeight); !s.ok()) return s;
    return inner_->BackwardWeight(key);
  }
  layers::ParameterStore& parameters(int chunk) override { return inner_->parameters(chunk); }
  int tied_embedding_parameter(int chunk) const override {
    return inner_->tied_embedding_parameter(chunk);
  }
  bool is_tied_copy(int chunk, int param) const override {
    return inner_->is_tied_copy(chunk, param);
  }
  int64_t peak_activation_bytes() const override { return inner_->peak_activation_bytes(); }
  void ResetPeakActivationBytes() override { inner_->ResetPeakActivationBytes(); }

  int calls() const { return calls_.load(); }

 private:
  absl::Status Inject(const actors::MicroBatchKey& key, OpKind kind) {
    ++calls_;
    if (!fault_ || key.eval || key.iteration != fault_->iteration ||
        key.microbatch != fault_->microbatch || kind != fault_->kind) {
      return absl::OkStatus();
    }
    switch (fault_->action) {
      case Fault::Action::kError:
        return absl::InternalError("injected failure (test)");
      case Fault::Action::kThrow:
        throw std::runtime_error("injected exception (test)");
      case Fault::Action::kSleep:
        std::this_thread::sleep_for(fault_->sleep);
        return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  std::shared_ptr<actors::StageProgram> inner_;
  std::optional<Fault> fault_;
  std::atomic<int> calls_{0};
};

// ---- building and running a job ----

// JobSpec: one in-process job. The schedule is `schedule` when set, else BuildSchedule of
// `kind` (interleaved with v > 1).
struct JobSpec {
  int32_t p = 1, dp = 1;
  std::optional<int64_t> layers_per_virtual_stage;  // --num-layers-per-virtual-pipeline-stage
  int64_t num_layers = 4;
  int64_t global_batch = 8, micro_batch = 1;
  int64_t iterations = 3;
  scheduler::ScheduleKind kind = scheduler::ScheduleKind::kOneFOneB;
  std::optional<PipelineSchedule> schedule;
  bool distributed_optimizer = false;
  bool overlap_grad_reduce = false, overlap_param_gather = false;
  std::optional<std::string> trace_file;
  absl::Duration collective_timeout = absl::Minutes(10);
  // fault[rank]: the fault injected into that rank's program (every rank is wrapped).
  std::map<int, Fault> faults;
  // bucket_elements[rank]: a different --ddp-bucket-size for that rank's buckets.
  std::map<int, int64_t> bucket_elements;
};

struct JobResult {
  absl::StatusOr<actors::TrainingSummary> summary;
  double seconds = 0.0;                     // RunPipelineJob's wall time
  layers::GptConfig model;
  layers::PipelinePlacement placement;
  std::vector<api::StageRank> ranks;        // their parameters after the job
  std::vector<std::shared_ptr<FaultyProgram>> programs;  // by rank
};

int32_t Microbatches(const JobSpec& s) {
  return static_cast<int32_t>(s.global_batch / (s.micro_batch * s.dp));
}

JobResult RunJob(const JobSpec& spec) {
  JobResult out;
  out.model = TinyConfig(spec.num_layers);
  REQUIRE(out.model.Validate().ok());
  layers::PipelinePlacementConfig pc;
  pc.num_layers = spec.num_layers;
  pc.pipeline_model_parallel_size = spec.p;
  pc.num_layers_per_virtual_pipeline_stage = spec.layers_per_virtual_stage;
  absl::StatusOr<layers::PipelinePlacement> placement = layers::BuildPipelinePlacement(pc);
  REQUIRE(placement.ok());
  out.placement = *placement;
  const int32_t v = static_cast<int32_t>(placement->virtual_pipeline_model_parallel_size);

  api::StageRankOptions ro;
  ro.data_parallel_size = spec.dp;
  ro.distributed_optimizer = spec.distributed_optimizer;
  absl::StatusOr<std::vector<api::StageRank>> ranks =
      api::BuildStageRanks(out.model, *placement, ro);
  REQUIRE(ranks.ok());
  out.ranks = std::move(*ranks);

  const int32_t m = Microbatches(spec);
  auto cc = std::make_shared<actors::CoordinatorConfig>();
  cc->train_iters = spec.iterations;
  cc->global_batch_size = spec.global_batch;
  cc->micro_batch_size = spec.micro_batch;
  cc->num_microbatches = m;
  cc->seq_length = out.model.seq_length;
  cc->clip_grad = 1.0;
  cc->log_interval = 1000;
  cc->eval_interval = 0;
  cc->eval_iters = 0;
  cc->do_valid = false;
  layers::OptimizerParamSchedulerConfig sc;  // --lr 1e-3, linear decay over the run
  sc.max_lr = 1e-3;
  sc.min_lr = 0.0;
  sc.lr_decay_steps = std::max<int64_t>(1, spec.iterations) * spec.global_batch;
  sc.wd_incr_steps = sc.lr_decay_steps;
  absl::StatusOr<layers::OptimizerParamScheduler> lr = layers::OptimizerParamScheduler::Create(sc);
  REQUIRE(lr.ok());
  cc->scheduler = *lr;
  if (spec.schedule) {
    cc->train_schedule = spec.schedule;
  } else {
    scheduler::ScheduleOptions so;
    so.kind = v > 1 ? scheduler::ScheduleKind::kInterleaved1F1B : spec.kind;
    so.num_stages = spec.p;
    so.num_chunks = v;
    so.num_microbatches = m;
    absl::StatusOr<PipelineSchedule> s = scheduler::BuildSchedule(so);
    REQUIRE(s.ok());
    cc->train_schedule = *s;
  }
  cc->trace_file = spec.trace_file;
  cc->print = [](const std::string&) {};

  actors::DataActorConfig dc;
  dc.train = std::make_shared<RandomTokenDataset>(10000, out.model.seq_length,
                                                  out.model.vocab_size, 77);
  dc.micro_batch_size = spec.micro_batch;
  dc.seq_length = out.model.seq_length;
  dc.eod = static_cast<int32_t>(out.model.vocab_size - 1);

  actors::PipelineRuntimeOptions options;
  options.pipeline_size = spec.p;
  options.data_parallel_size = spec.dp;
  options.compute_threads = 2;
  options.trace = spec.trace_file.has_value();
  options.distributed_optimizer = spec.distributed_optimizer;
  options.overlap_grad_reduce = spec.overlap_grad_reduce;
  options.overlap_param_gather = spec.overlap_param_gather;
  options.collective_timeout = spec.collective_timeout;
  options.watchdog_period = absl::Milliseconds(100);

  std::vector<actors::PipelineRank> job;
  for (api::StageRank& r : out.ranks) {
    auto it = spec.faults.find(r.rank);
    std::optional<Fault> fault;
    if (it != spec.faults.end()) fault = it->second;
    auto program = std::make_shared<FaultyProgram>(r.program, fault);
    out.programs.push_back(program);
    std::vector<layers::DataParallelBuckets> buckets = r.buckets;
    auto b = spec.bucket_elements.find(r.rank);
    if (b != spec.bucket_elements.end()) {
      for (int c = 0; c < r.program->num_chunks(); ++c) {
        absl::StatusOr<layers::DataParallelBuckets> other =
            layers::BuildDataParallelBuckets(r.program->parameters(c), spec.dp, b->second);
        REQUIRE(other.ok());
        buckets[c] = *other;
      }
    }
    job.push_back(actors::PipelineRank{r.rank, r.pipeline_rank, r.data_parallel_rank, program,
                                       r.optimizers, buckets});
  }
  const auto t0 = Clock::now();
  out.summary = actors::RunPipelineJob(std::move(job), options, cc, dc);
  out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

// Parameters of every rank and chunk, concatenated in rank order.
std::vector<float> AllParameters(JobResult& r) {
  std::vector<float> all;
  for (api::StageRank& rank : r.ranks) {
    for (int c = 0; c < rank.program->num_chunks(); ++c) {
      absl::Span<const float> p = rank.program->parameters(c).params_arena();
      all.insert(all.end(), p.begin(), p.end());
    }
  }
  return all;
}

// A schedule written out by hand: "F0 F1 B0 W0 ..." per stage (chunk 0).
PipelineSchedule HandSchedule(const std::string& name, int32_t m,
                              const std::vector<std::string>& stages) {
  PipelineSchedule s;
  s.name = name;
  s.num_stages = static_cast<int32_t>(stages.size());
  s.num_chunks = 1;
  s.num_microbatches = m;
  for (const std::string& text : stages) {
    scheduler::StageSchedule ops;
    size_t i = 0;
    while (i < text.size()) {
      if (text[i] == ' ') {
        ++i;
        continue;
      }
      const OpKind kind = text[i] == 'F'   ? OpKind::kForward
                          : text[i] == 'B' ? OpKind::kBackwardInput
                                           : OpKind::kBackwardWeight;
      size_t j = i + 1;
      while (j < text.size() && text[j] != ' ') ++j;
      ops.push_back(PipelineOp{kind, std::stoi(text.substr(i + 1, j - i - 1)), 0});
      i = j;
    }
    s.stages.push_back(std::move(ops));
  }
  return s;
}

std::string TempPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::filesystem::path dir = tmp ? tmp : std::filesystem::temp_directory_path();
  return (dir / name).string();
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// TraceOps: the compute spans of a --trace-file, per (track = global rank, iteration), in
// file order (a stage's spans are recorded as its ops finish), checked to start in that
// order too.
std::map<std::pair<int, int64_t>, std::vector<std::string>> TraceOps(const std::string& path) {
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);  // throws (fails) if malformed
  std::map<std::pair<int, int64_t>, std::vector<std::string>> ops;
  std::map<std::pair<int, int64_t>, int64_t> last_start;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X" || e.at("cat") != "compute") continue;
    const std::pair<int, int64_t> key{e.at("tid").get<int>(),
                                      e.at("args").at("iteration").get<int64_t>()};
    CHECK(e.at("ts").get<int64_t>() >= last_start[key]);  // spans in execution order
    last_start[key] = e.at("ts").get<int64_t>();
    ops[key].push_back(e.at("name").get<std::string>());
  }
  return ops;
}

// ---- 1. exactly the given op list ----

TEST_CASE("stage actors run a hand-written schedule op for op, with 1F1B's numerics") {
  // Not 1F1B: stage 0 runs three forwards ahead, interleaves F3 between backwards and
  // runs W2 before W1; stage 1 defers W0 past B1 and W2 past W3.
  const PipelineSchedule odd =
      HandSchedule("hand-written", 4,
                   {"F0 F1 F2 B0 W0 F3 B1 B2 W2 W1 B3 W3",
                    "F0 B0 F1 B1 W0 F2 W1 B2 F3 B3 W3 W2"});
  REQUIRE(scheduler::ValidateSchedule(odd).ok());
  scheduler::ScheduleOptions so;
  so.num_stages = 2;
  so.num_microbatches = 4;
  const absl::StatusOr<PipelineSchedule> one_f_one_b = scheduler::BuildSchedule(so);
  REQUIRE(one_f_one_b.ok());
  for (int stage = 0; stage < 2; ++stage) {
    CHECK_FALSE(one_f_one_b->stages[stage] == odd.stages[stage]);
  }
  JobSpec spec;
  spec.p = 2;
  spec.global_batch = 4;  // m = 4
  spec.schedule = odd;
  spec.trace_file = TempPath("pipeline_runtime_hand_schedule.json");
  JobResult hand = RunJob(spec);
  REQUIRE(hand.summary.ok());
  INFO(hand.summary->error);
  REQUIRE(hand.summary->ok);
  REQUIRE(hand.summary->train_losses.size() == 3);

  const std::map<std::pair<int, int64_t>, std::vector<std::string>> ops =
      TraceOps(*spec.trace_file);
  for (int stage = 0; stage < 2; ++stage) {
    std::vector<std::string> expected;
    for (const PipelineOp& op : odd.stages[stage]) expected.push_back(scheduler::ToString(op));
    for (int64_t it = 1; it <= 3; ++it) {
      INFO("stage " << stage << ", iteration " << it);
      CHECK(ops.at({stage, it}) == expected);
    }
  }

  // The same job under 1F1B: W order does not change the numerics (W accumulates in
  // micro-batch order whatever order it runs in), so losses, grad norms and every
  // parameter match bit for bit.
  spec.schedule.reset();
  spec.trace_file.reset();
  JobResult ref = RunJob(spec);
  REQUIRE(ref.summary.ok());
  REQUIRE(ref.summary->ok);
  CHECK(hand.summary->train_losses == ref.summary->train_losses);
  CHECK(hand.summary->grad_norms == ref.summary->grad_norms);
  CHECK(AllParameters(hand) == AllParameters(ref));
  // And the weights moved (the comparison is not between two untouched models).
  JobSpec none = spec;
  none.iterations = 0;
  JobResult init = RunJob(none);
  REQUIRE(init.summary.ok());
  CHECK(AllParameters(init) != AllParameters(ref));
}

TEST_CASE("interleaved 1F1B with every W deferred runs as listed, with the generated bits") {
  // PP 2 x DP 2, two model chunks per stage (v = 2), m = 4: Megatron's interleaved 1F1B,
  // then the same lists with every W taken out and appended at the end in reverse order
  // (W has no cross-stage dependency, so the list stays valid; the weight gradients are
  // still summed in micro-batch order).
  JobSpec spec;
  spec.p = 2;
  spec.dp = 2;
  spec.layers_per_virtual_stage = 1;
  spec.global_batch = 8;  // m = 8 / (1 x 2) = 4
  spec.iterations = 2;
  scheduler::ScheduleOptions so;
  so.kind = scheduler::ScheduleKind::kInterleaved1F1B;
  so.num_stages = 2;
  so.num_chunks = 2;
  so.num_microbatches = 4;
  const absl::StatusOr<PipelineSchedule> generated = scheduler::BuildSchedule(so);
  REQUIRE(generated.ok());
  PipelineSchedule deferred = *generated;
  deferred.name = "interleaved, W deferred";
  for (scheduler::StageSchedule& ops : deferred.stages) {
    scheduler::StageSchedule w;
    for (const PipelineOp& op : ops) {
      if (op.kind == OpKind::kBackwardWeight) w.push_back(op);
    }
    const auto is_w = [](const PipelineOp& op) { return op.kind == OpKind::kBackwardWeight; };
    ops.erase(std::remove_if(ops.begin(), ops.end(), is_w), ops.end());
    ops.insert(ops.end(), w.rbegin(), w.rend());
  }
  REQUIRE(scheduler::ValidateSchedule(deferred).ok());
  for (int stage = 0; stage < 2; ++stage) {
    CHECK_FALSE(deferred.stages[stage] == generated->stages[stage]);
  }
  spec.schedule = deferred;
  spec.trace_file = TempPath("pipeline_runtime_deferred_w.json");
  JobResult moved = RunJob(spec);
  REQUIRE(moved.summary.ok());
  INFO(moved.summary->error);
  REQUIRE(moved.summary->ok);
  const auto ops = TraceOps(*spec.trace_file);
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<std::string> expected;
    for (const PipelineOp& op : deferred.stages[rank / 2]) {
      expected.push_back(scheduler::ToString(op));  // "F3.c1" for chunk 1
    }
    for (int64_t it = 1; it <= 2; ++it) {
      INFO("rank " << rank << ", iteration " << it);
      CHECK(ops.at({rank, it}) == expected);
    }
  }
  spec.schedule = *generated;
  spec.trace_file.reset();
  JobResult ref = RunJob(spec);
  REQUIRE(ref.summary.ok());
  REQUIRE(ref.summary->ok);
  CHECK(moved.summary->train_losses == ref.summary->train_losses);
  CHECK(moved.summary->grad_norms == ref.summary->grad_norms);
  CHECK(AllParameters(moved) == AllParameters(ref));
}

// ---- 2. invalid lists and layouts are refused before running ----

TEST_CASE("invalid hand-made schedules are rejected before anything runs") {
  struct Case {
    const char* what;
    PipelineSchedule schedule;
    std::vector<std::string> expected;  // parts of the validator's message
    int64_t global_batch = 0;           // 0: the schedule's micro-batch count
  };
  const std::vector<Case> cases = {
      {"missing W",
       HandSchedule("no-w2", 3, {"F0 F1 F2 B0 W0 B1 W1 B2 W2", "F0 B0 W0 F1 B1 W1 F2 B2"}),
       {"schedule 'no-w2' rejected", "stage 1: missing W2"}},
      {"crossed sends",
       HandSchedule("crossed", 2, {"F1 F0 B0 W0 B1 W1", "F0 B0 W0 F1 B1 W1"}),
       {"schedule 'crossed' rejected", "crossed sends", "stage 0 -> stage 1"}},
      // Stage 0 waits for B0 before sending F1; stage 1 waits for F1 before sending B0.
      // Both channels are FIFO-consistent: only the replay finds the cycle.
      {"circular wait",
       HandSchedule("cycle", 2, {"F0 B0 W0 F1 B1 W1", "F0 F1 B0 W0 B1 W1"}),
       {"schedule 'cycle' rejected", "circular wait", "stage 0 waits at B0",
        "stage 1 waits at F1"}},
      // A valid list for 4 micro-batches handed to a job of 8: too few for the job.
      {"fewer micro-batches than the job",
       HandSchedule("short", 4, {"F0 F1 F2 B0 W0 F3 B1 B2 W2 W1 B3 W3",
                                 "F0 B0 F1 B1 W0 F2 W1 B2 F3 B3 W3 W2"}),
       {"schedule 'short' is for 2 stages x 1 chunks x 4 micro-batches",
        "the job has 2 x 1 x 8"},
       8},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    JobSpec spec;
    spec.p = 2;
    spec.global_batch = c.global_batch > 0 ? c.global_batch : c.schedule.num_microbatches;
    spec.schedule = c.schedule;
    const JobResult r = RunJob(spec);
    REQUIRE_FALSE(r.summary.ok());
    const std::string e(r.summary.status().message());
    INFO(e);
    CHECK(r.summary.status().code() == absl::StatusCode::kInvalidArgument);
    for (const std::string& part : c.expected) CHECK(Contains(e, part));
    for (const auto& program : r.programs) CHECK(program->calls() == 0);  // nothing ran
    CHECK(r.seconds < 2.0);
  }
}

std::vector<std::string> TinyTrainFlags(std::vector<std::string> more) {
  std::vector<std::string> args = {
      "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "5000",
      "--num-layers", "4", "--hidden-size", "32", "--num-attention-heads", "4",
      "--seq-length", "16", "--max-position-embeddings", "16", "--micro-batch-size", "1",
      "--global-batch-size", "8", "--train-iters", "3", "--lr", "1e-3", "--eval-iters", "0",
      "--num-threads", "2", "--pipeline-model-parallel-size", "2"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::string TrainError(const std::vector<std::string>& args) {
  auto s = api::Train(args, [](const std::string&) {});
  if (!s.ok()) return std::string(s.status().message());
  return s->ok ? "" : s->error;
}

TEST_CASE("layouts that do not fit the schedule or the stages are clear errors") {
  // Interleaved 1F1B needs m to be a multiple of p: m = 3, p = 2.
  auto t0 = Clock::now();
  std::string e = TrainError(TinyTrainFlags(
      {"--global-batch-size", "3", "--num-layers-per-virtual-pipeline-stage", "1"}));
  INFO(e);
  CHECK(Contains(e, "interleaved-1f1b"));
  CHECK(Contains(e, "3 micro-batches per replica"));
  CHECK(Contains(e, "m % group size = 3 % 2 = 1"));
  // 5 layers do not split over 2 stages.
  e = TrainError(TinyTrainFlags({"--num-layers", "5"}));
  INFO(e);
  CHECK(Contains(e, "number of layers (5)"));
  CHECK(Contains(e, "--pipeline-model-parallel-size (2)"));
  // Fewer micro-batches than stages is allowed for 1F1B (only a longer bubble), but the
  // interleaved schedule with m = 1 < p is refused.
  e = TrainError(TinyTrainFlags({"--global-batch-size", "1", "--pipeline-schedule",
                                 "interleaved-1f1b", "--num-layers-per-virtual-pipeline-stage",
                                 "1"}));
  INFO(e);
  CHECK(Contains(e, "interleaved-1f1b"));
  CHECK(Contains(e, "[p, m] = [2, 1]"));
  CHECK(std::chrono::duration<double>(Clock::now() - t0).count() < 10.0);  // never a hang
}

// ---- 3. stashed activations ----

// StashBytes: `count` micro-batches of stage `stage`'s stash right after F
// (layers::StashBytesPerMicroBatch, micro-batches of 1 sequence).
int64_t StashBytes(const JobResult& r, int stage, int64_t count) {
  return count * layers::StashBytesPerMicroBatch(r.model, r.placement.layouts[stage][0], 1);
}

JobResult RunPp4(int64_t m, scheduler::ScheduleKind kind) {
  JobSpec spec;
  spec.p = 4;
  spec.global_batch = m;  // micro-batch 1, DP 1
  spec.iterations = 2;
  spec.kind = kind;
  JobResult r = RunJob(spec);
  REQUIRE(r.summary.ok());
  INFO(r.summary->error);
  REQUIRE(r.summary->ok);
  REQUIRE(r.summary->rank_peak_activation_bytes.size() == 4);
  return r;
}

// The measured peak (GptStageProgram tracks the stash inside every F/B/W call) is the
// schedule's F-stashes plus what one micro-batch's B adds while it runs: B turns the
// forward stash into the tensors W needs (stage_memory.h: "none of that is counted
// here"). So the per-stage bound is (n - 1) F-stashes plus the peak of a lone
// micro-batch (measured with m = 1: F, B and W of one micro-batch), where n is the
// number of micro-batches the schedule holds at once; and it is tight: n - 1 would not
// do.
TEST_CASE("1F1B stashes at most min(p - s, m) micro-batches per stage, GPipe m") {
  const JobResult lone = RunPp4(1, scheduler::ScheduleKind::kOneFOneB);
  std::vector<int64_t> single(4);
  for (int s = 0; s < 4; ++s) {
    single[s] = lone.summary->rank_peak_activation_bytes[s];
    INFO("stage " << s << ": one micro-batch peaks at " << single[s] << " bytes, its F stash is "
                  << StashBytes(lone, s, 1));
    CHECK(single[s] >= StashBytes(lone, s, 1));
    CHECK(single[s] < 2 * StashBytes(lone, s, 1));
  }
  struct Case {
    int64_t m;
    scheduler::ScheduleKind kind;
  };
  for (const Case c : {Case{8, scheduler::ScheduleKind::kOneFOneB},
                       Case{2, scheduler::ScheduleKind::kOneFOneB},
                       Case{8, scheduler::ScheduleKind::kGPipe}}) {
    const JobResult r = RunPp4(c.m, c.kind);
    for (int s = 0; s < 4; ++s) {
      const int64_t n = c.kind == scheduler::ScheduleKind::kGPipe
                            ? c.m
                            : std::min<int64_t>(4 - s, c.m);
      const int64_t peak = r.summary->rank_peak_activation_bytes[s];
      INFO(scheduler::ScheduleKindName(c.kind)
           << " m = " << c.m << ", stage " << s << ": peak " << peak << " bytes, F stash "
           << StashBytes(r, s, 1) << " bytes, lone micro-batch " << single[s]
           << " bytes, n = " << n);
      CHECK(peak <= StashBytes(r, s, n - 1) + single[s]);
      if (n >= 2) CHECK(peak > StashBytes(r, s, n - 2) + single[s]);  // tight
    }
  }
}

// KNOWN FAILURE (reported to the lead): the literal bound
// peak <= min(p - s, m) x StashBytesPerMicroBatch — what the start-up memory report
// (api/train/parallel_setup.h MemoryReport) prints as the activation peak — is exceeded on
// every stage by the B-time growth of one micro-batch (measured: 10,240 bytes on the
// one-layer stages 0-2, 12,224 on the loss-head stage 3; stage_memory.h documents that
// it leaves it out). [!shouldfail]: this test
// passes while the CHECK fails, and fails (asking for the tag to go) once the estimate
// covers the measured peak.
TEST_CASE("the start-up activation estimate covers the measured 1F1B peak", "[!shouldfail]") {
  const JobResult r = RunPp4(8, scheduler::ScheduleKind::kOneFOneB);
  for (int s = 0; s < 4; ++s) {
    const int64_t n = std::min<int64_t>(4 - s, 8);
    INFO("stage " << s << ": peak " << r.summary->rank_peak_activation_bytes[s]
                  << " bytes, estimate " << StashBytes(r, s, n) << " bytes");
    CHECK(r.summary->rank_peak_activation_bytes[s] <= StashBytes(r, s, n));  // FAILS today
  }
}

// ---- 4. failures inside an actor ----

TEST_CASE("an error or exception in a stage ends the job promptly, naming where") {
  struct Case {
    const char* what;
    int32_t dp;
    Fault::Action action;
    OpKind kind;
    const char* actor;
    const char* op;
    const char* message;
    bool overlapped = false;  // distributed optimizer, --overlap-grad-reduce/-param-gather
  };
  const Case cases[] = {
      {"error in F, DP 1", 1, Fault::Action::kError, OpKind::kForward, "stage 1 failed",
       "op F1", "injected failure (test)"},
      {"exception in B, DP 1", 1, Fault::Action::kThrow, OpKind::kBackwardInput,
       "stage 1 failed", "op B1", "injected exception (test)"},
      // DP 2: replica 1's stage 1 finishes its ops and waits in the gradient all-reduce
      // that replica 0's stage 1 never posts.
      {"exception in W, DP 2", 2, Fault::Action::kThrow, OpKind::kBackwardWeight,
       "stage 1 (data-parallel rank 0) failed", "op W1", "injected exception (test)"},
      {"error in F, DP 2", 2, Fault::Action::kError, OpKind::kForward,
       "stage 1 (data-parallel rank 0) failed", "op F1", "injected failure (test)"},
      // The same with the distributed optimizer and overlapped reduce-scatter / all-gather:
      // replica 1 posts its reduce-scatters after its last W and waits in them.
      {"exception in W, DP 2, overlapped distributed optimizer", 2, Fault::Action::kThrow,
       OpKind::kBackwardWeight, "stage 1 (data-parallel rank 0) failed", "op W1",
       "injected exception (test)", true},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    JobSpec spec;
    spec.p = 2;
    spec.dp = c.dp;
    spec.iterations = 4;
    spec.distributed_optimizer = spec.overlap_grad_reduce = spec.overlap_param_gather =
        c.overlapped;
    // Stage 1 of DP replica 0 is rank dp (rank = pipeline rank * dp + dp rank).
    spec.faults[c.dp] = Fault{2, 1, c.kind, c.action, {}};
    const JobResult r = RunJob(spec);
    REQUIRE(r.summary.ok());
    const actors::TrainingSummary& s = *r.summary;
    INFO(s.error);
    CHECK_FALSE(s.ok);
    CHECK(Contains(s.error, c.actor));
    CHECK(Contains(s.error, "iteration 2"));
    CHECK(Contains(s.error, "micro-batch 1"));
    CHECK(Contains(s.error, c.op));
    CHECK(Contains(s.error, c.message));
    CHECK(s.train_losses.size() == 1);  // iteration 1 completed, 2 did not
    CHECK(r.seconds < 5.0);
  }
}

// ---- 5. the collective watchdog ----

TEST_CASE("a stuck gradient all-reduce times out with a report naming group, op, seq, bytes") {
  // PP 2 x DP 2; rank 3 (stage 1, replica 1) sleeps 3 s in W1 of iteration 2 while the
  // collective timeout is 1 s: replica 0's stage 1 posts its gradient all-reduce and
  // waits; the watchdog fails it after 1 s. (The job then ends once the sleeping strand
  // returns: RunPipelineJob drains the compute pool before it returns.)
  JobSpec spec;
  spec.p = 2;
  spec.dp = 2;
  spec.global_batch = 4;  // m = 2
  spec.iterations = 3;
  spec.collective_timeout = absl::Seconds(1);
  spec.faults[3] = Fault{2, 1, OpKind::kBackwardWeight, Fault::Action::kSleep,
                         std::chrono::milliseconds(3000)};
  const JobResult r = RunJob(spec);
  REQUIRE(r.summary.ok());
  const actors::TrainingSummary& s = *r.summary;
  INFO(s.error);
  CHECK_FALSE(s.ok);
  CHECK(Contains(s.error, "iteration 2"));
  CHECK(Contains(s.error, "did not complete within 1s"));
  CHECK(Contains(s.error, "all_reduce on "));       // op and group
  CHECK(Contains(s.error, " seq "));                // sequence
  CHECK(Contains(s.error, " bytes)"));              // bytes
  // Who is missing: rank 3 itself (stage 1's DP group or the tied-embedding group of
  // replica 1) or rank 1, replica 1's stage 0, which waits for rank 3's embedding sum
  // before it posts its own gradient all-reduce. Only the first report reaches the
  // summary.
  CHECK((Contains(s.error, "ranks not arrived: [3]") ||
         Contains(s.error, "ranks not arrived: [1]")));
  CHECK(s.train_losses.size() == 1);
  CHECK(r.seconds < 6.0);
}

TEST_CASE("replicas with different gradient buckets fail with a mismatch report") {
  // PP 1 x DP 2; rank 1 cuts its gradient arena into 1024-element buckets, rank 0 keeps
  // one bucket: their first all-reduces differ in size.
  JobSpec spec;
  spec.p = 1;
  spec.dp = 2;
  spec.global_batch = 4;
  spec.iterations = 2;
  spec.bucket_elements[1] = 1024;
  JobResult r = RunJob(spec);
  REQUIRE(r.summary.ok());
  const actors::TrainingSummary& s = *r.summary;
  INFO(s.error);
  CHECK_FALSE(s.ok);
  CHECK(Contains(s.error, "iteration 1"));
  CHECK(Contains(s.error, "grad reduce"));
  CHECK(Contains(s.error, "mismatch on data_parallel"));
  CHECK(Contains(s.error, "different element counts"));
  CHECK(Contains(s.error, "seq 0"));
  // Both posts with their sizes: rank 0's whole arena, rank 1's last bucket (posted first).
  layers::ParameterStore& store = r.ranks[1].program->parameters(0);
  const absl::StatusOr<layers::DataParallelBuckets> small =
      layers::BuildDataParallelBuckets(store, 2, 1024);
  REQUIRE(small.ok());
  REQUIRE(small->buckets.size() > 1);
  const int64_t whole = 4 * static_cast<int64_t>(store.grads_arena().size());
  const int64_t last = 4 * small->buckets.back().size();
  CHECK(Contains(s.error, absl::StrCat("(", whole, " bytes) from rank 0")));
  CHECK(Contains(s.error, absl::StrCat("(", last, " bytes) from rank 1")));
  CHECK(s.train_losses.empty());
  CHECK(r.seconds < 5.0);
}

// ---- 6. 8-rank grids ----

TEST_CASE("8-rank PP x DP grids match the single-device run") {
  JobSpec single;
  single.global_batch = 8;
  single.iterations = 3;
  const JobResult ref = RunJob(single);
  REQUIRE(ref.summary.ok());
  REQUIRE(ref.summary->ok);
  REQUIRE(ref.summary->train_losses.size() == 3);
  struct Grid {
    int32_t p, dp;
    bool distributed_optimizer;
  };
  for (const Grid g : {Grid{2, 4, false}, Grid{4, 2, true}}) {
    JobSpec spec = single;
    spec.p = g.p;
    spec.dp = g.dp;
    spec.distributed_optimizer = g.distributed_optimizer;
    const JobResult r = RunJob(spec);
    INFO("PP " << g.p << " x DP " << g.dp);
    REQUIRE(r.summary.ok());
    INFO(r.summary->error);
    REQUIRE(r.summary->ok);
    REQUIRE(r.summary->train_losses.size() == 3);
    for (size_t i = 0; i < 3; ++i) {
      // docs/ARCHITECTURE.md: per-step loss within 1e-5 relative (DP sums gradients in a different
      // association than one device does, so later steps differ by rounding).
      const double a = r.summary->train_losses[i], b = ref.summary->train_losses[i];
      INFO("iteration " << i + 1 << ": " << a << " vs " << b);
      CHECK(std::abs(a - b) <= 1e-5 * std::abs(b));
    }
    CHECK(r.seconds < 20.0);
  }
}

}  // namespace
}  // namespace mxmaca::testing
