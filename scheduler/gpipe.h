// scheduler/gpipe.h: the GPipe pipeline schedule (all forwards, then all backwards).
//
// Source: Huang et al., "GPipe: Efficient Training of Giant Neural Networks using Pipeline
// Parallelism", NeurIPS 2019, Fig. 2(c); op order as in PyTorch's
// torch.distributed.pipelining.ScheduleGPipe (backwards in micro-batch order 0..m-1).
#ifndef MXMACA_SCHEDULER_GPIPE_H_
#define MXMACA_SCHEDULER_GPIPE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "scheduler/pipeline_schedule.h"

namespace mxmaca::scheduler {

// GPipeSchedule: every stage s of p runs F0 .. F(m-1), then B0 W0 B1 W1 .. B(m-1) W(m-1).
// Each W immediately follows its B (the fused backward of GPipe and Megatron; W is not
// deferred), so a stage keeps all m micro-batches stashed at its peak. One chunk per
// stage (v = 1). With equal op times per stage and no communication latency the bubble
// is (p - 1) / (m + p - 1) of the step (SimulateSchedule with fused backward).
// Errors: InvalidArgument when p < 1 or m < 1 (CheckScheduleDimensions).
absl::StatusOr<PipelineSchedule> GPipeSchedule(int32_t num_stages, int32_t num_microbatches);

}  // namespace mxmaca::scheduler

#endif  // MXMACA_SCHEDULER_GPIPE_H_
