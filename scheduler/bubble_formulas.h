// scheduler/bubble_formulas.h: closed-form pipeline bubbles of the schedules this library
// generates, in terms of the per-stage op times T_F, T_B, T_W, the stage count p, the
// micro-batch count m and the chunks per stage v.
//
// Every expression here is what SimulateSchedule (schedule_simulator.h) gives for the
// generated op lists under OpCostsFor(kind, times, p, v) and no latency, stated with the
// conditions under which it is exact; bubble_formulas_test checks each against the
// simulator. The paper's expressions (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR
// 2024, Table/§3; Narayanan et al., SC 2021, §2.2) are the special cases noted per kind.
//
// Two measures, both per stage:
//   idle  = step - m (T_F + T_B + T_W): one iteration on its own, from stage 0's first op
//           (time 0) to the last op anywhere; SimulateSchedule's ScheduleTiming::idle.
//   span  = max over stages of (last op's finish - first op's start) - m (T_F + T_B + T_W):
//           the bubble when iterations run back to back and each stage starts the next one
//           as soon as its own list allows (the paper's accounting with its optimizer
//           post-validation: a stage's late start overlaps the previous iteration's tail).
// GPipe and 1F1B have idle = span; the zero-bubble schedules differ by the start offset.
#ifndef MXMACA_SCHEDULER_BUBBLE_FORMULAS_H_
#define MXMACA_SCHEDULER_BUBBLE_FORMULAS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "scheduler/schedule_factory.h"
#include "scheduler/schedule_simulator.h"

namespace mxmaca::scheduler {

// StageOpTimes: one micro-batch's forward (T_F), input-gradient (T_B) and weight-gradient
// (T_W) time on one whole stage, all its chunks together, in any one time unit; >= 0.
struct StageOpTimes {
  double forward = 0;
  double backward_input = 0;
  double backward_weight = 0;
};

// OpCostsFor: the simulator costs that go with `times` for schedule `kind`: every stage
// alike; one chunk's op takes T / v (v = num_chunks); no latency; fused_backward for GPipe,
// 1F1B and interleaved 1F1B (Megatron computes B and W together before sending the
// gradient), split for ZB-H1, ZB-H2 and ZB-V.
OpCosts OpCostsFor(ScheduleKind kind, const StageOpTimes& times, int32_t num_stages,
                   int32_t num_chunks);

// PipelineBubble: one schedule's step time and bubbles (see the file comment), in the unit
// of StageOpTimes.
struct PipelineBubble {
  double step_time = 0;        // makespan of one iteration
  double idle_per_stage = 0;   // step_time - m (T_F + T_B + T_W), the same on every stage
  double bubble_fraction = 0;  // idle_per_stage / step_time (ScheduleTiming::bubble_fraction)
  double span_bubble = 0;      // max over stages of busy span - m (T_F + T_B + T_W)
};

// ClosedFormBubble: the bubble of `kind` with p stages, m micro-batches and v chunks per
// stage (1 except interleaved-1f1b, 2 for zb-v). With S = T_F + T_B + T_W:
//   gpipe, 1f1b:      idle = span = (p - 1) S.  Any T; m >= 1.
//   interleaved-1f1b: idle = span = (p - 1) S / v.  Any T; m a multiple of p (Megatron's
//                     default group size p; other m leave dependency bubbles).
//   zb-h1:  idle = (p - 1) max(T_F + T_B - T_W, T_F, T_B),
//           span = (p - 1) max(T_F + T_B - T_W, T_B).  m >= p. The paper's
//           (p - 1)(T_F + T_B - T_W) is idle when T_W <= min(T_F, T_B), span when T_W <= T_F.
//   zb-h2:  idle = (p - 1) max(T_F, T_F + T_B - 2 T_W, T_B - T_F),
//           span = (p - 1) max(0, T_F + T_B - 2 T_W, T_B - T_F).  m >= 2p - 1. The paper's
//           (p - 1)(T_F + T_B - 2 T_W) is span when T_W <= T_F and 2 T_W <= T_F + T_B; with
//           T_F = T_B = T_W the span bubble is 0 (the parallelogram) and idle is (p - 1) T_F,
//           the time the last stage waits for its first activation.
//   zb-v:   only T_F = T_B = T_W = t (ZeroBubbleVSchedule without costs): idle =
//           (p - 1) t / 2 (the last stage's wait for its first input, in half-size chunk
//           ops); span = 0 for p <= 4 and t / 2 (one chunk op) for 5 <= p <= 9.  m >= 2p,
//           p <= 9 (idle still holds up to p = 16, zero_bubble_v_test, but the span is a
//           few chunk ops there). Other times: ZeroBubbleVSchedule with the real costs;
//           its bubble does not grow with m but has no closed form.
// The step time is m S + idle in every case.
// Errors: InvalidArgument when p, m or v < 1, a time is negative, or v does not fit the
// kind (1 for gpipe/1f1b/zb-h1/zb-h2, 2 for zb-v); FailedPrecondition, naming the
// condition, outside the conditions above (no closed form is claimed there).
absl::StatusOr<PipelineBubble> ClosedFormBubble(ScheduleKind kind, const StageOpTimes& times,
                                                int32_t num_stages, int32_t num_microbatches,
                                                int32_t num_chunks = 1);

// MeasuredBubble: the same quantities from a simulated iteration (`timing` of a schedule
// whose every stage is busy `busy_per_stage`): step_time = makespan, idle_per_stage =
// makespan - busy_per_stage, bubble_fraction as ScheduleTiming, span_bubble = max over
// stages of (last finish - first start) - busy_per_stage. Stages without ops are skipped.
PipelineBubble MeasuredBubble(const ScheduleTiming& timing, double busy_per_stage);

}  // namespace mxmaca::scheduler

#endif  // MXMACA_SCHEDULER_BUBBLE_FORMULAS_H_
