// scheduler/schedule_simulator.h: replays a PipelineSchedule with given op times and
// reports per-stage busy/idle time, makespan and bubble fraction; counts stashes.
//
// Model: each stage runs its op list strictly in order, one op at a time; an op starts
// when its stage is free and its inputs have arrived (virtual stage k of an op on chunk c
// of stage s: VirtualStage(schedule, c, s), i.e. the schedule's placement):
//   F(mb) on virtual stage k > 0 needs F(mb) of virtual stage k - 1 (an activation);
//   B(mb) on k < K - 1 (K = v * p) needs B(mb) of k + 1 (an input gradient); every B also
//     needs its own F on the same stage (the stash);
//   W(mb) on k needs B(mb) on k (same stage).
// A message between different virtual stages (also between two chunks of one stage: p = 1
// with v > 1, or stage p - 1 of a V-shape schedule) arrives
// `comm_latency` after its sender's op ends; sends never block (actor messages, unbounded
// mailboxes) and links are not a shared resource (no bandwidth contention). Because each
// stage's order is fixed, the replay computes the exact event times (a longest path in the
// op graph) and finds every circular wait.
#ifndef MXMACA_SCHEDULER_SCHEDULE_SIMULATOR_H_
#define MXMACA_SCHEDULER_SCHEDULE_SIMULATOR_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/pipeline_schedule.h"

namespace mxmaca::scheduler {

// OpCosts: how long each op takes, in any one time unit (e.g. ms), used consistently.
struct OpCosts {
  // per_stage[s][kind]: duration of one op of that kind (index = OpKind value) on stage s
  // for one (micro-batch, chunk); >= 0. Size p.
  std::vector<std::array<double, 3>> per_stage;
  // comm_latency: time from the end of the sending op to the receiver's input being
  // ready; >= 0.
  double comm_latency = 0;
  // fused_backward: when true and a B is immediately followed in its stage's list by the
  // W of the same (micro-batch, chunk), B's input gradient leaves only when that W ends —
  // Megatron's backward, which computes both before sending. When false it leaves when B
  // ends (zero-bubble style split backward).
  bool fused_backward = false;

  // Uniform: the same F/B/W times on all p stages.
  static OpCosts Uniform(int32_t num_stages, double forward, double backward_input,
                         double backward_weight, double comm_latency = 0,
                         bool fused_backward = false);
};

// OpTiming: when one op ran, in OpCosts' time unit, from the iteration's start (time 0).
struct OpTiming {
  double start = 0;
  double finish = 0;
};

// ScheduleTiming: the result of SimulateSchedule.
struct ScheduleTiming {
  double makespan = 0;                     // latest finish of any op
  std::vector<double> busy;                // [p] sum of op durations on each stage
  std::vector<double> idle;                // [p] makespan - busy
  double bubble_fraction = 0;              // sum(idle) / (p * makespan); 0 when makespan = 0
  std::vector<std::vector<OpTiming>> ops;  // [p][op index in the stage's list]
};

// SimulateSchedule: replays `schedule` under the model above with `costs`.
// Messages are matched to their consumer by identity (micro-batch, virtual stage); FIFO
// channel order is ValidateSchedule's job, which also checks completeness more fully.
// Errors (InvalidArgument, naming the stage, op and position): costs of the wrong size or
// negative; stages.size() != p; an op whose micro-batch or chunk is out of range; an op
// listed twice on a stage; an op whose input is never produced or whose stage waits in a
// cycle: "circular wait: stage 0 waits at B0 (op 3) for B0 from stage 1; stage 1 waits at
// F1 (op 2) for F1 from stage 0".
absl::StatusOr<ScheduleTiming> SimulateSchedule(const PipelineSchedule& schedule,
                                                const OpCosts& costs);

// PeakStashedMicrobatches: per stage [p], the most (micro-batch, chunk) activations held at
// once while running the list in order: one is stashed by its F and released by its W
// (the last op that needs it). For 1F1B this is min(p - s, m) on stage s, for GPipe m.
// Forward-only schedules keep none (each activation leaves with its F): all zeros.
std::vector<int32_t> PeakStashedMicrobatches(const PipelineSchedule& schedule);

}  // namespace mxmaca::scheduler

#endif  // MXMACA_SCHEDULER_SCHEDULE_SIMULATOR_H_
