// actors/synthetic_stage_program.h: a StageProgram whose F / B / W take DECLARED times
// without using the CPU, and the pieces to run a whole PP x DP job of them.
//
// Each op sleeps on its strand thread until (op start + declared seconds): with one
// ComputePool thread per rank a sleeping op costs no CPU, so real stage actors, real
// messages and the real coordinator can run pipelines far larger than this machine's
// cores (the bubble benchmark runs p = 16 on 2 cores). Sleeping never ends early
// (std::this_thread::sleep_until); it may end late by the kernel's timer slack and
// scheduling delay (measured in docs/BENCHMARKS.md).
//
// What the ops produce, so that every coordinator and stage-actor path runs:
//   F: on every virtual stage but the last, an Activation [b, s, h] (declared shape; the
//      payload is one float unless real_payload, then b * s * h floats copied from the
//      input, so the copy cost is measured); on the last virtual stage a loss with
//      loss_sum = loss_per_token * b * s and num_tokens = b * s, so the coordinator
//      reports lm loss = loss_per_token. F stashes stash_bytes (not on eval).
//   B: needs the stash; on every virtual stage but the first, an input gradient [b, s, h]
//      (same payload rule).
//   W: needs the stash; adds grad_per_microbatch to every element of the chunk's one
//      parameter tensor; frees the stash.
// Each chunk owns a tiny ParameterStore: one tensor "synthetic.virtual_stage.<k>.weight"
// of parameters_per_chunk elements, finalized with pad multiple dp * 16 (as
// layers/grad_buckets.h requires), so the DP reduction, grad norm and AdamW paths run at
// negligible cost. No tied embeddings (tied_embedding_parameter = -1).
//
// Failure injection: one (iteration, micro-batch, chunk, op kind) may return an error
// status or throw std::runtime_error (the stage actor turns both into StageFailed).
#ifndef MXMACA_ACTORS_SYNTHETIC_STAGE_PROGRAM_H_
#define MXMACA_ACTORS_SYNTHETIC_STAGE_PROGRAM_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "actors/messages.h"
#include "actors/metrics/metrics_sink.h"
#include "actors/pipeline_runtime.h"
#include "actors/stage_program.h"
#include "actors/training_log.h"
#include "data/gpt_dataset.h"
#include "layers/lr_schedule.h"
#include "layers/parameter_store.h"
#include "scheduler/pipeline_schedule.h"
#include "scheduler/schedule_factory.h"

namespace mxmaca::actors {

// SyntheticOpSeconds: declared durations of one model chunk's ops for one micro-batch, in
// seconds (each >= 0 and finite).
struct SyntheticOpSeconds {
  double forward = 0.0;
  double backward_input = 0.0;
  double backward_weight = 0.0;
};

// SyntheticFailureKind: what an injected failure does.
//   kReturnError: the op returns InternalError("injected failure ...").
//   kThrow: the op throws std::runtime_error("injected exception ...").
enum class SyntheticFailureKind : uint8_t { kNone, kReturnError, kThrow };

// SyntheticFailure: fail the op `op` of (iteration, micro-batch, chunk) on this stage
// (iteration 1-based as in the coordinator; micro-batch within the iteration).
struct SyntheticFailure {
  SyntheticFailureKind kind = SyntheticFailureKind::kNone;
  int64_t iteration = 1;
  int32_t microbatch = 0;
  int32_t chunk = 0;
  scheduler::OpKind op = scheduler::OpKind::kForward;
};

// SyntheticStageOptions: one stage (pipeline rank) of a synthetic pipeline.
struct SyntheticStageOptions {
  int32_t pipeline_rank = 0;       // this stage, in [0, pipeline_size)
  int32_t pipeline_size = 1;       // p
  // Where the chunks sit (Megatron's interleaving, or ZB-V's V).
  scheduler::Placement placement = scheduler::Placement::kInterleaved;
  int32_t data_parallel_size = 1;  // dp: the parameter arena is padded to dp * 16
  // chunks[c]: declared op times of model chunk c (virtual stage c * p + pipeline_rank);
  // its size is v (>= 1).
  std::vector<SyntheticOpSeconds> chunks = {SyntheticOpSeconds{}};
  // Declared activation shape [b, s, h] (each >= 1).
  int64_t micro_batch_size = 1;
  int64_t seq_length = 1;
  int64_t hidden_size = 1;
  // real_payload: activations and gradients carry b * s * h fp32 values, copied from the
  // op's input (or filled on the first/last virtual stage) inside the op's declared time.
  bool real_payload = false;
  double loss_per_token = 1.0;  // the lm loss the coordinator will report
  // stash_bytes: bytes one F keeps until its W (per micro-batch and chunk); -1 means
  // b * s * h * 4 (one fp32 activation).
  int64_t stash_bytes = -1;
  int64_t parameters_per_chunk = 16;  // elements of the chunk's one tensor (>= 1)
  float grad_per_microbatch = 1.0e-3f;
  uint64_t seed = 1234;  // parameter initialisation
  SyntheticFailure failure;
};

// SyntheticStageProgram: see the file comment. Calls come from one strand at a time.
class SyntheticStageProgram : public StageProgram {
 public:
  // Create: validates `options` (InvalidArgument naming the field and value: pipeline
  // rank out of range, sizes < 1, no chunks, a negative or non-finite op time, a failure
  // naming a chunk out of range) and builds the parameter stores.
  static absl::StatusOr<std::unique_ptr<SyntheticStageProgram>> Create(
      const SyntheticStageOptions& options);

