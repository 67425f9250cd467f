// scheduler/schedule_factory.cc: see schedule_factory.h.
#include "scheduler/schedule_factory.h"

#include "absl/strings/str_cat.h"
#include "scheduler/forward_only.h"
#include "scheduler/gpipe.h"
#include "scheduler/interleaved_1f1b.h"
#include "scheduler/one_f_one_b.h"
#include "scheduler/schedule_validator.h"
#include "scheduler/zero_bubble_h1.h"
#include "scheduler/zero_bubble_h2.h"
#include "scheduler/zero_bubble_v.h"

namespace mxmaca::scheduler {

absl::StatusOr<ScheduleKind> ParseScheduleKind(std::string_view name) {
  if (name == "gpipe") return ScheduleKind::kGPipe;
  if (name == "1f1b") return ScheduleKind::kOneFOneB;
  if (name == "interleaved-1f1b" || name == "interleaved") return ScheduleKind::kInterleaved1F1B;
  if (name == "zb-h1") return ScheduleKind::kZeroBubbleH1;
  if (name == "zb-h2") return ScheduleKind::kZeroBubbleH2;
  if (name == "zb-v") return ScheduleKind::kZeroBubbleV;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown pipeline schedule '", std::string(name),
                   "'; expected gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2 or zb-v"));
}

std::string ScheduleKindName(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe:
      return "gpipe";
    case ScheduleKind::kOneFOneB:
      return "1f1b";
    case ScheduleKind::kInterleaved1F1B:
      return "interleaved-1f1b";
    case ScheduleKind::kZeroBubbleH1:
      return "zb-h1";
    case ScheduleKind::kZeroBubbleH2:
      return "zb-h2";
    case ScheduleKind::kZeroBubbleV:
      return "zb-v";
  }
  return "unknown";
}

absl::StatusOr<PipelineSchedule> BuildSchedule(const ScheduleOptions& options) {
  absl::StatusOr<PipelineSchedule> schedule;
  if (options.kind == ScheduleKind::kZeroBubbleV) {
    if (options.num_chunks != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "zb-v: needs v = 2 model chunks per stage (V placement), got ", options.num_chunks));
    }
    if (options.forward_only) {
      schedule = ForwardOnlyVSchedule(options.num_stages, options.num_microbatches);
    } else if (options.op_costs) {
      schedule = ZeroBubbleVSchedule(options.num_stages, options.num_microbatches,
                                     *options.op_costs);
    } else {
      schedule = ZeroBubbleVSchedule(options.num_stages, options.num_microbatches);
    }
  } else if (options.forward_only) {
    schedule = ForwardOnlyPipelineSchedule(options.num_stages, options.num_chunks,
                                           options.num_microbatches, options.microbatch_group_size);
  } else if (options.kind == ScheduleKind::kInterleaved1F1B) {
    schedule = Interleaved1F1BSchedule(options.num_stages, options.num_chunks,
                                       options.num_microbatches, options.microbatch_group_size);
  } else if (options.num_chunks != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        ScheduleKindName(options.kind), ": model chunks per stage v = ", options.num_chunks,
        " need the interleaved-1f1b schedule"));
  } else if (options.kind == ScheduleKind::kZeroBubbleH1) {
    schedule = ZeroBubbleH1Schedule(options.num_stages, options.num_microbatches);
  } else if (options.kind == ScheduleKind::kZeroBubbleH2) {
    schedule = ZeroBubbleH2Schedule(options.num_stages, options.num_microbatches);
  } else if (options.kind == ScheduleKind::kGPipe) {
    schedule = GPipeSchedule(options.num_stages, options.num_microbatches);
  } else {
    schedule = OneFOneBSchedule(options.num_stages, options.num_microbatches);
  }
  if (!schedule.ok()) return schedule.status();
  absl::Status valid = ValidateSchedule(*schedule);
  if (!valid.ok()) {
    return absl::InternalError(absl::StrCat("generated ", schedule->name,
                                            " schedule does not validate: ", valid.message()));
  }
  return schedule;
}

}  // namespace mxmaca::scheduler
