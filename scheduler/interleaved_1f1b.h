// scheduler/interleaved_1f1b.h: the interleaved 1F1B schedule with virtual pipeline stages.
//
// Source: Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
// Using Megatron-LM", SC 2021, §2.2.2; op order as Megatron-LM's
// megatron/core/pipeline_parallel/schedules.py (core_v0.15.0):
// get_schedule_table, get_pp_rank_microbatches and
// forward_backward_pipelining_with_interleaving.
#ifndef MXMACA_SCHEDULER_INTERLEAVED_1F1B_H_
#define MXMACA_SCHEDULER_INTERLEAVED_1F1B_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/pipeline_schedule.h"

namespace mxmaca::scheduler {

// InterleavedScheduleTable: Megatron's get_schedule_table: the (micro-batch, chunk) order in
// which every stage runs its forwards. Micro-batches are cut into groups of `group_size`
// (the last group takes the remainder); within a group, chunk 0 runs for all the group's
// micro-batches, then chunk 1, ... E.g. m = 5, v = 2, group_size = 3:
// (0,0) (1,0) (2,0) (0,1) (1,1) (2,1) (3,0) (4,0) (3,1) (4,1). Size v * m.
// Preconditions (checked by the caller): m, v, group_size >= 1.
std::vector<std::pair<int32_t, int32_t>> InterleavedScheduleTable(int32_t num_microbatches,
                                                                  int32_t num_chunks,
                                                                  int32_t group_size);

// Interleaved1F1BSchedule: p stages, v model chunks per stage (chunk c of stage s is
// virtual stage c * p + s), m micro-batches, `group_size` contiguous micro-batches per
// virtual stage (Megatron's --microbatch-group-size-per-virtual-pipeline-stage; 0 means
// its default, p). With T = InterleavedScheduleTable(m, v, group_size), stage s runs
//   warm-up:   w = min((p - s - 1) * 2 + (v - 1) * group_size, v * m) forwards F(T[0..w));
//   steady:    for k in [0, v * m - w): F(T[w + k]), then B(k') W(k');
//   cool-down: B(k') W(k') for the remaining k,
// where the k-th backward runs T[k]'s micro-batch on chunk v - 1 - T[k].chunk (backwards
// visit the chunks in reverse). W immediately follows its B (Megatron's fused backward).
// With equal op times and no latency the bubble is (p - 1) / (v * m + p - 1) of the step.
//
// v = 1 returns OneFOneBSchedule(p, m): Megatron turns a virtual pipeline size of 1 into
// "no interleaving" (arguments.py, core_r0.14.0 on).
// Deviation: Megatron also requires p > 2 (p > 1 with --overlap-p2p-comm) because of NCCL
// batched send/recv pairing; actor messages have no such limit, so p = 1 and 2 are allowed
// here (the validator proves those schedules deadlock-free).
// Errors: InvalidArgument when p, v or m < 1; when group_size is not in [p, m] (Megatron:
// "The number of contiguous micro-batches in a virtual pipeline stage should range in
// [PP, M]", which for the default group_size = p means m >= p); when 0 < m % group_size < p
// (Megatron: the final group would leave dependency bubbles).
absl::StatusOr<PipelineSchedule> Interleaved1F1BSchedule(int32_t num_stages, int32_t num_chunks,
                                                         int32_t num_microbatches,
                                                         int32_t group_size = 0);

}  // namespace mxmaca::scheduler

#endif  // MXMACA_SCHEDULER_INTERLEAVED_1F1B_H_
