// scheduler/pipeline_schedule.h: pipeline schedules as data.
//
// docs/ARCHITECTURE.md: for each stage an ordered list of operations — F (forward), B (input-
// gradient backward), W (weight-gradient backward) — each naming its micro-batch and
// model chunk. A StageActor executes exactly the list it is given; the runtime can inspect,
// validate and change it. Generators for the published schedules (GPipe, 1F1B,
// interleaved 1F1B, zero bubble) build these lists; this file holds the data types and the
// schedule for a single stage, which every generator reduces to at p = 1.
#ifndef MXMACA_SCHEDULER_PIPELINE_SCHEDULE_H_
#define MXMACA_SCHEDULER_PIPELINE_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace mxmaca::scheduler {

// OpKind: F = forward, B = backward for input gradients, W = backward for weight
// gradients (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, §2).
enum class OpKind : uint8_t { kForward, kBackwardInput, kBackwardWeight };

// PipelineOp: one operation of a stage: `kind` on micro-batch `microbatch` (0-based within
// the iteration) of model chunk `chunk` (virtual stage; 0 without interleaving).
struct PipelineOp {
  OpKind kind = OpKind::kForward;
  int32_t microbatch = 0;
  int32_t chunk = 0;
  bool operator==(const PipelineOp& o) const {
    return kind == o.kind && microbatch == o.microbatch && chunk == o.chunk;
  }
};

// StageSchedule: the ordered op list of one pipeline stage for one iteration.
using StageSchedule = std::vector<PipelineOp>;

// ToString: "F0", "B3", "W1" (with ".c1" for chunk 1), space-separated for a list.
std::string ToString(const PipelineOp& op);
std::string ToString(const StageSchedule& ops);

// SingleStageSchedule: the schedule of a one-stage pipeline with m micro-batches, which
// 1F1B, GPipe-with-immediate-backward and zero bubble all reduce to at p = 1:
// F0 B0 W0 F1 B1 W1 ... — each micro-batch's stash is freed before the next forward.
StageSchedule SingleStageSchedule(int32_t num_microbatches);

// ForwardOnlySchedule: F0 F1 ... for evaluation (no stash kept).
StageSchedule ForwardOnlySchedule(int32_t num_microbatches);

// Placement: which virtual stage model chunk c of stage s holds (p stages, v chunks each).
//   kInterleaved: k = c * p + s (Megatron's interleaved layout; v = 1 is plain 1F1B).
//   kVShape:      even c: k = c * p + s; odd c: k = c * p + (p - 1 - s): the model runs
//                 down the stages on chunk 0 and back up on chunk 1 (Qi et al., "Zero
//                 Bubble Pipeline Parallelism", ICLR 2024, arXiv v2 §6 "ZB-V"; the
//                 sail-sg implementation's zbv.py layer_group_idx). With v = 2, stage s
//                 holds k = s and k = 2p - 1 - s: stage 0 holds the first and the last
//                 virtual stage, and stage p - 1 hands chunk 0's output to its own chunk 1.
enum class Placement : uint8_t { kInterleaved, kVShape };

// PlacementName: "interleaved" or "v-shape".
const char* PlacementName(Placement placement);

// PipelineSchedule: the op lists of all p stages of one pipeline for one iteration.
//
// Layout: the model is cut into v * p virtual stages; model chunk c of stage s holds
// virtual stage k = VirtualStage(c, s, p, placement): Megatron's c * p + s by default
// (megatron/core/parallel_state.py and schedules.py), the V shape for ZB-V. Forward
// activations flow from virtual stage k to k + 1, input gradients from k + 1 to k; so in
// the interleaved layout stage p - 1's chunk c sends to stage 0's chunk c + 1, and in the
// V shape (v = 2) stage s's chunk 0 sends to stage s + 1, its chunk 1 to stage s - 1.
// `stages[s]` is the ordered op list of stage s; every op's `chunk` is in [0, v) and its
// `microbatch` in [0, m). A training schedule holds exactly one F, one B and one W per
// (stage, chunk, micro-batch); a forward-only one exactly one F and nothing else.
// ValidateSchedule (schedule_validator.h) proves a schedule complete and deadlock-free.
struct PipelineSchedule {
  std::string name;                   // "gpipe", "1f1b", "interleaved-1f1b", "zb-v", ...
  int32_t num_stages = 1;             // p: pipeline stages (pipeline_model_parallel_size)
  int32_t num_chunks = 1;             // v: model chunks per stage (virtual pipeline size)
  int32_t num_microbatches = 0;       // m: micro-batches per iteration
  bool forward_only = false;          // evaluation: F only, no B or W
  Placement placement = Placement::kInterleaved;  // chunk -> virtual stage (VirtualStage)
  std::vector<StageSchedule> stages;  // [p] op lists
};

// VirtualStage: the virtual pipeline stage held by model chunk `chunk` of stage `stage`
// in a pipeline of `num_stages` stages under `placement` (see Placement); the default is
// Megatron's chunk * num_stages + stage. Preconditions: 0 <= stage < num_stages, chunk >= 0.
inline int32_t VirtualStage(int32_t chunk, int32_t stage, int32_t num_stages,
                            Placement placement = Placement::kInterleaved) {
  if (placement == Placement::kVShape && chunk % 2 == 1) {
    return chunk * num_stages + (num_stages - 1 - stage);
  }
  return chunk * num_stages + stage;
}

// VirtualStage: the virtual stage of `chunk` on `stage` under `schedule`'s p and placement.
inline int32_t VirtualStage(const PipelineSchedule& schedule, int32_t chunk, int32_t stage) {
  return VirtualStage(chunk, stage, schedule.num_stages, schedule.placement);
}

// StageChunk: where a virtual stage lives: its pipeline stage and the model chunk there.
struct StageChunk {
  int32_t stage = 0;
  int32_t chunk = 0;
};

// StageChunkOf: the inverse of VirtualStage: the (stage, chunk) that holds virtual stage
// `virtual_stage` (>= 0) of a `num_stages`-stage pipeline under `placement`.
inline StageChunk StageChunkOf(int32_t virtual_stage, int32_t num_stages,
                               Placement placement = Placement::kInterleaved) {
  const int32_t chunk = virtual_stage / num_stages, offset = virtual_stage % num_stages;
  if (placement == Placement::kVShape && chunk % 2 == 1) return {num_stages - 1 - offset, chunk};
  return {offset, chunk};
}

// ToString: a name/p/v/m header line (plus "v-shape" for that placement), then one line
// "stage s: <ops>" per stage.
std::string ToString(const PipelineSchedule& schedule);

// CheckScheduleDimensions: OK when p >= 1, v >= 1, m >= 1 and the schedule's op count
// 3 * p * v * m stays below 2^26 (a guard against absurd inputs, not a Megatron rule);
// otherwise InvalidArgument naming `schedule_name` and the offending value.
absl::Status CheckScheduleDimensions(const std::string& schedule_name, int32_t num_stages,
                                     int32_t num_chunks, int32_t num_microbatches);

}  // namespace mxmaca::scheduler

#endif  // MXMACA_SCHEDULER_PIPELINE_SCHEDULE_H_
