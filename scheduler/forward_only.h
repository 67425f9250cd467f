// scheduler/forward_only.h: the forward-only (evaluation) pipeline schedule.
//
// Source: Megatron-LM megatron/core/pipeline_parallel/schedules.py (core_v0.15.0): with
// forward_only every micro-batch is a warm-up forward (get_pp_rank_microbatches), in
// get_schedule_table order when interleaving.
#ifndef MXMACA_SCHEDULER_FORWARD_ONLY_H_
#define MXMACA_SCHEDULER_FORWARD_ONLY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "scheduler/pipeline_schedule.h"

namespace mxmaca::scheduler {

// ForwardOnlyPipelineSchedule: every stage of p runs only forwards, one per (micro-batch,
// chunk): F0 .. F(m-1) for v = 1; for v > 1 the order of
// InterleavedScheduleTable(m, v, group_size) (group_size 0 means p, clamped to m so that
// evaluation accepts m < p). The result has forward_only = true. Nothing is stashed: an
// activation is freed once its forward has sent it on.
// Errors: InvalidArgument when p, v or m < 1, or group_size < 0.
absl::StatusOr<PipelineSchedule> ForwardOnlyPipelineSchedule(int32_t num_stages, int32_t num_chunks,
                                                             int32_t num_microbatches,
                                                             int32_t group_size = 0);

}  // namespace mxmaca::scheduler

#endif  // MXMACA_SCHEDULER_FORWARD_ONLY_H_
