// actors/coordinator.h: the Coordinator, one per process, which drives iterations.
//
// Per training iteration (megatron/training/training.py train / train_step):
//   1. hands every StageActor its op list and asks the DataActor for the global batch's
//      micro-batches (which go straight to the stages);
//   2. collects each stage's report (loss, token count, gradient sum of squares) — with
//      --optimizer-post-validation each early report is answered with an optimistic step
//      (see CoordinatorConfig::optimizer_post_validation);
//   3. decides the step: global grad norm (each logical parameter counted once), skip on
//      NaN/Inf (counted; the run stops after --max-consecutive-nan-iterations in a row),
//      clip coefficient (--clip-grad), learning rate and weight decay from the scheduler,
//      and tells every stage to apply it;
//   4. advances the scheduler by the global batch (only for successful steps) and the
//      consumed-samples counter, logs every --log-interval, evaluates every
//      --eval-interval on the validation split (forward-only schedule), saves every
//      --save-interval (atomically; and once at the end), stops at --train-iters or
//      --exit-interval / --exit-duration-in-mins.
// Failures reported by any actor end the run at once with a summary naming the actor,
// iteration, micro-batch and op.
//
// Multi-process jobs (CoordinatorConfig::control): every process runs a coordinator for
// its own stage actor; after its stage reported, each all-gathers the report through the
// ControlPlane (control_plane.h) and every coordinator computes the same sums, in rank
// order, from the same bytes, so all take the same decisions. Exit requests
// (--exit-duration-in-mins, --exit-signal-handler) travel with the reports: one process's
// request stops every process after the same iteration. A save is begun by rank 0, whose
// temp directory the others attach to (CheckpointWriter::Attach); once every rank reported
// its shards, rank 0 commits.
#ifndef MXMACA_ACTORS_COORDINATOR_H_
#define MXMACA_ACTORS_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/checkpoint/checkpoint_writer.h"
#include "actors/control_plane.h"
#include "actors/messages.h"
#include "actors/metrics/metrics_sink.h"
#include "actors/training_log.h"
#include "layers/lr_schedule.h"
#include "scheduler/pipeline_schedule.h"

