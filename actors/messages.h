// actors/messages.h: the typed messages between MXMACA's actors, and the actors'
// typed interfaces.
//
// docs/ARCHITECTURE.md, "Messages": small typed structs; every message about a micro-batch names
// its iteration, micro-batch, model chunk and direction, so the receiver checks that what
// arrived is what it expected and fails loudly otherwise. Payloads are shared_ptrs to
// immutable data: within a process CAF hands the same address to the receiver (zero copy).
// These types never cross a process boundary through CAF (CAF_ALLOW_UNSAFE_MESSAGE_TYPE);
// tensors between processes go over the transport layer.
#ifndef MXMACA_ACTORS_MESSAGES_H_
#define MXMACA_ACTORS_MESSAGES_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/stage_program.h"
#include "actors/trace.h"
#include "data/gpt_batch.h"
#include "layers/grad_buckets.h"
#include "layers/moe/moe_stats.h"
#include "layers/optimizer.h"
#include "scheduler/pipeline_schedule.h"

namespace mxmaca::actors {

// Direction of a message along the pipeline.
enum class Direction : uint8_t { kForward, kBackward };

// ---- Coordinator -> StageActor ----

// RunStageIteration: run `schedule` (this stage's op list) for `iteration`. Micro-batch k
// of DP replica r has global id first_global_microbatch + k * dp + r (Megatron's sampler
// interleaves replicas within each group of dp micro-batches), so dropout masks do not
// depend on the data-parallel size. eval: forward only, no stash, no gradients.
struct RunStageIteration {
  int64_t iteration = 0;
  bool eval = false;
  int32_t num_microbatches = 0;
  int64_t first_global_microbatch = 0;
  bool calculate_per_token_loss = false;
  scheduler::StageSchedule schedule;
  // Payload slots of this stage's outgoing channels (scheduler/edge_slots.h EdgeQuotas):
  // a sending op waits while that many of its channel's payloads are in flight.
  // 0 = unlimited (single stage, or no quota computed).
  int32_t forward_slots = 0;
  int32_t backward_slots = 0;
  // Where the chunks sit (scheduler/pipeline_schedule.h): Megatron's interleaving or
  // ZB-V's V; decides each chunk's virtual stage and so its neighbours.
  scheduler::Placement placement = scheduler::Placement::kInterleaved;
  // The dynamic policy (stage_actor.cc TryAdvance / StealDue): when the next op's input
  // has not arrived (and the strand has idled on it as long as the deferred op takes), run a
  // later W whose B ran, or the next F while fewer than max_stashed stashes are held.
  bool dynamic = false;
  int32_t max_stashed = 0;
};

// ApplyOptimizerStep: after every stage reported the iteration: multiply the gradients by
// grad_scale (1/tokens with --calculate-per-token-loss, else 1), then by clip_coeff, and
// step AdamW with lr / weight_decay — or, when skip, drop the gradients (a NaN/Inf step).
//
// --optimizer-post-validation (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024,
// section 4): a stage that reported before the others may get an `optimistic` step first,
// decided from the partial reduction of the reports so far (skip when it already holds a
// NaN/Inf; clip_coeff 1 when its norm is under --clip-grad; none when it is over, since
// the coefficient needs the global norm). The stage keeps exact copies of what the step
// changes (parameters, gradients, Adam moments and step count). The final step for the
// same iteration (optimistic = false) then validates it: equal decision -> the copies are
// dropped; otherwise they are restored and the final step runs, so the parameters end
// bit-identical to the synchronous step.
struct ApplyOptimizerStep {
  int64_t iteration = 0;
  bool skip = false;
  double grad_scale = 1.0;
  double clip_coeff = 1.0;
  double lr = 0.0;
  // decoupled_lr: the learning rate of the embedding / output layer weights
  // (--decoupled-lr; layers::OptimizerTensor::is_decoupled_lr); unset: lr.
  std::optional<double> decoupled_lr;
  double weight_decay = 0.0;
  bool optimistic = false;
  // min_seconds: benchmarks on the synthetic backend (CoordinatorConfig::
  // synthetic_optimizer_seconds): an applied (not skipped) step lasts at least this long on
  // the stage's strand, which sleeps the rest. 0 = as long as AdamW takes.
  double min_seconds = 0.0;
};

// ---- DataActor -> StageActor ----

// MicroBatchData: the data of one micro-batch of this stage's DP replica (tokens/positions
// for the first stage, labels/loss mask for the last, document starts for all with
// --reset-attention-mask).
struct MicroBatchData {
  int64_t iteration = 0;
  int32_t microbatch = 0;
  bool eval = false;
  std::shared_ptr<const data::GptMicroBatch> batch;
};

// ---- StageActor -> StageActor ----

// ActivationMessage: a forward activation [b, s, h] (kForward, to the next virtual stage)
// or an input gradient [b, s, h] (kBackward, to the previous one) of one micro-batch.
// `chunk` is the RECEIVING model chunk. The payload is shared and immutable; the receiver
// drops its reference once the op that consumes it has run.
struct ActivationMessage {
  int64_t iteration = 0;
  bool eval = false;
  int32_t microbatch = 0;
  int32_t chunk = 0;
  Direction direction = Direction::kForward;
  int32_t from_rank = 0;  // sender's global rank (for error messages)
  Activation tensor;
};

// ---- communicator callback -> its StageActor ----

// CollectiveKind: what a finished collective was for.
enum class CollectiveKind : uint8_t { kEmbeddingGrad, kGradBucket, kParamGather };

// CollectiveDone: one posted collective completed (ok) or failed with `error` (a
// mismatch or timeout report naming group, op, sequence and bytes).
struct CollectiveDone {
  int64_t iteration = 0;
  CollectiveKind kind = CollectiveKind::kGradBucket;
  int32_t chunk = 0;
  int32_t bucket = 0;
  bool ok = true;
  std::string error;
};

// SlotReleased: a payload of this stage's `channel` (0 = activations, 1 = gradients) was
// released by its consumer (actors/activation_pool.h).
struct SlotReleased {
  int32_t channel = 0;
};

// GradsPosted: the strand scaled chunk `chunk`'s gradients and posted `num_collectives`
// collectives for them (their CollectiveDone messages may arrive before or after this).
struct GradsPosted {
  int64_t iteration = 0;
  int32_t chunk = 0;
  int32_t num_collectives = 0;
};

// ---- StageActor -> Coordinator ----

// StageIterationDone: a stage finished its schedule. loss_sum/num_tokens come from the
// last stage (0 elsewhere); grad_norm_sq is the sum of squares of this stage's
// gradients that count toward the global norm (unscaled, fp64); busy/idle seconds of
// its compute strand over the iteration.
struct StageIterationDone {
  int32_t stage = 0;            // global rank of the stage actor (pipeline-major grid order)
  int32_t pipeline_rank = 0;
  int32_t data_parallel_rank = 0;
  int32_t tensor_parallel_rank = 0;  // every TP rank of the last stage computes the same
                                     // loss: the coordinator counts TP rank 0's
  int64_t iteration = 0;
  bool eval = false;
  double loss_sum = 0.0;
  double num_tokens = 0.0;
  double grad_norm_sq = 0.0;
  bool grads_finite = true;
  double busy_seconds = 0.0;
  double wall_seconds = 0.0;
  int64_t peak_activation_bytes = 0;
  std::vector<TraceSpan> spans;  // the ops' timeline, with --trace-file
  // MoE models: this rank's MoE layers' routing statistics over the iteration (training).
  std::vector<layers::moe::MoELayerStats> moe_stats;
};

// StageStepDone: the optimizer step (or skip) of `iteration` is applied. With
// post-validation, `optimistic` says an optimistic step preceded the final one and
// `rolled_back` that it was undone and redone (else it was confirmed).
struct StageStepDone {
  int32_t stage = 0;
  int64_t iteration = 0;
  std::vector<TraceSpan> spans;  // the optimizer span, with --trace-file
  bool optimistic = false;
  bool rolled_back = false;
};

// StageFailed: an op failed; the job ends with this message.
struct StageFailed {
  std::string actor;      // e.g. "stage 0"
  int64_t iteration = 0;
  int32_t microbatch = -1;
  std::string op;         // "F3", "optimizer", ...
  std::string message;
};

// ReplaceProgram: between iterations, the stage takes a new program (another set of
// layers: runtime stage balancing), its optimizers and buckets, and answers
// ProgramReplaced.
struct ReplaceProgram {
  std::shared_ptr<StageProgram> program;
  std::vector<std::shared_ptr<layers::AdamWOptimizer>> optimizers;
  std::vector<layers::DataParallelBuckets> buckets;
};

// ProgramReplaced: the stage swapped its program (or could not: it was mid-iteration).
struct ProgramReplaced {
  int32_t rank = 0;
  bool ok = true;
  std::string error;
};

// ---- caller (train command, API) -> Coordinator ----

// RunTraining: run the configured training to its end; answered with TrainingSummary.
struct RunTraining {};

// TrainingSummary: how the run ended. ok = false carries the error (naming the actor,
// iteration, micro-batch and op where one failed).
struct TrainingSummary {
  bool ok = true;
  std::string error;
  int64_t first_iteration = 0;              // the iteration training resumed from
  int64_t last_iteration = 0;
  int64_t skipped_iterations = 0;
  std::vector<double> train_losses;         // per iteration run (NaN for a NaN iteration)
  std::vector<double> grad_norms;           // per iteration run
  std::vector<std::pair<int64_t, double>> valid_losses;  // (iteration, lm loss)
  double mean_tokens_per_second = 0.0;      // over all iterations after the first
  int64_t peak_activation_bytes = 0;        // largest stash of any stage
  std::vector<int64_t> rank_peak_activation_bytes;  // per rank, largest stash (bytes)
  // Per pipeline rank: idle share of the iteration wall time (1 - busy / wall, busy
  // averaged over DP replicas, wall = the slowest rank's), over the iterations after the
  // first.
  std::vector<double> stage_bubble_fraction;
  // --optimizer-post-validation: optimistic steps (rank x iteration) the final decision
  // confirmed, and those it rolled back and redid. Multi-process: the job's totals as of
  // the last all-gathered reports (the last iteration's are in only if an evaluation or
  // save exchange followed it).
  int64_t optimistic_steps_confirmed = 0;
  int64_t optimistic_steps_rolled_back = 0;
  // MoE: over every training step, MoE layer, micro-batch and rank, the smallest gap by
  // which a router's top-k choice cleared a tie (layers::moe::RouterState::min_topk_margin;
  // +inf without MoE). Parity tests use it to tell a draw whose routing can flip under a
  // different summation order (a margin near fp32's error) from a real mismatch.
  double moe_min_topk_margin = std::numeric_limits<double>::infinity();
};

// ---- compute strand -> its own StageActor ----

// OpFinished: op `op_index` of the running schedule finished on the strand.
struct OpFinished {
  int64_t iteration = 0;
  size_t op_index = 0;
  int64_t start_us = 0;  // TraceClockMicros() when the op started on the strand
  double seconds = 0.0;
  bool ok = true;
  std::string error;
  ForwardResult forward;         // for F ops
  std::vector<float> d_input;    // for B ops (not on the first virtual stage)
};

// StepFinished: the strand applied the optimizer step. Post-validation: `optimistic` for
// the provisional step; `validated` for a final step that checked an optimistic one,
// `rolled_back` when it restored the copies and redid the step (else it confirmed).
struct StepFinished {
  int64_t iteration = 0;
  bool optimistic = false;
  bool validated = false;
  bool rolled_back = false;
  int64_t start_us = 0;
  int64_t duration_us = 0;
  bool ok = true;
  std::string error;
  int32_t gather_collectives = 0;  // distributed optimizer: parameter all-gathers posted
};

// StealTimer: the dynamic policy's grace period for the blocked op of `iteration` ended
// (stage_actor.h): look again whether to run a deferred op.
struct StealTimer {
  int64_t iteration = 0;
};

// GradNormFinished: the strand computed the gradient statistics after the last op.
struct GradNormFinished {
  int64_t iteration = 0;
  double grad_norm_sq = 0.0;
  bool finite = true;
  std::vector<layers::moe::MoELayerStats> moe_stats;  // StageProgram::TakeMoEStats
  std::string error;  // StageProgram::FinishTrainingIteration's, empty when it succeeded
};

// StageIdentity: a stage actor's place in the grid.
struct StageIdentity {
  int32_t rank = 0;  // global rank
  int32_t pipeline_rank = 0;
  int32_t data_parallel_rank = 0;
  bool distributed_optimizer = false;
  int32_t tensor_parallel_rank = 0;
};

// SaveCheckpointShard: run `write_shard` on the stage's strand (between iterations, so
// parameters and optimizer state are quiescent); it writes this stage's shard of the
// checkpoint being assembled for `iteration` (optimizers: one per model chunk).
struct SaveCheckpointShard {
  int64_t iteration = 0;
  std::function<absl::Status(
      const StageIdentity&, StageProgram&,
      const std::vector<std::shared_ptr<layers::AdamWOptimizer>>& optimizers)>
      write_shard;
};

// ShardSaved: the stage's shard is written (or failed, with the error).
struct ShardSaved {
  int32_t stage = 0;
  int64_t iteration = 0;
  bool ok = true;
  std::string error;
};

// ---- control plane -> its Coordinator (multi-process jobs) ----

// ControlExchanged: the all-gather `sequence` of the coordinators' control plane
// (control_plane.h) completed: `blocks` holds every rank's block in rank order, or ok =
// false with the error (a mismatch, a timeout, a lost peer).
struct ControlExchanged {
  uint64_t sequence = 0;
  bool ok = true;
  std::string error;
  std::vector<std::vector<uint8_t>> blocks;
};

// ---- Coordinator -> DataActor ----

// ProduceMicroBatches: send the `num_microbatches` micro-batches of `iteration` to the
// stages. Train: global samples [first_sample, first_sample + n * micro_batch_size) of
// the train split in Megatron's order; eval: of the valid split.
struct ProduceMicroBatches {
  int64_t iteration = 0;
  bool eval = false;
  int64_t first_sample = 0;
  int32_t num_microbatches = 0;
};

// DataFailed: the data actor could not read a sample.
struct DataFailed {
  int64_t iteration = 0;
  std::string message;
};

}  // namespace mxmaca::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::RunStageIteration)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::ApplyOptimizerStep)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::MicroBatchData)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::StageIterationDone)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::StageStepDone)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::StageFailed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::OpFinished)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::StepFinished)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::GradNormFinished)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::StealTimer)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::ProduceMicroBatches)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::DataFailed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::SaveCheckpointShard)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::RunTraining)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::TrainingSummary)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::ShardSaved)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::ActivationMessage)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::CollectiveDone)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::GradsPosted)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::SlotReleased)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::ReplaceProgram)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::ProgramReplaced)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(mxmaca::actors::ControlExchanged)

