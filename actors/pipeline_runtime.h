// actors/pipeline_runtime.h: runs a PP x DP job with every rank in this process — the
// in-process runtime behind `mxmaca train`, the public API, the parity tests and the
// synthetic-time benchmarks.
//
// It spawns, in one CAF actor system (scheduler.max-threads = 1: CAF workers only route
// messages), the Coordinator, the DataActor and one StageActor per rank (rank =
// ((pipeline_rank * dp + data_parallel_rank) * cp + context_parallel_rank) * tp +
// tensor_parallel_rank, Megatron's tp-cp-ep-dp-pp order), each with
// its own compute strand on a ComputePool; the ranks' collectives go through an
// InProcessHub (transport/inprocess_communicator.h) watched by a CollectiveWatchdog, so a
// collective that does not complete within the timeout fails on every rank that posted
// it, with a report naming group, op, sequence and bytes, and the job ends with it.
// Then it sends RunTraining and waits for the summary.
//
// Multi-process jobs (PipelineRuntimeOptions::communicator set; one rank per process, as
// Megatron runs one process per device): the same actors, but this process holds only its
// own rank's StageActor. Its collectives, the coordinators' ControlPlane
// (control_plane.h) and the activations to and from its pipeline neighbours
// (remote_stage_link.h) all go over `communicator` (UCX), each on groups of their own;
// every process runs its own Coordinator and DataActor (the data actor reads the same
// deterministic samples and hands this rank the ones it needs).
#ifndef MXMACA_ACTORS_PIPELINE_RUNTIME_H_
#define MXMACA_ACTORS_PIPELINE_RUNTIME_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "actors/coordinator.h"
#include "actors/data_actor.h"
#include "actors/messages.h"
#include "actors/stage_program.h"
#include "kernels/exec_context.h"
#include "layers/grad_buckets.h"
#include "layers/optimizer.h"
#include "transport/inprocess_communicator.h"

namespace mxmaca::actors {

// PipelineRank: one rank's state, handed to its StageActor.
struct PipelineRank {
  int32_t rank = 0;
  int32_t pipeline_rank = 0;
  int32_t data_parallel_rank = 0;
  std::shared_ptr<StageProgram> program;
  std::vector<std::shared_ptr<layers::AdamWOptimizer>> optimizers;  // one per chunk
  std::vector<layers::DataParallelBuckets> buckets;                 // one per chunk
  int32_t tensor_parallel_rank = 0;
  int32_t context_parallel_rank = 0;
};

// PipelineRuntimeOptions: the job's layout and runtime settings.
struct PipelineRuntimeOptions {
  int32_t pipeline_size = 1;
  int32_t data_parallel_size = 1;
  // tensor_parallel_size > 1: the programs hold TP shards and block their strand in TP
  // collectives (layers/tensor_parallel.h), so every rank gets its own pool thread.
  int32_t tensor_parallel_size = 1;
  // context_parallel_size > 1 (issue 9): each (stage, replica) has TP x CP ranks, rank =
  // ((pipeline_rank * dp + data_parallel_rank) * CP + context_parallel_rank) * TP +
  // tensor_parallel_rank (Megatron's order); the stage actors see a within-stage width of
  // TP x CP (stage_actor.h), so pipeline neighbours and DP replicas pair up as with TP,
  // and gradients are reduced over the data-parallel x context-parallel group. The
  // programs hold CP shards of the sequence and block in the CP ring, as TP ones do.
  int32_t context_parallel_size = 1;
  int compute_threads = 1;     // ComputePool threads (strands share them)
  // ranks_block_on_peers: ranks' ops wait for ranks outside their (stage, replica) — the
  // MoE token exchange of expert parallelism across data-parallel replicas — so, as with
  // TP / CP, each in-process rank gets its own pool thread (else a waiting rank could hold
  // the thread its peer needs).
  bool ranks_block_on_peers = false;
  // hub: the ranks' in-process communicator; null = RunPipelineJob creates one. Callers
  // whose programs use it themselves (TP) create it first; it must outlive the call.
  std::shared_ptr<transport::InProcessHub> hub;
  kernels::ExecContext exec;   // per-op context (threads per op, precision)
  bool reset_attention_mask = false;
  bool distributed_optimizer = false;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  bool calculate_per_token_loss = false;
  bool trace = false;          // stage actors record spans (with CoordinatorConfig::trace_file)
  absl::Duration collective_timeout = absl::Minutes(10);  // --distributed-timeout-minutes
  // --inject-stage-slowdown STAGE:FACTOR[:FROM_ITER] (StageActorConfig::slowdown_factor).
  int32_t slowdown_stage = -1;
  double slowdown_factor = 1.0;
  int64_t slowdown_from_iteration = 1;
  absl::Duration watchdog_period = absl::Seconds(1);
  // Multi-process (see the file comment): this process's endpoint, which must outlive the
  // call; `ranks` then holds exactly the rank communicator->rank(). check_timeouts: the
  // watchdog's probe (UcxCommunicator::CheckTimeouts); may be empty.
  transport::Communicator* communicator = nullptr;
  std::function<std::vector<absl::Status>(absl::Time)> check_timeouts;
};

// RunPipelineJob: runs the job to its end (see file comment). `ranks` must hold
// pipeline_size * data_parallel_size * context_parallel_size * tensor_parallel_size entries
// in rank order;
// `coordinator` is the run (its stages/data/pipeline sizes are filled here); `data` the
// data actor's settings
// (recipients and coordinator are filled here: every TP rank of the first and last
// pipeline rank of each replica, and every rank with reset_attention_mask). Returns the coordinator's summary
// (ok = false with the error naming actor, iteration, micro-batch and op when a rank
// failed). The coordinator's train/eval schedules, when set, must match the job (stages,
// chunks, micro-batches) and pass scheduler::ValidateSchedule (complete, FIFO channels,
// no circular wait), else InvalidArgument quoting the validator — nothing runs.
// Errors: InvalidArgument for a rank list that does not match the sizes (multi-process:
// not exactly this process's rank);
// Internal when the coordinator ended without a summary.
absl::StatusOr<TrainingSummary> RunPipelineJob(std::vector<PipelineRank> ranks,
                                               const PipelineRuntimeOptions& options,
                                               std::shared_ptr<CoordinatorConfig> coordinator,
                                               DataActorConfig data);

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_PIPELINE_RUNTIME_H_
