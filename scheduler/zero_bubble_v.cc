// scheduler/zero_bubble_v.cc: see zero_bubble_v.h.
#include "scheduler/zero_bubble_v.h"

#include <algorithm>
#include <array>
#include <deque>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace mxmaca::scheduler {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// The list scheduler's state for one stage.
struct StageState {
  std::array<int32_t, 2> next_forward = {0, 0};   // next micro-batch per chunk
  std::array<int32_t, 2> next_backward = {0, 0};  // next micro-batch per chunk
  std::deque<PipelineOp> pending_w;               // W whose B ran, oldest first
  int32_t stashed = 0;                            // chunk activations held (F to W)
  double free_at = 0;                             // when the stage next decides
};

// Rule 2's order: B chunk 0, F chunk 1, F chunk 0, B chunk 1.
constexpr std::array<std::pair<OpKind, int32_t>, 4> kPriority = {
    std::pair{OpKind::kBackwardInput, 0}, std::pair{OpKind::kForward, 1},
    std::pair{OpKind::kForward, 0}, std::pair{OpKind::kBackwardInput, 1}};

}  // namespace

absl::StatusOr<PipelineSchedule> ZeroBubbleVSchedule(int32_t num_stages, int32_t num_microbatches,
                                                     const OpCosts& costs) {
  absl::Status status = CheckScheduleDimensions("zb-v", num_stages, 2, num_microbatches);
  if (!status.ok()) return status;
  const int32_t p = num_stages, m = num_microbatches, num_virtual = 2 * num_stages;
  if (costs.per_stage.size() != static_cast<size_t>(p)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "zb-v: op costs given for ", costs.per_stage.size(), " stages, expected p = ", p));
  }
  for (int32_t s = 0; s < p; ++s) {
    for (int kind = 0; kind < 3; ++kind) {
      const double c = costs.per_stage[s][kind];
      // Zero-time ops would let the scheduler loop without time advancing.
      if (!(c > 0) || c == kNever) {
        return absl::InvalidArgumentError(absl::StrCat("zb-v: stage ", s, ": op time of kind ",
                                                       kind, " must be > 0 and finite, got ", c));
      }
    }
  }
  if (!(costs.comm_latency >= 0) || costs.comm_latency == kNever) {
    return absl::InvalidArgumentError(
        absl::StrCat("zb-v: comm latency must be >= 0 and finite, got ", costs.comm_latency));
  }
  PipelineSchedule schedule;
  schedule.name = "zb-v";
  schedule.num_stages = p;
  schedule.num_chunks = 2;
  schedule.num_microbatches = m;
  schedule.placement = Placement::kVShape;
  schedule.stages.resize(p);

  // finished[kind][virtual stage * m + mb]: when that F / B ended (kNever: not yet placed).
  std::array<std::vector<double>, 2> finished;
  for (auto& f : finished) f.assign(static_cast<size_t>(num_virtual) * m, kNever);
  auto finish_of = [&](OpKind kind, int32_t k, int32_t mb) -> double& {
    return finished[kind == OpKind::kForward ? 0 : 1][static_cast<size_t>(k) * m + mb];
  };
  // Times at which some input may become available (op ends and message arrivals).
  std::priority_queue<double, std::vector<double>, std::greater<double>> events;
  std::vector<StageState> state(p);
  const int64_t total = int64_t{6} * m * p;
  int64_t placed = 0;
  const int32_t stash_limit = 2 * p;
  // overflow: every stage is stuck with a full stash and nothing running (possible with
  // message latency: the warm-up fills the stash before a chunk-1 activation returns);
  // then F of chunk 1 may exceed the limit, which lets micro-batches reach the loss.
  bool overflow = false;
  while (placed < total) {
    double now = kNever;
    for (const StageState& st : state) now = std::min(now, st.free_at);
    for (int32_t s = 0; s < p; ++s) {
      StageState& st = state[s];
      if (st.free_at != now) continue;
      // arrived: when the input made by `kind` on virtual stage `from` is usable here (a
      // message between virtual stages, latency included as SimulateSchedule counts it).
      auto arrived = [&](OpKind kind, int32_t from, int32_t mb) {
        return finish_of(kind, from, mb) + costs.comm_latency;
      };
      // ready: the next op of `kind` on `chunk` if its inputs are there at `now`.
      auto ready = [&](OpKind kind, int32_t chunk) -> std::optional<PipelineOp> {
        const bool forward = kind == OpKind::kForward;
        const int32_t mb = forward ? st.next_forward[chunk] : st.next_backward[chunk];
        if (mb >= m) return std::nullopt;
        const int32_t k = VirtualStage(chunk, s, p, Placement::kVShape);
        if (forward) {
          if (k > 0 && arrived(OpKind::kForward, k - 1, mb) > now) return std::nullopt;
        } else {
          if (finish_of(OpKind::kForward, k, mb) > now) return std::nullopt;
          if (k + 1 < num_virtual && arrived(OpKind::kBackwardInput, k + 1, mb) > now) {
            return std::nullopt;
          }
        }
        return PipelineOp{kind, mb, chunk};
      };
      std::optional<PipelineOp> chosen;
      bool run_w = false;
      for (const auto& [kind, chunk] : kPriority) {
        std::optional<PipelineOp> op = ready(kind, chunk);
        if (!op) continue;
        if (kind == OpKind::kForward && st.stashed + 1 > stash_limit && !(overflow && chunk == 1)) {
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
      if (run_w) {
        chosen = st.pending_w.front();
        st.pending_w.pop_front();
        --st.stashed;
      }
      if (!chosen) continue;  // waits for the next event
      const PipelineOp op = *chosen;
      const int32_t k = VirtualStage(op.chunk, s, p, Placement::kVShape);
      const double end = now + costs.per_stage[s][static_cast<int>(op.kind)];
      if (op.kind == OpKind::kForward) {
        ++st.next_forward[op.chunk];
        ++st.stashed;
        finish_of(OpKind::kForward, k, op.microbatch) = end;
      } else if (op.kind == OpKind::kBackwardInput) {
        ++st.next_backward[op.chunk];
        st.pending_w.push_back({OpKind::kBackwardWeight, op.microbatch, op.chunk});
        finish_of(OpKind::kBackwardInput, k, op.microbatch) = end;
      }
      events.push(end);
      events.push(end + costs.comm_latency);
      st.free_at = end;
      schedule.stages[s].push_back(op);
      ++placed;
      overflow = false;
    }
    // Stages that could not run wait for the next op end or message arrival.
    while (!events.empty() && events.top() <= now) events.pop();
    if (events.empty() && placed < total) {
      // Nothing runs and nothing will arrive: retry once with the stash overflow allowed.
      if (!overflow) {
        overflow = true;
        continue;
      }
      return absl::InternalError(absl::StrCat("zb-v: the list scheduler stalled at time ", now,
                                              " with ", total - placed, " of ", total,
                                              " ops left (p=", p, ", m=", m, ")"));
    }
    for (int32_t s = 0; s < p && placed < total; ++s) {
      if (state[s].free_at == now) state[s].free_at = events.top();
    }
  }
  return schedule;
}

absl::StatusOr<PipelineSchedule> ZeroBubbleVSchedule(int32_t num_stages, int32_t num_microbatches) {
  return ZeroBubbleVSchedule(num_stages, num_microbatches,
                             OpCosts::Uniform(std::max(num_stages, 0), 1, 1, 1));
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