namespace mxmaca::actors {

// CoordinatorActor: receives stage and data reports.
using CoordinatorActor =
    caf::typed_actor<caf::replies_to<RunTraining>::with<TrainingSummary>,
                     caf::reacts_to<StageIterationDone>, caf::reacts_to<StageStepDone>,
                     caf::reacts_to<StageFailed>, caf::reacts_to<DataFailed>,
                     caf::reacts_to<ShardSaved>, caf::reacts_to<ProgramReplaced>,
                     caf::reacts_to<ControlExchanged>>;

// StageActorHandle: a pipeline stage (see stage_actor.h).
using StageActorHandle =
    caf::typed_actor<caf::reacts_to<RunStageIteration>, caf::reacts_to<MicroBatchData>,
                     caf::reacts_to<ApplyOptimizerStep>, caf::reacts_to<OpFinished>,
                     caf::reacts_to<StepFinished>, caf::reacts_to<GradNormFinished>,
                     caf::reacts_to<SaveCheckpointShard>, caf::reacts_to<ActivationMessage>,
                     caf::reacts_to<CollectiveDone>, caf::reacts_to<GradsPosted>,
                     caf::reacts_to<SlotReleased>, caf::reacts_to<ReplaceProgram>,
                     caf::reacts_to<StealTimer>>;

// DataActorHandle: the data loader (see data_actor.h).
using DataActorHandle = caf::typed_actor<caf::reacts_to<ProduceMicroBatches>>;

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_MESSAGES_H_
