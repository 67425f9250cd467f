// scheduler/schedule_factory.h: picks and builds a pipeline schedule from options (the
// runtime's --pipeline-schedule flag and Megatron's pipeline flags), validated.
//
// Megatron chooses implicitly: interleaved 1F1B when a virtual pipeline size > 1 is set
// (--num-layers-per-virtual-pipeline-stage / --num-virtual-stages-per-pipeline-rank), else
// 1F1B (megatron/core/pipeline_parallel/schedules.py get_forward_backward_func). MXMACA
// adds GPipe and the zero-bubble schedules ZB-H1, ZB-H2 and ZB-V, selected by name.
#ifndef MXMACA_SCHEDULER_SCHEDULE_FACTORY_H_
#define MXMACA_SCHEDULER_SCHEDULE_FACTORY_H_

#include <cstdint>
#include <string>
#include <string_view>

#include <optional>

#include "absl/status/statusor.h"
#include "scheduler/pipeline_schedule.h"
#include "scheduler/schedule_simulator.h"

namespace mxmaca::scheduler {

// ScheduleKind: the published schedules this library generates.
enum class ScheduleKind : uint8_t {
  kGPipe,
  kOneFOneB,
  kInterleaved1F1B,
  kZeroBubbleH1,
  kZeroBubbleH2,
  kZeroBubbleV,
};

// ParseScheduleKind: "gpipe", "1f1b", "interleaved-1f1b" (also "interleaved"), "zb-h1",
// "zb-h2" or "zb-v"; errors (InvalidArgument) name the value and list the accepted ones.
absl::StatusOr<ScheduleKind> ParseScheduleKind(std::string_view name);

// ScheduleKindName: the canonical name ParseScheduleKind accepts ("gpipe", ...).
std::string ScheduleKindName(ScheduleKind kind);

// ScheduleOptions: what BuildSchedule needs.
struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::kOneFOneB;
  int32_t num_stages = 1;        // p: --pipeline-model-parallel-size
  int32_t num_chunks = 1;        // v: virtual pipeline size (1 = no interleaving; zb-v: 2)
  int32_t num_microbatches = 1;  // m: global batch / (micro batch * data parallel)
  // --microbatch-group-size-per-virtual-pipeline-stage; 0 = Megatron's default, p.
  int32_t microbatch_group_size = 0;
  bool forward_only = false;  // evaluation: ForwardOnlyPipelineSchedule
  // op_costs: per-stage times of one chunk's F, B, W (and the latency) that a cost-aware
  // generator schedules for — zb-v's list scheduler (zero_bubble_v.h); empty = equal times.
  // The other generators' op lists do not depend on times.
  std::optional<OpCosts> op_costs;
};

// BuildSchedule: generates the schedule `options` asks for and proves it with
// ValidateSchedule. Forward-only ignores `kind` except for zb-v, whose evaluation
// schedule keeps the V placement (ForwardOnlyVSchedule, zero_bubble_v.h). Errors:
// InvalidArgument for the generator's (p, v, m or group size out of range), for v > 1
// with GPipe, 1F1B, ZB-H1 or ZB-H2 ("gpipe: model chunks per stage v = 2 need the
// interleaved-1f1b schedule") and for zb-v with v != 2 ("zb-v: needs v = 2 model chunks
// per stage (V placement), got 1"); Internal when a generated schedule fails validation
// (a generator bug, reported rather than run).
absl::StatusOr<PipelineSchedule> BuildSchedule(const ScheduleOptions& options);

}  // namespace mxmaca::scheduler

#endif  // MXMACA_SCHEDULER_SCHEDULE_FACTORY_H_
