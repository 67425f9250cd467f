// mxmaca/runtime.h (api/public/): embedding MXMACA training in a C++ program (public API).
//
// Defines Runtime (process-wide defaults; owns no global state), Job (one training run:
// a model, a layout and trainer options, or a pretrain_gpt.py command line) with
// Job::Run, and the public per-iteration metrics and result types. A Job is translated
// into Megatron-LM's pretrain_gpt.py flags and run by the same code as `mxmaca train`
// (api/train/train_command.h): the `mxmaca` binary is itself a user of this API, and
// Job::MegatronArgs() is the command line that reproduces a job with the CLI.
//
//   mxmaca::Runtime runtime;
//   MXMACA_ASSIGN_OR_RETURN(mxmaca::Job job,
//                           runtime.CreateJob(mxmaca::ModelSpec::Gpt(shape), parallel, options));
//   MXMACA_ASSIGN_OR_RETURN(mxmaca::JobResult result,
//                           job.Run([](const mxmaca::IterationMetrics& m) { ... }));
//
// See docs/API.md and examples/embed/embed_main.cc.
#ifndef MXMACA_API_PUBLIC_RUNTIME_H_
#define MXMACA_API_PUBLIC_RUNTIME_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mxmaca/model_spec.h"
#include "mxmaca/parallel_config.h"
#include "mxmaca/trainer_options.h"

namespace mxmaca {

// IterationMetrics: one training iteration, as the runtime measured it.
struct IterationMetrics {
  int64_t iteration = 0;           // 1-based, counting from the start (resumed runs continue)
  int64_t train_iters = 0;         // the last iteration of the run (--train-iters)
  int64_t consumed_samples = 0;    // sequences consumed so far, this iteration included
  double lm_loss = 0.0;            // token-weighted mean cross-entropy (nats); NaN/Inf if so
  double grad_norm = 0.0;          // global L2 norm of the gradients before clipping
  double learning_rate = 0.0;      // after this iteration's scheduler step (as Megatron logs it)
  double tokens_per_second = 0.0;  // global batch x seq length / this iteration's wall time
  double elapsed_ms = 0.0;         // this iteration's wall time, milliseconds
  bool skipped = false;            // the optimizer step was skipped (non-finite loss or grads)
};

// MetricsCallback: called once per training iteration, in order, on a runtime thread
// (not the caller's), while Run blocks. Keep it short: the next iteration waits for it.
using MetricsCallback = std::function<void(const IterationMetrics&)>;

// LogSink: receives every Megatron-style log line (without the trailing newline).
using LogSink = std::function<void(const std::string&)>;

// ValidationLoss: one evaluation on the validation split.
struct ValidationLoss {
  int64_t iteration = 0;  // the training iteration after which it ran
  double lm_loss = 0.0;   // token-weighted mean cross-entropy (nats)
};

// JobResult: how a run ended (mirrors the runtime's TrainingSummary). Losses are exact
// (bit for bit what the runtime computed), so runs can be compared.
struct JobResult {
  int64_t first_iteration = 0;       // the iteration the run resumed from (0 = fresh)
  int64_t last_iteration = 0;        // the last iteration run
  int64_t skipped_iterations = 0;    // total, including any before a resume
  std::vector<double> train_losses;  // per iteration run, in order (NaN for a NaN iteration)
  std::vector<double> grad_norms;    // per iteration run, in order
  std::vector<ValidationLoss> valid_losses;
  double mean_tokens_per_second = 0.0;  // over all iterations after the first
  int64_t peak_activation_bytes = 0;    // largest activation stash held by any stage
};

// Job: one training run. Copyable; Run may be called more than once (each call is a
// fresh run of the same command line, e.g. resuming from `load`).
class Job {
 public:
  // FromMegatronArgs: a job from Megatron's pretrain_gpt.py flags (`args` excludes the
  // program name), exactly as `mxmaca train <args>` runs them. Errors (InvalidArgument):
  // what ParseMegatronArgs reports (an unknown flag with the nearest known one, a
  // malformed value, a value outside the choices). Checks across flags happen in Run.
  static absl::StatusOr<Job> FromMegatronArgs(std::vector<std::string> args);

  // MegatronArgs: the pretrain_gpt.py flags this job runs (without a program name);
  // `mxmaca train <these>` runs the same job.
  const std::vector<std::string>& MegatronArgs() const { return args_; }

  // CommandLine: "mxmaca train <flags>", shell-quoted, for logs and reproduction.
  std::string CommandLine() const;

  // set_log_sink: where the runtime's log lines go; empty (the default) = stdout.
  void set_log_sink(LogSink sink) { log_sink_ = std::move(sink); }

  // Run: trains to the end and returns the result; blocks the calling thread.
  // `on_iteration` (optional) sees every iteration, in order. Errors: as `mxmaca train`'s:
  // InvalidArgument/Unimplemented for bad or unsupported flag combinations (naming
  // them), NotFound/DataLoss for unreadable data, tokenizer or checkpoint files (naming
  // the file), and Aborted for a failure during training (naming the actor, iteration,
  // micro-batch and op; iterations before it were reported to `on_iteration`).
  absl::StatusOr<JobResult> Run(const MetricsCallback& on_iteration = {}) const;

 private:
  explicit Job(std::vector<std::string> args) : args_(std::move(args)) {}

  std::vector<std::string> args_;
  LogSink log_sink_;
};

// Runtime: process-wide defaults for the jobs it creates. It owns no global state:
// several Runtimes (and their jobs) can coexist, and a Job outlives its Runtime.
class Runtime {
 public:
  // Options: defaults applied to every job this runtime creates.
  struct Options {
    // CPU compute threads for a job whose TrainerOptions::num_threads is 0; 0 = let the
    // runtime choose (the number of cores).
    int num_threads = 0;
    LogSink log_sink;  // see Job::set_log_sink; empty = stdout
  };

  Runtime() = default;
  explicit Runtime(Options options) : options_(std::move(options)) {}

  // CreateJob: validates `model` (ModelSpec::Validate), the parallel sizes (>= 1, at
  // most one virtual-stage field, a known schedule name) and the options that need no
  // files (seq_length and train_iters > 0, micro_batch_size >= 1, tokenizer/vocabulary
  // consistency), then translates them into pretrain_gpt.py flags (parsed once, so a bad
  // extra_megatron_args flag fails here). Errors: InvalidArgument naming the field and
  // value (or the flag). Everything that needs files or crosses many flags (batch
  // divisibility, layers per stage, a schedule that does not fit the layout, ...) is
  // checked by Job::Run, exactly as `mxmaca train` checks it.
  absl::StatusOr<Job> CreateJob(const ModelSpec& model, const ParallelConfig& parallel,
                                const TrainerOptions& options) const;

  const Options& options() const { return options_; }

 private:
  Options options_;
};

}  // namespace mxmaca

#endif  // MXMACA_API_PUBLIC_RUNTIME_H_
