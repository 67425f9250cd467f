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

}  // namespace mxmaca::scheduler