namespace mxmaca::actors {

// CoordinatorConfig: the run. Iterations are 1-based as in Megatron's logs.
struct CoordinatorConfig {
  int64_t train_iters = 0;
  int64_t start_iteration = 0;              // iterations already done (from --load)
  int64_t consumed_train_samples = 0;
  int64_t consumed_valid_samples = 0;
  int64_t skipped_iterations = 0;           // skipped before start_iteration (from --load)
  int64_t global_batch_size = 0;
  int64_t micro_batch_size = 0;
  int32_t num_microbatches = 0;             // global batch / (micro batch x DP)
  // eval_num_microbatches: --eval-global-batch-size / (micro batch x DP); 0 = num_microbatches.
  int32_t eval_num_microbatches = 0;
  int64_t seq_length = 0;
  bool calculate_per_token_loss = false;
  double clip_grad = 1.0;                   // 0 disables clipping
  int64_t max_consecutive_nan_iterations = 1;
  int64_t log_interval = 100;
  int64_t eval_interval = 1000;             // 0 disables periodic evaluation
  int64_t start_eval_at_iter = 0;           // --start-eval-at-iter: no periodic one before
  int64_t eval_iters = 100;                 // 0 disables evaluation
  bool do_valid = false;                    // a validation split exists and eval_iters > 0
  std::optional<int64_t> exit_interval;
  std::optional<double> exit_duration_in_mins;
  std::optional<std::string> save_dir;
  int64_t save_interval = 0;                // 0: save only at the end (when save_dir)
  // --non-persistent-save-interval with --non-persistent-ckpt-type global|local (Megatron's
  // train loop): after an iteration that is a multiple of it and not of save_interval, a
  // checkpoint goes to non_persistent_dir instead of save_dir (set both, with save_dir);
  // the leader first removes all but the newest complete iter_* there
  // (cleanup_old_non_persistent_checkpoint). Such saves do not count as the final save.
  int64_t non_persistent_save_interval = 0;
  std::optional<std::string> non_persistent_dir;
  // save_retain_interval: --save-retain-interval K: after each persistent save commits,
  // the checkpoint the --save directory's tracker named before it is deleted unless its
  // iteration is a multiple of K (checkpoint_retention.h ApplySaveRetainInterval), in
  // save_retain_dir: the --save directory ("" = save_dir; with --ckpt-format torch save_dir
  // is the staging directory and the Megatron checkpoints are in --save).
  std::optional<int64_t> save_retain_interval;
  // save_optimizer_state: false with --no-save-optim (write_shard then writes no Adam state
  // and the metadata says has_optimizer_state false).
  bool save_optimizer_state = true;
  // skip_train: --skip-train: train_iters is the start iteration; the run evaluates (as at
  // the end of training) and stops, saving nothing (set no save_dir).
  bool skip_train = false;
  std::string save_retain_dir;
  // rng_seed: the seed every random draw is a function of (dropout masks), stored as the
  // checkpoint's RNG state (state.rng.seed).
  int64_t rng_seed = 0;
  nlohmann::json checkpoint_args;           // stored in every checkpoint's metadata
  // after_commit: called by the process that committed a save (rank 0) with the iteration
  // and the published iter_{:07d} directory; an error fails the save (--ckpt-format torch
  // converts the checkpoint to Megatron's legacy format here: api/train/megatron_format.h).
  std::function<absl::Status(int64_t iteration, const std::string& iter_dir)> after_commit;
  // save_log_dir: the directory the "successfully saved checkpoint" line names, when it is
  // not save_dir (--ckpt-format torch: the --save directory rather than the staging one).
  std::optional<std::string> save_log_dir;
  // async_save: --async-save: a periodic save snapshots the stages' shards into host
  // memory (CheckpointWriter::DeferWrites, on the stages' threads) and an
  // AsyncCheckpointWriter writes them in the background while training continues; in one
  // process it also commits and runs after_commit there, and the coordinator polls it
  // after every step (printing its "successfully saved" line once it ended). The next
  // save and the end of the run (the final save itself is synchronous) wait for it; with
  // `control` every rank reports its write there (an exchange) and only then rank 0
  // commits. A failure is printed to stderr when it happens and ends the run with its
  // error at the first of these points (on every rank).
  bool async_save = false;
  std::optional<layers::OptimizerParamScheduler> scheduler;  // required
  // stages: every stage actor, by global rank
  // (rank = (pipeline rank * dp + dp rank) * tp + tp rank); with `control`, only this
  // process's entry is set (the others are null handles).
  std::vector<StageActorHandle> stages;
  // control: set for a job that spans processes (one rank per process); see above.
  std::shared_ptr<ControlPlane> control;
  // exit_signal_received: --exit-signal-handler; polled after every training step: when it
  // returns true the run prints "exiting program after receiving SIGTERM.", saves (with
  // --save) and ends as with --exit-interval. May be empty.
  std::function<bool()> exit_signal_received;
  // MoE models: the global numbers of the MoE layers and the expert count, for the routing
  // metrics in the log (one line per MoE layer at every --log-interval, and Megatron's
  // load_balancing_loss / z_loss after lm loss). Empty: a dense model.
  std::vector<int64_t> moe_layers;
  int64_t moe_num_experts = 0;
  int32_t pipeline_size = 1;                // P
  int32_t data_parallel_size = 1;           // dp
  int32_t tensor_parallel_size = 1;         // tp
  // Per-pipeline-rank op lists for training and evaluation (scheduler::BuildSchedule);
  // empty: the single-stage defaults (SingleStageSchedule / ForwardOnlySchedule).
  std::optional<scheduler::PipelineSchedule> train_schedule;
  std::optional<scheduler::PipelineSchedule> eval_schedule;
  // --pipeline-channel-slots: caps each channel's payload quota (scheduler::EdgeQuotas);
  // none = as many as the schedule can put in flight (back-pressure never stalls it).
  std::optional<int32_t> pipeline_channel_slots;
  // --dynamic-pipeline: stage actors run ready W (and the next F) when the next scheduled op
  // waits for its input; --max-stashed-microbatches caps the stashes that allows (default:
  // the static schedule's peak on that stage, scheduler::PeakStashedMicrobatches).
  bool dynamic_pipeline = false;
  // rebalance: called after every training step with the per-pipeline-rank busy seconds of
  // that iteration; when it returns a placement change, every stage actor (by rank) gets
  // its ReplaceProgram before the next iteration and `log` is printed. The call runs on
  // the coordinator (it copies the moved state; rare, between iterations). May be empty.
  struct RebalanceResult {
    std::vector<ReplaceProgram> programs;  // by rank
    std::string log;
  };
  std::function<absl::StatusOr<std::optional<RebalanceResult>>(
      int64_t iteration, const std::vector<double>& stage_busy)>
      rebalance;
  std::optional<int32_t> max_stashed_microbatches;
  // --optimizer-post-validation (Qi et al., ICLR 2024, section 4; messages.h
  // ApplyOptimizerStep): every report but the last gets an optimistic step decided from
  // the reports so far (in one process the coordinator relays the partial reduction: a
  // stage sees the sum over every rank that reported before it, which in 1F1B is the
  // chain of downstream stages of the paper); the last report completes the global
  // reduction, summed in rank order as without the flag, and the final decision confirms
  // or rolls back each optimistic step. When nothing is due between iterations
  // (evaluation, save, rebalancing, exit, the last iteration), the next iteration's op
  // lists go out with the final decision instead of after every stage's step: a stage
  // whose optimistic step was confirmed starts at once, the others after their redo (their
  // strand runs the step first). Results are bit-identical to the synchronous step. With
  // `control` (multi-process) a rank's partial is its own report: it steps optimistically
  // while the reports are all-gathered, and every coordinator takes the final decision
  // from the same gathered bytes. At the end of the run one log line gives the counts
  // (TrainingSummary::optimistic_steps_*). With --calculate-per-token-loss a step is
  // optimistic only once the global token count (its gradient scale) is in the partial,
  // i.e. after every DP replica's loss head reported; ranks whose step all-gathers
  // parameters (distributed optimizer with dp > 1) take no optimistic step: they wait for
  // the final decision.
  bool optimizer_post_validation = false;
  // synthetic_optimizer_seconds: benchmarks on the synthetic backend: every applied
  // optimizer step (optimistic, final or redo) lasts at least this long on its stage's
  // strand (ApplyOptimizerStep::min_seconds). 0 = off.
  double synthetic_optimizer_seconds = 0.0;
  // write_shard for SaveCheckpointShard (stage_checkpoint.h); required with save_dir.
  std::function<absl::Status(const StageIdentity&, StageProgram&,
                             const std::vector<std::shared_ptr<layers::AdamWOptimizer>>&,
                             checkpoint::CheckpointWriter&)>
      write_shard;
  DataActorHandle data;
  double flops_per_iteration = 0.0;         // Megatron's num_floating_point_operations
  double gemm_peak_gflops = 0.0;            // measured at start-up (0 = unknown)
  int64_t num_devices = 1;                  // for per-device throughput
  std::function<void(const std::string&)> print;  // log sink (one call per line/block)
  // --trace-file: a Chrome/Perfetto trace of every stage's ops (stages need trace = true).
  std::optional<std::string> trace_file;
  // Called after every iteration with its record (for embedding callers); may be empty.
  std::function<void(const IterationLogRecord&)> on_iteration;
  // metrics: --tensorboard-dir, --metrics-jsonl (actors/metrics): each gets every
  // iteration's record, every log line's record and every evaluation, in that order, and
  // is closed when the run ends; an error from one ends the run with that error.
  std::vector<std::shared_ptr<metrics::TrainingMetricsSink>> metrics;
  // params_norm_squared: --log-params-norm: the squared L2 norm of the parameters, called
  // once every stage applied the iteration's step (before the next iteration starts, so
  // it may read the stages' parameters); its root goes into the iteration's records and
  // the log line. Set, the post-validation overlap of iterations is off. May be empty.
  std::function<double()> params_norm_squared;
  // num_zeros_in_grad: --log-num-zeros-in-grad: the zero gradient elements, called once
  // every stage reported (gradients reduced, the stages waiting for the step; not with
  // --optimizer-post-validation, whose optimistic steps may have consumed them). May be
  // empty.
  std::function<int64_t()> num_zeros_in_grad;
};

// SpawnCoordinator: spawns the actor. Send it RunTraining (once) to start; it answers
// with TrainingSummary when the run ends. `set_stages` lets the caller create the stage and
// data actors (which need the coordinator's handle) after spawning: the coordinator waits
// for RunTraining before using them.
CoordinatorActor SpawnCoordinator(caf::actor_system& system,
                                  std::shared_ptr<CoordinatorConfig> config);

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_COORDINATOR_H_
