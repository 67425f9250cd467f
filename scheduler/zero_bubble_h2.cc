// scheduler/zero_bubble_h2.cc: see zero_bubble_h2.h.
#include "scheduler/zero_bubble_h2.h"

#include <algorithm>
#include <deque>

namespace mxmaca::scheduler {

absl::StatusOr<PipelineSchedule> ZeroBubbleH2Schedule(int32_t num_stages,
                                                      int32_t num_microbatches) {
  absl::Status status = CheckScheduleDimensions("zb-h2", num_stages, 1, num_microbatches);
  if (!status.ok()) return status;
  PipelineSchedule schedule;
  schedule.name = "zb-h2";
  schedule.num_stages = num_stages;
  schedule.num_chunks = 1;
  schedule.num_microbatches = num_microbatches;
  schedule.stages.resize(num_stages);
  for (int32_t stage = 0; stage < num_stages; ++stage) {
    StageSchedule& ops = schedule.stages[stage];
    ops.reserve(3 * static_cast<size_t>(num_microbatches));
    const int32_t warmup = static_cast<int32_t>(
        std::min<int64_t>(int64_t{2} * (num_stages - 1 - stage), num_microbatches));
    const size_t max_pending = 2 * static_cast<size_t>(stage);
    std::deque<int32_t> pending;  // micro-batches whose B ran and W did not
    for (int32_t mb = 0; mb < warmup; ++mb) ops.push_back({OpKind::kForward, mb, 0});
    for (int32_t i = 0; i < num_microbatches; ++i) {
      if (i < num_microbatches - warmup) ops.push_back({OpKind::kForward, warmup + i, 0});
      ops.push_back({OpKind::kBackwardInput, i, 0});
      pending.push_back(i);
      while (pending.size() > max_pending) {
        ops.push_back({OpKind::kBackwardWeight, pending.front(), 0});
        pending.pop_front();
      }
    }
    for (int32_t mb : pending) ops.push_back({OpKind::kBackwardWeight, mb, 0});
  }
  return schedule;
}

}  // namespace mxmaca::scheduler
