// scheduler/zero_bubble_h1.h: the ZB-H1 zero-bubble pipeline schedule (split backward).
//
// Source: Qi, Wan, Huang, Lin, "Zero Bubble Pipeline Parallelism", ICLR 2024, §3.1 and
// Fig. 3 (ZB-H1): 1F1B's order of F and B, with each stage's weight-gradient passes W
// shifted later so that they fill the cool-down bubbles.
#ifndef MXMACA_SCHEDULER_ZERO_BUBBLE_H1_H_
#define MXMACA_SCHEDULER_ZERO_BUBBLE_H1_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "scheduler/pipeline_schedule.h"

namespace mxmaca::scheduler {

// ZeroBubbleH1Schedule: stage s of p runs 1F1B's F/B order — w = min(p - s - 1, m) warm-up
// forwards, then F(w + i) B(i) for i in [0, m - w), then the remaining B — but keeps up to
// s weight-gradient passes pending: after each B, once more than s W are pending, the
// oldest runs; in cool-down each B is followed by the oldest pending W; the rest run at
// the end. The last stage thus sends its input gradients as early as possible and the
// deferred W fill the bubbles. With equal F, B, W times t, zero latency and the gradient
// sent when B ends (OpCosts::fused_backward = false) the step takes (3m + p - 1) t, i.e. a
// bubble of (p - 1)(t_F + t_B - t_W) instead of 1F1B's (p - 1)(t_F + t_B + t_W).
// Every stage then holds up to min(p, m) micro-batches between F and W (1F1B's peak on
// stage 0; the paper's memory argument: a pending W keeps only its smaller W stash).
// One chunk per stage (v = 1).
// Errors: InvalidArgument when p < 1 or m < 1.
absl::StatusOr<PipelineSchedule> ZeroBubbleH1Schedule(int32_t num_stages, int32_t num_microbatches);

}  // namespace mxmaca::scheduler

#endif  // MXMACA_SCHEDULER_ZERO_BUBBLE_H1_H_