  int num_chunks() const override { return static_cast<int>(options_.chunks.size()); }
  // Forward / BackwardInput / BackwardWeight: see the file comment. Errors:
  // InvalidArgument for a chunk out of range, a missing input on a non-first virtual
  // stage, a missing d_output on a non-last one, or (real_payload) an input whose size is
  // not b * s * h; FailedPrecondition for F twice on one (micro-batch, chunk) or B / W
  // without the F's stash; the injected failure.
  absl::Status Forward(const MicroBatchKey& key, const data::GptMicroBatch& batch,
                       const Activation* input, ForwardResult* result) override;
  absl::Status BackwardInput(const MicroBatchKey& key, const Activation* d_output,
                             float loss_grad_scale, std::vector<float>* d_input) override;
  absl::Status BackwardWeight(const MicroBatchKey& key) override;

  layers::ParameterStore& parameters(int chunk) override { return *stores_[chunk]; }
  int tied_embedding_parameter(int) const override { return -1; }
  bool is_tied_copy(int, int) const override { return false; }
  int64_t peak_activation_bytes() const override { return peak_; }
  void ResetPeakActivationBytes() override { peak_ = live_; }

  // live_activation_bytes: the stash held now (bytes).
  int64_t live_activation_bytes() const { return live_; }
  // stash_bytes: what one F stashes (bytes).
  int64_t stash_bytes() const { return stash_bytes_; }
  const SyntheticStageOptions& options() const { return options_; }

 private:
  explicit SyntheticStageProgram(const SyntheticStageOptions& options);
  bool first_virtual(int chunk) const;
  bool last_virtual(int chunk) const;
  // Check: the chunk range and the injected failure for (key, op).
  absl::Status Check(const MicroBatchKey& key, scheduler::OpKind op) const;
  // MakeTensor: an Activation [b, s, h]: a copy of `from` (real payload with an input),
  // b * s * h values `fill` (real payload, no input) or the shared one-float payload.
  // Writes into `out` (a recycled pool buffer).
  void MakeTensor(const Activation* from, float fill, std::vector<float>* out) const;

  SyntheticStageOptions options_;
  int64_t stash_bytes_ = 0;
  std::vector<std::unique_ptr<layers::ParameterStore>> stores_;
  // (chunk, global micro-batch) -> stashed bytes.
  std::map<std::pair<int32_t, int64_t>, int64_t> stash_;
  int64_t live_ = 0;
  int64_t peak_ = 0;
};

// SyntheticSampleDataset: `size` samples of seq_length + 1 tokens, token j of sample i =
// 1 + (7 i + j) mod (vocab - 1) (never 0, the EOD id the synthetic jobs use); only to
// feed the DataActor (synthetic stages ignore the tokens).
class SyntheticSampleDataset : public data::SampleDataset {
 public:
  SyntheticSampleDataset(int64_t size, int64_t seq_length, int32_t vocab = 1024)
      : size_(size), seq_length_(seq_length), vocab_(vocab < 2 ? 2 : vocab) {}
  int64_t size() const override { return size_; }
  int64_t sample_length() const override { return seq_length_ + 1; }
  // GetSample: OutOfRange for i outside [0, size()), InvalidArgument for a wrong size.
  absl::Status GetSample(int64_t i, absl::Span<int32_t> out) const override;

