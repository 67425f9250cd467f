// scheduler/interleaved_1f1b.cc: see interleaved_1f1b.h.
#include "scheduler/interleaved_1f1b.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "scheduler/one_f_one_b.h"

namespace mxmaca::scheduler {

std::vector<std::pair<int32_t, int32_t>> InterleavedScheduleTable(int32_t num_microbatches,
                                                                  int32_t num_chunks,
                                                                  int32_t group_size) {
  std::vector<std::pair<int32_t, int32_t>> table;
  table.reserve(static_cast<size_t>(num_microbatches) * num_chunks);
  for (int32_t first = 0; first < num_microbatches; first += group_size) {
    // Megatron: a group reaching m (first + group_size >= m) is the last and takes the rest.
    const int32_t end = std::min(first + group_size, num_microbatches);
    for (int32_t chunk = 0; chunk < num_chunks; ++chunk) {
      for (int32_t mb = first; mb < end; ++mb) table.emplace_back(mb, chunk);
    }
  }
  return table;
}

absl::StatusOr<PipelineSchedule> Interleaved1F1BSchedule(int32_t num_stages, int32_t num_chunks,
                                                         int32_t num_microbatches,
                                                         int32_t group_size) {
  const char* kName = "interleaved-1f1b";
  absl::Status status = CheckScheduleDimensions(kName, num_stages, num_chunks, num_microbatches);
  if (!status.ok()) return status;
  if (num_chunks == 1) return OneFOneBSchedule(num_stages, num_microbatches);
  if (group_size == 0) group_size = num_stages;
  if (group_size < num_stages || group_size > num_microbatches) {
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": the micro-batch group size per virtual stage must be in [p, m] = [", num_stages,
        ", ", num_microbatches, "], got ", group_size,
        group_size == num_stages ? " (default p: interleaving needs m >= p micro-batches)" : "",
        " (Megatron schedules.py forward_backward_pipelining_with_interleaving)"));
  }
  const int32_t last_group = num_microbatches % group_size;
  if (last_group > 0 && last_group < num_stages) {
    return absl::InvalidArgumentError(
        absl::StrCat(kName, ": m % group size = ", num_microbatches, " % ", group_size, " = ",
                     last_group, " must be 0 or >= p = ", num_stages,
                     " (a smaller final group leaves dependency bubbles; Megatron rejects it)"));
  }

  const auto table = InterleavedScheduleTable(num_microbatches, num_chunks, group_size);
  const int32_t total = num_chunks * num_microbatches;
  PipelineSchedule schedule;
  schedule.name = kName;
  schedule.num_stages = num_stages;
  schedule.num_chunks = num_chunks;
  schedule.num_microbatches = num_microbatches;
  schedule.stages.resize(num_stages);
  for (int32_t stage = 0; stage < num_stages; ++stage) {
    StageSchedule& ops = schedule.stages[stage];
    ops.reserve(3 * static_cast<size_t>(total));
    const int64_t warmup_wanted =
        int64_t{num_stages - stage - 1} * 2 + int64_t{num_chunks - 1} * group_size;
    const int32_t warmup = static_cast<int32_t>(std::min<int64_t>(warmup_wanted, total));
    auto forward = [&](int32_t k) {
      ops.push_back({OpKind::kForward, table[k].first, table[k].second});
    };
    auto backward = [&](int32_t k) {
      const int32_t chunk = num_chunks - 1 - table[k].second;
      ops.push_back({OpKind::kBackwardInput, table[k].first, chunk});
      ops.push_back({OpKind::kBackwardWeight, table[k].first, chunk});
    };
    for (int32_t k = 0; k < warmup; ++k) forward(k);
    for (int32_t k = 0; k < total - warmup; ++k) {
      forward(warmup + k);
      backward(k);
    }
    for (int32_t k = total - warmup; k < total; ++k) backward(k);
  }
  return schedule;
}

}  // namespace mxmaca::scheduler
