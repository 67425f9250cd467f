// scheduler/zero_bubble_v.cc: see zero_bubble_v.h.
#include "scheduler/zero_bubble_v.h"

#include <array>
#include <deque>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"

namespace mxmaca::scheduler {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// The list scheduler's state for one stage.
struct StageState {
  std::array<int32_t, 2> next_forward = {0, 0};   // next micro-batch per chunk
  std::array<int32_t, 2> next_backward = {0, 0};  // next micro-batch per chunk
  std::deque<PipelineOp> pending_w;               // W whose B ran, oldest first
  int32_t stashed = 0;                            // chunk activations held (F to W)
};

}  // namespace

absl::StatusOr<PipelineSchedule> ZeroBubbleVSchedule(int32_t num_stages,
                                                     int32_t num_microbatches) {
  absl::Status status = CheckScheduleDimensions("zb-v", num_stages, 2, num_microbatches);
  if (!status.ok()) return status;
  const int32_t p = num_stages, m = num_microbatches, num_virtual = 2 * num_stages;
  PipelineSchedule schedule;
  schedule.name = "zb-v";
  schedule.num_stages = p;
  schedule.num_chunks = 2;
  schedule.num_microbatches = m;
  schedule.placement = Placement::kVShape;
  schedule.stages.resize(p);

  // done[kind][virtual stage * m + mb]: the unit at whose end F / B finished.
  std::array<std::vector<int64_t>, 2> done;
  for (auto& d : done) d.assign(static_cast<size_t>(num_virtual) * m, kNever);
  auto finished = [&](OpKind kind, int32_t k, int32_t mb) -> int64_t& {
    return done[kind == OpKind::kForward ? 0 : 1][static_cast<size_t>(k) * m + mb];
  };
  std::vector<StageState> state(p);
  const int64_t total = int64_t{6} * m * p;
  int64_t placed = 0;
  const int32_t stash_limit = 2 * p;
  for (int64_t now = 0; placed < total; ++now) {
    bool any = false;
    for (int32_t s = 0; s < p; ++s) {
      StageState& st = state[s];
      // ready: the next op of `kind` on `chunk` if its inputs finished by `now`.
      auto ready = [&](OpKind kind, int32_t chunk) -> std::optional<PipelineOp> {
        const bool forward = kind == OpKind::kForward;
        const int32_t mb = forward ? st.next_forward[chunk] : st.next_backward[chunk];
        if (mb >= m) return std::nullopt;
        const int32_t k = VirtualStage(chunk, s, p, Placement::kVShape);
        if (forward) {
          if (k > 0 && finished(OpKind::kForward, k - 1, mb) > now) return std::nullopt;
        } else {
          if (finished(OpKind::kForward, k, mb) > now) return std::nullopt;
          if (k + 1 < num_virtual && finished(OpKind::kBackwardInput, k + 1, mb) > now) {
            return std::nullopt;
          }
        }
        return PipelineOp{kind, mb, chunk};
      };
      std::optional<PipelineOp> chosen;
      bool run_w = st.pending_w.size() > static_cast<size_t>(2 * s + 1);
      if (!run_w) {
        constexpr std::array<std::pair<OpKind, int32_t>, 4> kPriority = {
            std::pair{OpKind::kBackwardInput, 0}, std::pair{OpKind::kForward, 1},
            std::pair{OpKind::kForward, 0}, std::pair{OpKind::kBackwardInput, 1}};
        for (const auto& [kind, chunk] : kPriority) {
          std::optional<PipelineOp> op = ready(kind, chunk);
          if (!op) continue;
          if (kind == OpKind::kForward && st.stashed + 1 > stash_limit) {
            if (!st.pending_w.empty()) {
              run_w = true;
              break;
            }
            continue;
          }
          chosen = op;
          break;
        }
        if (!chosen && !st.pending_w.empty()) run_w = true;
      }
      if (run_w) {
        chosen = st.pending_w.front();
        st.pending_w.pop_front();
        --st.stashed;
      }
      if (!chosen) continue;
      const PipelineOp op = *chosen;
      const int32_t k = VirtualStage(op.chunk, s, p, Placement::kVShape);
      if (op.kind == OpKind::kForward) {
        ++st.next_forward[op.chunk];
        ++st.stashed;
        finished(OpKind::kForward, k, op.microbatch) = now + 1;
      } else if (op.kind == OpKind::kBackwardInput) {
        ++st.next_backward[op.chunk];
        st.pending_w.push_back({OpKind::kBackwardWeight, op.microbatch, op.chunk});
        finished(OpKind::kBackwardInput, k, op.microbatch) = now + 1;
      }
      schedule.stages[s].push_back(op);
      ++placed;
      any = true;
    }
    if (!any) {
      return absl::InternalError(absl::StrCat("zb-v: the list scheduler stalled at unit ", now,
                                              " with ", total - placed, " of ", total,
                                              " ops left (p=", p, ", m=", m, ")"));
    }
  }
  return schedule;
}

absl::StatusOr<PipelineSchedule> ForwardOnlyVSchedule(int32_t num_stages,
                                                      int32_t num_microbatches) {
  absl::Status status = CheckScheduleDimensions("zb-v", num_stages, 2, num_microbatches);
  if (!status.ok()) return status;
  PipelineSchedule schedule;
  schedule.name = "zb-v";
  schedule.num_stages = num_stages;
  schedule.num_chunks = 2;
  schedule.num_microbatches = num_microbatches;
  schedule.forward_only = true;
  schedule.placement = Placement::kVShape;
  schedule.stages.resize(num_stages);
  for (StageSchedule& ops : schedule.stages) {
    for (int32_t chunk = 0; chunk < 2; ++chunk) {
      for (int32_t mb = 0; mb < num_microbatches; ++mb) {
        ops.push_back({OpKind::kForward, mb, chunk});
      }
    }
  }
  return schedule;
}

}  // namespace mxmaca::scheduler
