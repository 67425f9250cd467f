// scheduler/schedule_validator.h: proves a PipelineSchedule complete and deadlock-free
// before a runtime executes it.
//
// docs/ARCHITECTURE.md / issue 4: a StageActor executes exactly the op list it is given, so a bad
// list must be rejected up front with a message that names the stage and op, never left
// to hang. The dependency and message model is SimulateSchedule's
// (schedule_simulator.h): in-order stages, non-blocking sends, one FIFO channel per
// (sender stage, receiver stage, direction).
#ifndef MXMACA_SCHEDULER_SCHEDULE_VALIDATOR_H_
#define MXMACA_SCHEDULER_SCHEDULE_VALIDATOR_H_

#include "absl/status/status.h"
#include "scheduler/pipeline_schedule.h"

namespace mxmaca::scheduler {

// ValidateSchedule: OK when `schedule` can run to completion; else InvalidArgument with the
// first problem found, checked in this order:
//   1. shape: p, v, m >= 1 and one list per stage;
//   2. every op in range (micro-batch in [0, m), chunk in [0, v)); a forward-only schedule
//      holds no B or W ("stage 1: B0 (op 4) in a forward-only schedule");
//   3. no op twice on a stage ("stage 2: duplicate F3.c1 at ops 4 and 9");
//   4. complete: each (chunk, micro-batch) of each stage has one F, and for training one B
//      and one W ("stage 1: missing W2");
//   5. stage-local order: F before B before W of the same (micro-batch, chunk)
//      ("stage 2: B3 (op 5) before F3 (op 7)");
//   6. FIFO channels: for each (sender, receiver, direction) the order in which the
//      sender emits messages equals the order in which the receiver consumes them
//      ("crossed sends on channel stage 0 -> stage 1 (activations): message 1 sent is
//      F2's output (stage 0 op 2) but stage 1 consumes F1 (op 1) first");
//   7. no circular wait, found by replaying the lists with unit op times
//      ("circular wait: stage 0 waits at B0 (op 2) for B0 from stage 1; stage 1 waits at
//      F1 (op 1) for F1 from stage 0").
// Each direction of each stage pair is one channel: activations go from virtual stage k
// to k + 1, gradients from k + 1 to k, with k = VirtualStage(schedule, chunk, stage) (the
// schedule's placement: Megatron's interleaved layout or ZB-V's V shape).
absl::Status ValidateSchedule(const PipelineSchedule& schedule);

}  // namespace mxmaca::scheduler

#endif  // MXMACA_SCHEDULER_SCHEDULE_VALIDATOR_H_
