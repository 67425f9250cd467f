// actors/stage_actor.h: StageActor, one pipeline stage of one data-parallel replica.
//
// docs/ARCHITECTURE.md: an actor owns its parameters, its optimizer state and its device stream
// (here a compute Strand of the process's ComputePool). It executes exactly the op list
// (F/B/W per micro-batch and model chunk) the coordinator hands it for an iteration: an op
// starts when it is next in the list and its inputs have arrived — the micro-batch's data
// (first and last virtual stage), the previous virtual stage's activation (F) or the next
// one's input gradient (B), each an ActivationMessage from the neighbouring stage actor.
// Ops run on the strand and report back by message, so the CAF worker never blocks on
// compute.
//
// Gradient synchronisation (Megatron-Core finalize_model_grads and DDP,
// megatron/core/distributed/): when a chunk's last W of the iteration has run (at once
// with --overlap-grad-reduce, else after the whole schedule), its gradients are final:
//   1. tied word embeddings: the first virtual stage's embedding gradient and the last
//      one's copy are summed (all-reduce over the embedding group), so both copies take
//      identical optimizer steps;
//   2. data parallel: the gradients are scaled by 1/dp (Megatron's averaging; not with
//      --calculate-per-token-loss) and reduced per bucket, last bucket first — all-reduce,
//      or reduce-scatter with --use-distributed-optimizer.
// The embedding sum comes first so the distributed optimizer's shards (which cut the
// two copies differently) see the summed value. Then the stage computes the squared
// grad norm of the shard it owns (every logical parameter counted once: the tied copy is
// skipped, and each DP rank reads only its shard of every bucket) and reports. The
// optimizer step follows the coordinator's decision; with the distributed optimizer each
// rank updates its shard and the parameters are all-gathered per bucket (before the next
// op of this stage with --overlap-param-gather, else before the step is reported).
// Every collective error (mismatch, timeout) fails the job naming the actor.
//
// --optimizer-post-validation (messages.h ApplyOptimizerStep): an optimistic step arrives
// after the report; the stage saves exact copies (step_backup.h) and steps at once. The
// final step of that iteration confirms it or restores the copies and redoes it; either
// runs on the strand before any op of the next iteration, so no op ever sees parameters
// that are later rolled back. Ranks whose step all-gathers parameters (distributed
// optimizer, dp > 1) ignore optimistic steps and wait for the final one.
#ifndef MXMACA_ACTORS_STAGE_ACTOR_H_
#define MXMACA_ACTORS_STAGE_ACTOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/compute_pool.h"
#include "actors/messages.h"
#include "actors/remote_stage_link.h"
#include "actors/stage_program.h"
#include "kernels/exec_context.h"
#include "layers/grad_buckets.h"
#include "layers/optimizer.h"
#include "transport/communicator.h"
#include "transport/process_group.h"

namespace mxmaca::actors {

// PipelinePeers: every stage actor of the job, indexed by global rank
// (rank = (pipeline_rank * dp + data_parallel_rank) * tp + tensor_parallel_rank,
// Megatron's tp-cp-ep-dp-pp order with CP = 1). Filled by whoever spawns the actors,
// before the first iteration.
// A null handle is a rank in another process: messages to it go through `remote`.
struct PipelinePeers {
  std::vector<StageActorHandle> by_rank;
  std::shared_ptr<RemoteStageLinks> remote;  // multi-process jobs only
};

// StageActorConfig: what a StageActor is spawned with.
struct StageActorConfig {
  int32_t rank = 0;                  // global rank
  int32_t pipeline_rank = 0;         // p index
  int32_t pipeline_size = 1;         // P
  int32_t data_parallel_rank = 0;    // r
  int32_t data_parallel_size = 1;    // dp
  int32_t tensor_parallel_rank = 0;  // t (the program holds this rank's shards)
  int32_t tensor_parallel_size = 1;  // tp
  // Context parallelism (CP > 1): the runtime's within-stage width. tensor_parallel_size
  // is then TP x CP and tensor_parallel_rank c TP + t (Megatron's order puts CP right
  // after TP, so rank = (p dp + r) (TP CP) + c TP + t); the program holds TP rank t's
  // shards for CP rank c. Gradients are reduced over data_parallel_group, which is then
  // Megatron's data-parallel x context-parallel group ('dp-cp', index r CP + c) with the
  // buckets cut into dp x CP shards; the gradient scale stays 1 / dp (the CP ranks hold
  // parts of one replica's gradient).
  int32_t context_parallel_size = 1;  // CP
  int32_t context_parallel_rank = 0;  // c
  // reset_attention_mask: every chunk needs the micro-batch's data (document starts).
  bool reset_attention_mask = false;
  kernels::ExecContext exec;         // passed to the optimizer and reduction kernels
  CoordinatorActor coordinator;
  std::shared_ptr<const PipelinePeers> peers;
  std::shared_ptr<Strand> strand;
  // program and optimizers (one per model chunk): shared with the strand's tasks.
  std::shared_ptr<StageProgram> program;
  std::vector<std::shared_ptr<layers::AdamWOptimizer>> optimizers;
  // Data parallel and tied embeddings. comm may be null when dp == 1 and no embedding
  // group of size 2 exists. buckets[c]: chunk c's gradient buckets (dp == 1: one bucket
  // over the arena, used for the grad norm only).
  transport::Communicator* comm = nullptr;
  std::optional<transport::ProcessGroup> data_parallel_group;
  std::optional<transport::ProcessGroup> embedding_group;  // size 2: first + last stage
  std::vector<layers::DataParallelBuckets> buckets;
  bool distributed_optimizer = false;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  bool calculate_per_token_loss = false;
  // trace: record a span per op (and optimizer step) and send them with the reports.
  bool trace = false;
  // --inject-stage-slowdown: from iteration slowdown_from_iteration on, each op of this
  // stage takes slowdown_factor times as long (the strand sleeps the extra after the op;
  // for tests and benchmarks of the dynamic policy — on a 2-core machine a competing
  // process would slow every stage alike).
  double slowdown_factor = 1.0;
  int64_t slowdown_from_iteration = 1;
};

// SpawnStageActor: spawns the actor in `system`.
StageActorHandle SpawnStageActor(caf::actor_system& system, StageActorConfig config);

// StageActorName: "stage p" or "stage p (data-parallel rank r)" for messages.
std::string StageActorName(const StageActorConfig& config);

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_STAGE_ACTOR_H_
