// scheduler/one_f_one_b.h: the 1F1B (PipeDream-Flush) pipeline schedule.
//
// Source: Narayanan et al., "Memory-Efficient Pipeline-Parallel DNN Training" (PipeDream-2BW
// / PipeDream-Flush), ICML 2021, and "Efficient Large-Scale Language Model Training on GPU
// Clusters Using Megatron-LM", SC 2021, §2.2.1; op order as Megatron-LM's
// megatron/core/pipeline_parallel/schedules.py forward_backward_pipelining_without_interleaving
// (core_v0.15.0).
#ifndef MXMACA_SCHEDULER_ONE_F_ONE_B_H_
#define MXMACA_SCHEDULER_ONE_F_ONE_B_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "scheduler/pipeline_schedule.h"

namespace mxmaca::scheduler {

// OneFOneBSchedule: stage s of p runs
//   warm-up:   w = min(p - s - 1, m) forwards F0 .. F(w-1);
//   steady:    for i in [0, m - w): F(w + i), then B(i) W(i);
//   cool-down: B(i) W(i) for the remaining i in [m - w, m).
// W immediately follows its B (Megatron's backward computes both at once). Stage s
// therefore holds at most min(p - s, m) micro-batches' activations (F done, W not yet),
// and with equal op times per stage and no latency the bubble is (p - 1) / (m + p - 1) of
// the step. Megatron accepts any m >= 1 here (m < p only lengthens the bubble).
// Errors: InvalidArgument when p < 1 or m < 1.
absl::StatusOr<PipelineSchedule> OneFOneBSchedule(int32_t num_stages, int32_t num_microbatches);

}  // namespace mxmaca::scheduler

#endif  // MXMACA_SCHEDULER_ONE_F_ONE_B_H_
