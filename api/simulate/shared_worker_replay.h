// api/simulate/shared_worker_replay.h: replays a pipeline schedule whose ranks share a
// small number of workers — the CPU backend's shape, where every rank is a compute strand
// on a ComputePool of D threads (actors/compute_pool.h) and D is often smaller than the
// number of ranks (PP x DP strands on 2 cores).
//
// Model (docs/SIMULATOR.md, "Calibrated cost tables"): `replicas` copies of the schedule
// (the DP replicas, independent until the gradient sync) run as replicas x p strands.
// Dependencies are scheduler::SimulateSchedule's (schedule_simulator.h): F(mb) on virtual
// stage k > 0 needs F(mb) of k - 1, B(mb) needs B(mb) of k + 1 and its own F, W needs its
// B; a message between virtual stages arrives `comm_latency` after it leaves; with
// fused_backward a B directly followed by its W sends its gradient when that W ends. An op
// becomes ready when its strand's previous op has finished and its inputs have arrived;
// ready ops wait in one FIFO queue (by ready time; ties: lower strand first) for the first
// of `workers` free workers (the pool's round-robin over ready strands). With workers >=
// replicas x p this is exactly SimulateSchedule's replay.
#ifndef MXMACA_API_SIMULATE_SHARED_WORKER_REPLAY_H_
#define MXMACA_API_SIMULATE_SHARED_WORKER_REPLAY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/pipeline_schedule.h"
#include "scheduler/schedule_simulator.h"

namespace mxmaca::api {

// SharedWorkerTiming: the replay's result, seconds (OpCosts' unit) from the step's start.
struct SharedWorkerTiming {
  double makespan = 0;               // last op's finish over all strands
  std::vector<double> stage_finish;  // [p] latest finish of stage s over the replicas
  double busy = 0;                   // sum of all op durations (all strands)
  // ops[s]: stage s's op timings in replica 0 (list order), for traces and bubbles.
  std::vector<std::vector<scheduler::OpTiming>> ops;
};

// ReplayOnSharedWorkers: the replay above. Errors: InvalidArgument for workers < 1,
// replicas < 1, costs not of size p or negative, and a schedule that cannot finish
// ("stuck": no op can become ready), naming the first waiting op.
absl::StatusOr<SharedWorkerTiming> ReplayOnSharedWorkers(const scheduler::PipelineSchedule& schedule,
                                                         const scheduler::OpCosts& costs,
                                                         int replicas, int workers);

}  // namespace mxmaca::api

#endif  // MXMACA_API_SIMULATE_SHARED_WORKER_REPLAY_H_
