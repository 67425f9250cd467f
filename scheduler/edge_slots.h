// scheduler/edge_slots.h: how many payload slots each pipeline channel needs — the
// per-edge quotas of docs/ARCHITECTURE.md "Messages reference pooled memory".
//
// A stage's F sends its output activation to the next virtual stage and its B sends the
// input gradient to the previous one; each stage has two outgoing channels, one for
// activations and one for gradients, shared by its chunks and receivers (interleaved
// layout: activations to stage s + 1 mod p, gradients to s - 1 mod p; V shape: chunk 0
// sends activations to s + 1 and gradients to s - 1, chunk 1 the other way round). A
// hand-over between two chunks of one stage (p = 1, or the V's turn on stage p - 1) is
// local and takes no slot. A payload takes a
// slot of the sender's channel when the sending op starts (the op writes into it) and
// gives it back when the receiving op has run (it copied what it keeps into its stash).
// With a quota of q slots, the sender's next sending op waits while q payloads of that
// channel are in flight (back-pressure): activation memory in flight is bounded by the
// quotas, whatever the timing.
//
// Too small a quota can deadlock a valid schedule (a sender blocked on a slot that only
// frees after the sender itself makes progress). Per stage, each stage runs its list in
// order and channels are FIFO, so whether a set of quotas deadlocks does not depend on op
// timings (a bounded Kahn process network). MinimumEdgeSlots replays the lists to find
// quotas that cannot deadlock; UnthrottledEdgeSlots finds, from the op graph, how many
// payloads the schedule itself can put in flight under any timing — a quota that large
// never slows the schedule, yet bounds activation memory in flight.
#ifndef MXMACA_SCHEDULER_EDGE_SLOTS_H_
#define MXMACA_SCHEDULER_EDGE_SLOTS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/pipeline_schedule.h"

namespace mxmaca::scheduler {

// EdgeSlots: per stage [p], slots of its forward (activation) and backward (gradient)
// channel; 0 for a channel the schedule never uses (the last virtual stage sends no
// activation, the first no gradient).
struct EdgeSlots {
  std::vector<int32_t> forward;
  std::vector<int32_t> backward;
};

// MinimumEdgeSlots: the smallest quotas found by replaying the lists with every used
// channel at 1 slot and, whenever the replay stalls with senders waiting only for a slot,
// giving each such channel one more slot and continuing (quotas only grow, so every state
// reached stays reachable). The result cannot deadlock. Errors: InvalidArgument when the
// schedule itself cannot complete (run ValidateSchedule first for a precise message).
absl::StatusOr<EdgeSlots> MinimumEdgeSlots(const PipelineSchedule& schedule);

// UnitTimeEdgeSlots: per channel, the most payloads in flight when the schedule runs with
// unit op times and no back-pressure (SimulateSchedule with F = B = W = 1): a slot is held
// from the sending op's start to the receiving op's finish. Errors: SimulateSchedule's.
absl::StatusOr<EdgeSlots> UnitTimeEdgeSlots(const PipelineSchedule& schedule);

// UnthrottledEdgeSlots: per channel, the most payloads that can be in flight under ANY op
// timing: while message j waits for its consumer op c_j, the sender may already have
// started every later send whose op does not depend (through stage order and messages)
// on c_j — make c_j arbitrarily slow. A quota this large never delays an op; it bounds
// the channel's memory by what the schedule itself allows (1F1B: about p - s on stage s;
// GPipe: m). Computed from the op graph in O(ops x p). Errors: a message nobody sends, a
// circular wait.
absl::StatusOr<EdgeSlots> UnthrottledEdgeSlots(const PipelineSchedule& schedule);

// EdgeQuotas: the quotas the runtime enforces, per channel:
//   max(minimum, min(unthrottled, cap))
// — never below the deadlock-free minimum; without a cap never throttling the schedule;
// with --pipeline-channel-slots `cap`, memory in flight is bounded further at the price
// of back-pressure stalls.
absl::StatusOr<EdgeSlots> EdgeQuotas(const PipelineSchedule& schedule,
                                     std::optional<int32_t> cap = std::nullopt);

}  // namespace mxmaca::scheduler

#endif  // MXMACA_SCHEDULER_EDGE_SLOTS_H_
