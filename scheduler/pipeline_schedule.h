// scheduler/pipeline_schedule.h: pipeline schedules as data.
//
// DESIGN.md: for each stage an ordered list of operations — F (forward), B (input-
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

}  // namespace mxmaca::scheduler

#endif  // MXMACA_SCHEDULER_PIPELINE_SCHEDULE_H_
