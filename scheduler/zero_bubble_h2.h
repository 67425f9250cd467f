// scheduler/zero_bubble_h2.h: the ZB-H2 zero-bubble pipeline schedule (split backward,
// more memory than 1F1B).
//
// Source: Qi, Wan, Huang, Lin, "Zero Bubble Pipeline Parallelism", ICLR 2024, §3.1 and
// Fig. 3 (bottom): extra forwards in the warm-up fill the bubble before the first B, and
// the weight-gradient passes W are moved to the tail, so that with equal F, B, W times each
// stage's busy period is a parallelogram of the same length 3m·t.
#ifndef MXMACA_SCHEDULER_ZERO_BUBBLE_H2_H_
#define MXMACA_SCHEDULER_ZERO_BUBBLE_H2_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "scheduler/pipeline_schedule.h"

namespace mxmaca::scheduler {

// ZeroBubbleH2Schedule: stage s of p runs w = min(2 (p - 1 - s), m) warm-up forwards, then
// F(w + i) B(i) for i in [0, m - w), then the remaining B, and keeps up to 2s weight-
// gradient passes pending: after each B, while more than 2s W are pending, the oldest
// runs; the rest run at the end (stage s ends with 2s + 1 W in a row). Stage 0 thus runs
// 2p - 1 forwards before its first B, and stage p - 1 alternates F and B while W waits.
// Timing (SimulateSchedule, no latency, gradient sent when B ends), for m >= 2p - 1 and
// per-stage times T_F, T_B, T_W (see bubble_formulas.h for the derivation's checks):
//   step = m (T_F + T_B + T_W) + (p - 1) max(T_F, T_F + T_B - 2 T_W, T_B - T_F);
//   each stage busy from its first op to its last except (p - 1) max(0, T_F + T_B - 2 T_W,
//   T_B - T_F) — with T_F = T_B = T_W no bubble at all inside a stage's span: the paper's
//   (p - 1)(T_F + T_B - 2 T_W), exact when T_W <= T_F and 2 T_W <= T_F + T_B.
// Memory: every stage holds up to min(2p - 1, m) micro-batches between F and W (the
// paper's (2p - 1) M_B). One chunk per stage (v = 1).
// Errors: InvalidArgument when p < 1 or m < 1.
absl::StatusOr<PipelineSchedule> ZeroBubbleH2Schedule(int32_t num_stages, int32_t num_microbatches);

}  // namespace mxmaca::scheduler

#endif  // MXMACA_SCHEDULER_ZERO_BUBBLE_H2_H_
