// scheduler/forward_only.cc: see forward_only.h.
#include "scheduler/forward_only.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "scheduler/interleaved_1f1b.h"

namespace mxmaca::scheduler {

absl::StatusOr<PipelineSchedule> ForwardOnlyPipelineSchedule(int32_t num_stages, int32_t num_chunks,
                                                             int32_t num_microbatches,
                                                             int32_t group_size) {
  const char* kName = "forward-only";
  absl::Status status = CheckScheduleDimensions(kName, num_stages, num_chunks, num_microbatches);
  if (!status.ok()) return status;
  if (group_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kName, ": micro-batch group size must be >= 0, got ", group_size));
  }
  if (group_size == 0) group_size = num_stages;
  group_size = std::min(group_size, num_microbatches);
  const auto table = InterleavedScheduleTable(num_microbatches, num_chunks, group_size);
  PipelineSchedule schedule;
  schedule.name = kName;
  schedule.num_stages = num_stages;
  schedule.num_chunks = num_chunks;
  schedule.num_microbatches = num_microbatches;
  schedule.forward_only = true;
  schedule.stages.resize(num_stages);
  for (StageSchedule& ops : schedule.stages) {
    ops.reserve(table.size());
    for (const auto& [mb, chunk] : table) ops.push_back({OpKind::kForward, mb, chunk});
  }
  return schedule;
}

}  // namespace mxmaca::scheduler
