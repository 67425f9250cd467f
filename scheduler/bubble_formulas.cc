// scheduler/bubble_formulas.cc: see bubble_formulas.h.
#include "scheduler/bubble_formulas.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace mxmaca::scheduler {
namespace {

bool FusedBackward(ScheduleKind kind) {
  return kind == ScheduleKind::kGPipe || kind == ScheduleKind::kOneFOneB ||
         kind == ScheduleKind::kInterleaved1F1B;
}

absl::Status Unsupported(ScheduleKind kind, const std::string& condition) {
  return absl::FailedPreconditionError(
      absl::StrCat(ScheduleKindName(kind), ": no closed-form bubble claimed unless ", condition));
}

}  // namespace

OpCosts OpCostsFor(ScheduleKind kind, const StageOpTimes& times, int32_t num_stages,
                   int32_t num_chunks) {
  const double v = std::max(num_chunks, 1);
  return OpCosts::Uniform(num_stages, times.forward / v, times.backward_input / v,
                          times.backward_weight / v, 0, FusedBackward(kind));
}

absl::StatusOr<PipelineBubble> ClosedFormBubble(ScheduleKind kind, const StageOpTimes& times,
                                                int32_t num_stages, int32_t num_microbatches,
                                                int32_t num_chunks) {
  const std::string name = ScheduleKindName(kind);
  const int32_t p = num_stages, m = num_microbatches, v = num_chunks;
  if (p < 1 || m < 1 || v < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": p, m and v must be >= 1, got p=", p, " m=", m, " v=", v));
  }
  const double f = times.forward, b = times.backward_input, w = times.backward_weight;
  if (!(f >= 0) || !(b >= 0) || !(w >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": op times must be >= 0, got T_F=", f, " T_B=", b, " T_W=", w));
  }
  const int32_t want_v = kind == ScheduleKind::kZeroBubbleV       ? 2
                         : kind == ScheduleKind::kInterleaved1F1B ? v
                                                                  : 1;
  if (v != want_v) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": needs v = ", want_v, " chunks per stage, got ", v));
  }
  const double sum = f + b + w, q = p - 1;
  double idle = 0, span = 0;
  switch (kind) {
    case ScheduleKind::kGPipe:
    case ScheduleKind::kOneFOneB:
      idle = span = q * sum;
      break;
    case ScheduleKind::kInterleaved1F1B:
      if (v > 1 && m % p != 0) return Unsupported(kind, "m is a multiple of p");
      idle = span = q * sum / v;
      break;
    case ScheduleKind::kZeroBubbleH1:
      if (m < p) return Unsupported(kind, "m >= p");
      idle = q * std::max({f + b - w, f, b});
      span = q * std::max(f + b - w, b);
      break;
    case ScheduleKind::kZeroBubbleH2:
      if (m < 2 * p - 1) return Unsupported(kind, "m >= 2p - 1");
      idle = q * std::max({f, f + b - 2 * w, b - f});
      span = q * std::max({0.0, f + b - 2 * w, b - f});
      break;
    case ScheduleKind::kZeroBubbleV:
      if (f != b || b != w) return Unsupported(kind, "T_F = T_B = T_W");
      if (m < 2 * p) return Unsupported(kind, "m >= 2p");
      if (p > 9) return Unsupported(kind, "p <= 9");
      idle = q * f / 2;
      span = p <= 4 ? 0 : f / 2;
      break;
  }
  PipelineBubble bubble;
  bubble.step_time = m * sum + idle;
  bubble.idle_per_stage = idle;
  bubble.bubble_fraction = bubble.step_time > 0 ? idle / bubble.step_time : 0;
  bubble.span_bubble = span;
  return bubble;
}

PipelineBubble MeasuredBubble(const ScheduleTiming& timing, double busy_per_stage) {
  PipelineBubble bubble;
  bubble.step_time = timing.makespan;
  bubble.idle_per_stage = timing.makespan - busy_per_stage;
  bubble.bubble_fraction = timing.bubble_fraction;
  bool first = true;
  for (const auto& ops : timing.ops) {
    if (ops.empty()) continue;
    const double span = ops.back().finish - ops.front().start - busy_per_stage;
    bubble.span_bubble = first ? span : std::max(bubble.span_bubble, span);
    first = false;
  }
  return bubble;
}

}  // namespace mxmaca::scheduler
