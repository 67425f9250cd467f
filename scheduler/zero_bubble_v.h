// scheduler/zero_bubble_v.h: the ZB-V zero-bubble schedule: two model chunks per stage in
// a V-shaped placement, 1F1B's activation memory.
//
// Source: Qi, Wan, Huang, Lin, "Zero Bubble Pipeline Parallelism", ICLR 2024 (arXiv v2
// §6, "ZB-V"): each stage holds two chunks; the forward runs down the stages on chunk 0
// and back up on chunk 1 (Placement::kVShape), the backward the other way, so the last
// virtual stage (the loss) sits on stage 0 next to the first. The paper builds its op
// lists with a greedy list scheduler over the op times (sail-sg zero-bubble-pipeline-
// parallelism, zerobubble/scheduler/zbv.py); this file does the same with its own,
// simpler rules.
#ifndef MXMACA_SCHEDULER_ZERO_BUBBLE_V_H_
#define MXMACA_SCHEDULER_ZERO_BUBBLE_V_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "scheduler/pipeline_schedule.h"
#include "scheduler/schedule_simulator.h"

namespace mxmaca::scheduler {

// ZeroBubbleVSchedule: p stages, two chunks each (v = 2, placement kVShape: chunk 0 of
// stage s is virtual stage s, chunk 1 is 2p - 1 - s), m micro-batches. The op lists are
// what a list scheduler emits when it replays the pipeline with `costs` (OpCosts of one
// chunk's op per stage, as SimulateSchedule takes them; fused_backward is ignored: B sends
// when it ends). Whenever a stage s is free it takes
//   1. the first ready op of B chunk 0, F chunk 1, F chunk 0, B chunk 1 (each chunk's F
//      and B run in micro-batch order; ready = inputs arrived), except that an F that
//      would hold more than 2p chunk activations (F to W) runs the oldest pending W
//      instead: 1F1B's memory, 2p half-size chunk stashes = p micro-batches of a stage
//      (only if every stage would otherwise wait forever — seen with message latency,
//      when the warm-up fills the stash before chunk 1's first activation is back — may
//      an F of chunk 1 exceed it);
//   2. otherwise the oldest pending W (W fills what would be a bubble), else it waits for
//      the next op end or message arrival.
// B before F drains the pipeline as early as possible; W waits for gaps, so the tail,
// where the last B climbs back one stage at a time, still has work.
// Unit times (the overload without costs: T_F = T_B = T_W = t per stage, t / 2 per
// chunk op): the step takes 3m t + (p - 1) t / 2 for m >= 2p (checked p <= 16); each
// stage's busy span has no gap for p <= 4 and one chunk op (t / 2) for 5 <= p <= 9
// (bubble_formulas_test); larger p leave a few chunk ops. With unequal times pass the
// real costs: the bubble then stays independent of m (zero_bubble_v_test) but has no
// closed form; a schedule built for one set of times and run under another can lose a
// bubble per micro-batch.
// Errors: InvalidArgument when p < 1 or m < 1, `costs` is not for p stages, an op time is
// not > 0 and finite or the latency negative; Internal if the list scheduler stalls (a
// bug: it has not for any p <= 8, m <= 4p).
absl::StatusOr<PipelineSchedule> ZeroBubbleVSchedule(int32_t num_stages, int32_t num_microbatches,
                                                     const OpCosts& costs);
absl::StatusOr<PipelineSchedule> ZeroBubbleVSchedule(int32_t num_stages, int32_t num_microbatches);

// ForwardOnlyVSchedule: evaluation on the same V placement (v = 2, forward_only): every
// stage runs F(0..m-1) of chunk 0, then F(0..m-1) of chunk 1. Nothing is stashed.
// Errors: InvalidArgument when p < 1 or m < 1.
absl::StatusOr<PipelineSchedule> ForwardOnlyVSchedule(int32_t num_stages, int32_t num_microbatches);

}  // namespace mxmaca::scheduler

#endif  // MXMACA_SCHEDULER_ZERO_BUBBLE_V_H_
