// scheduler/one_f_one_b.cc: see one_f_one_b.h.
#include "scheduler/one_f_one_b.h"

#include <algorithm>

namespace mxmaca::scheduler {

absl::StatusOr<PipelineSchedule> OneFOneBSchedule(int32_t num_stages, int32_t num_microbatches) {
  absl::Status status = CheckScheduleDimensions("1f1b", num_stages, 1, num_microbatches);
  if (!status.ok()) return status;
  PipelineSchedule schedule;
  schedule.name = "1f1b";
  schedule.num_stages = num_stages;
  schedule.num_chunks = 1;
  schedule.num_microbatches = num_microbatches;
  schedule.stages.resize(num_stages);
  for (int32_t stage = 0; stage < num_stages; ++stage) {
    StageSchedule& ops = schedule.stages[stage];
    ops.reserve(3 * num_microbatches);
    const int32_t warmup = std::min(num_stages - stage - 1, num_microbatches);
    auto backward = [&ops](int32_t mb) {
      ops.push_back({OpKind::kBackwardInput, mb, 0});
      ops.push_back({OpKind::kBackwardWeight, mb, 0});
    };
    for (int32_t mb = 0; mb < warmup; ++mb) ops.push_back({OpKind::kForward, mb, 0});
    for (int32_t i = 0; i < num_microbatches - warmup; ++i) {
      ops.push_back({OpKind::kForward, warmup + i, 0});
      backward(i);
    }
    for (int32_t i = num_microbatches - warmup; i < num_microbatches; ++i) backward(i);
  }
  return schedule;
}

}  // namespace mxmaca::scheduler
