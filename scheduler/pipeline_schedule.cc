// scheduler/pipeline_schedule.cc: see pipeline_schedule.h.
#include "scheduler/pipeline_schedule.h"

#include "absl/strings/str_cat.h"

namespace mxmaca::scheduler {

std::string ToString(const PipelineOp& op) {
  const char* k = op.kind == OpKind::kForward ? "F" : op.kind == OpKind::kBackwardInput ? "B" : "W";
  std::string s = absl::StrCat(k, op.microbatch);
  if (op.chunk != 0) absl::StrAppend(&s, ".c", op.chunk);
  return s;
}

std::string ToString(const StageSchedule& ops) {
  std::string s;
  for (const PipelineOp& op : ops) {
    if (!s.empty()) s += ' ';
    s += ToString(op);
  }
  return s;
}

StageSchedule SingleStageSchedule(int32_t num_microbatches) {
  StageSchedule ops;
  ops.reserve(3 * num_microbatches);
  for (int32_t mb = 0; mb < num_microbatches; ++mb) {
    ops.push_back({OpKind::kForward, mb, 0});
    ops.push_back({OpKind::kBackwardInput, mb, 0});
    ops.push_back({OpKind::kBackwardWeight, mb, 0});
  }
  return ops;
}

StageSchedule ForwardOnlySchedule(int32_t num_microbatches) {
  StageSchedule ops;
  ops.reserve(num_microbatches);
  for (int32_t mb = 0; mb < num_microbatches; ++mb) ops.push_back({OpKind::kForward, mb, 0});
  return ops;
}

const char* PlacementName(Placement placement) {
  return placement == Placement::kVShape ? "v-shape" : "interleaved";
}

std::string ToString(const PipelineSchedule& schedule) {
  std::string s = absl::StrCat(
      schedule.name, " p=", schedule.num_stages, " v=", schedule.num_chunks,
      " m=", schedule.num_microbatches, schedule.forward_only ? " forward-only" : "",
      schedule.placement == Placement::kVShape ? " v-shape" : "", "\n");
  for (size_t stage = 0; stage < schedule.stages.size(); ++stage) {
    absl::StrAppend(&s, "stage ", stage, ": ", ToString(schedule.stages[stage]), "\n");
  }
  return s;
}

absl::Status CheckScheduleDimensions(const std::string& schedule_name, int32_t num_stages,
                                     int32_t num_chunks, int32_t num_microbatches) {
  if (num_stages < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        schedule_name, ": pipeline stages p must be >= 1, got ", num_stages));
  }
  if (num_chunks < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        schedule_name, ": model chunks per stage v must be >= 1, got ", num_chunks));
  }
  if (num_microbatches < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        schedule_name, ": micro-batches m must be >= 1, got ", num_microbatches));
  }
  const int64_t ops = int64_t{3} * num_stages * num_chunks * num_microbatches;
  if (ops >= (int64_t{1} << 26)) {
    return absl::InvalidArgumentError(absl::StrCat(
        schedule_name, ": p=", num_stages, " v=", num_chunks, " m=", num_microbatches,
        " gives ", ops, " ops, more than the 2^26 this library accepts"));
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::scheduler
