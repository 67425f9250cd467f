// scheduler/zero_bubble_v.h: the ZB-V zero-bubble schedule: two model chunks per stage in
// a V-shaped placement, 1F1B's activation memory.
//
// Source: Qi, Wan, Huang, Lin, "Zero Bubble Pipeline Parallelism", ICLR 2024 (arXiv v2
// §6, "ZB-V"): each stage holds two chunks; the forward runs down the stages on chunk 0
// and back up on chunk 1 (Placement::kVShape), the backward the other way, so the last
// virtual stage (the loss) sits on stage 0 next to the first. The paper builds its op
// lists with a greedy list scheduler (sail-sg zero-bubble-pipeline-parallelism,
// zerobubble/scheduler/zbv.py); this file does the same with its own, simpler rules.
#ifndef MXMACA_SCHEDULER_ZERO_BUBBLE_V_H_
#define MXMACA_SCHEDULER_ZERO_BUBBLE_V_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "scheduler/pipeline_schedule.h"

namespace mxmaca::scheduler {

// ZeroBubbleVSchedule: p stages, two chunks each (v = 2, placement kVShape: chunk 0 of
// stage s is virtual stage s, chunk 1 is 2p - 1 - s), m micro-batches. The op lists are
// what a list scheduler emits when every chunk op (F, B or W of one chunk) takes one time
// unit and messages are instant. At each unit every idle stage s picks:
//   1. the oldest pending W when more than 2s + 1 W are pending (W is deferred so that
//      the tail, where B arrives one stage at a time, has work: stage s ends with up to
//      2s + 1 W, as in ZB-H2);
//   2. otherwise the first ready op of B chunk 0, F chunk 1, F chunk 0, B chunk 1 (each
//      chunk's F and B run in micro-batch order), where an F that would hold more than 2p
//      chunk activations (F to W) runs the oldest pending W instead (1F1B's memory: 2p
//      half-size chunk stashes = p micro-batches of a whole stage);
//   3. otherwise the oldest pending W (filling a bubble), else nothing.
// Under the same unit times (T_F = T_B = T_W = t per stage, t / 2 per chunk op) the step
// takes 3m t + (p - 1) t / 2 for m >= 2p and p <= 9 (zero_bubble_v_test, p <= 8, and
// bubble_formulas_test); each stage's busy span has no gap for p <= 4 and one chunk op
// (t / 2) for 5 <= p <= 9; from p = 10 the rules leave larger bubbles. With unequal times
// the order stays the unit-time one and the bubble grows with m (no closed form): prefer
// ZB-H1/ZB-H2 when F, B and W differ much.
// Errors: InvalidArgument when p < 1 or m < 1; Internal if the list scheduler stalls (a
// bug: it has not for any p <= 8, m <= 4p).
absl::StatusOr<PipelineSchedule> ZeroBubbleVSchedule(int32_t num_stages, int32_t num_microbatches);

// ForwardOnlyVSchedule: evaluation on the same V placement (v = 2, forward_only): every
// stage runs F(0..m-1) of chunk 0, then F(0..m-1) of chunk 1. Nothing is stashed.
// Errors: InvalidArgument when p < 1 or m < 1.
absl::StatusOr<PipelineSchedule> ForwardOnlyVSchedule(int32_t num_stages, int32_t num_microbatches);

}  // namespace mxmaca::scheduler

#endif  // MXMACA_SCHEDULER_ZERO_BUBBLE_V_H_