 private:
  int64_t size_, seq_length_;
  int32_t vocab_;
};

// SyntheticJobOptions: a whole synthetic PP x DP training job.
struct SyntheticJobOptions {
  scheduler::ScheduleKind schedule = scheduler::ScheduleKind::kOneFOneB;
  int32_t pipeline_size = 1;       // p
  int32_t data_parallel_size = 1;  // dp
  // tp: TP ranks of a stage run the same synthetic program (no TP collectives: the
  // control plane at scale — grid, groups, actors, messages — is what is exercised).
  int32_t tensor_parallel_size = 1;
  int32_t num_chunks = 1;          // v (> 1 needs interleaved-1f1b)
  int32_t num_microbatches = 1;    // m per DP replica and iteration
  int64_t train_iters = 1;
  // Declared op times: op_seconds[s][c] for pipeline rank s and chunk c when given ([p][v]),
  // else `uniform` everywhere.
  SyntheticOpSeconds uniform;
  std::vector<std::vector<SyntheticOpSeconds>> op_seconds;
  int64_t micro_batch_size = 1;
  int64_t seq_length = 8;
  int64_t hidden_size = 16;
  bool real_payload = false;
  double loss_per_token = 1.0;
  int64_t stash_bytes = -1;  // see SyntheticStageOptions
  int64_t parameters_per_chunk = 16;
  bool distributed_optimizer = false;
  bool overlap_grad_reduce = false;
  // failures: (global rank, failure) pairs injected into those ranks' programs.
  std::vector<std::pair<int32_t, SyntheticFailure>> failures;
  int compute_threads = 0;  // 0: one ComputePool thread per rank (p * dp)
  std::optional<int32_t> channel_slots;  // CoordinatorConfig::pipeline_channel_slots
  bool dynamic = false;                  // CoordinatorConfig::dynamic_pipeline
  std::optional<std::string> trace_file;  // Chrome trace of every op (--trace-file)
  std::function<void(const std::string&)> print;  // coordinator log sink (may be empty)
  int64_t log_interval = 0;                        // 0: no log lines
  std::function<void(const IterationLogRecord&)> on_iteration;  // may be empty
  // --tensorboard-dir / --metrics-jsonl sinks (CoordinatorConfig::metrics); may be empty.
  std::vector<std::shared_ptr<metrics::TrainingMetricsSink>> metrics;
  // The optimizer step (CoordinatorConfig): --optimizer-post-validation; a declared step
  // time in seconds (>= 0, finite; CoordinatorConfig::synthetic_optimizer_seconds); the
  // gradient clip; the learning-rate schedule (empty: constant 1e-4, no weight decay).
  bool optimizer_post_validation = false;
  double optimizer_seconds = 0.0;
  double clip_grad = 1.0;
  std::optional<layers::OptimizerParamScheduler> scheduler;
  // --max-stashed-microbatches for the dynamic policy (CoordinatorConfig).
  std::optional<int32_t> max_stashed_microbatches;
  // --inject-stage-slowdown STAGE:FACTOR[:FROM_ITER] (PipelineRuntimeOptions::slowdown_*);
  // slowdown_stage -1: none.
  int32_t slowdown_stage = -1;
  double slowdown_factor = 1.0;
  int64_t slowdown_from_iteration = 1;
};

// BuildSyntheticRanks: the p * dp ranks of the job in rank order (rank = pipeline rank *
// dp + DP rank), each with its SyntheticStageProgram, one AdamW optimizer per chunk (whole
// tensors, or this rank's pieces with the distributed optimizer) and one gradient bucket
// per chunk. Errors: InvalidArgument for sizes < 1, op_seconds not [p][v], a failure rank
// out of range, and SyntheticStageProgram::Create's errors.
absl::StatusOr<std::vector<PipelineRank>> BuildSyntheticRanks(const SyntheticJobOptions& options);

// RunSyntheticJob: builds the ranks, the schedule (scheduler::BuildSchedule), a
// coordinator run (options.scheduler or a constant learning rate 1e-4, options.clip_grad,
// no evaluation, no checkpoints) and a SyntheticSampleDataset, and runs RunPipelineJob.
// Returns its summary (ok = false with the failing stage, iteration, micro-batch and op
// when an op failed). Errors: InvalidArgument for a negative or non-finite
// optimizer_seconds; those of BuildSyntheticRanks, BuildSchedule and RunPipelineJob.
absl::StatusOr<TrainingSummary> RunSyntheticJob(const SyntheticJobOptions& options);

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_SYNTHETIC_STAGE_PROGRAM_H_
