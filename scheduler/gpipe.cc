// scheduler/gpipe.cc: see gpipe.h.
#include "scheduler/gpipe.h"

namespace mxmaca::scheduler {

absl::StatusOr<PipelineSchedule> GPipeSchedule(int32_t num_stages, int32_t num_microbatches) {
  absl::Status status = CheckScheduleDimensions("gpipe", num_stages, 1, num_microbatches);
  if (!status.ok()) return status;
  PipelineSchedule schedule;
  schedule.name = "gpipe";
  schedule.num_stages = num_stages;
  schedule.num_chunks = 1;
  schedule.num_microbatches = num_microbatches;
  schedule.stages.resize(num_stages);
  for (StageSchedule& ops : schedule.stages) {
    ops.reserve(3 * num_microbatches);
    for (int32_t mb = 0; mb < num_microbatches; ++mb) ops.push_back({OpKind::kForward, mb, 0});
    for (int32_t mb = 0; mb < num_microbatches; ++mb) {
      ops.push_back({OpKind::kBackwardInput, mb, 0});
      ops.push_back({OpKind::kBackwardWeight, mb, 0});
    }
  }
  return schedule;
}

}  // namespace mxmaca::scheduler
