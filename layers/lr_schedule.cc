// layers/lr_schedule.cc: see lr_schedule.h.
#include "layers/lr_schedule.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace mxmaca::layers {

absl::StatusOr<LrDecayStyle> ParseLrDecayStyle(const std::string& name) {
  if (name == "constant") return LrDecayStyle::kConstant;
  if (name == "linear") return LrDecayStyle::kLinear;
  if (name == "cosine") return LrDecayStyle::kCosine;
  if (name == "inverse-square-root") return LrDecayStyle::kInverseSquareRoot;
  return absl::InvalidArgumentError(absl::StrCat(
      "--lr-decay-style ", name,
      ": expected one of constant, linear, cosine, inverse-square-root"));
}

absl::StatusOr<WdIncrStyle> ParseWdIncrStyle(const std::string& name) {
  if (name == "constant") return WdIncrStyle::kConstant;
  if (name == "linear") return WdIncrStyle::kLinear;
  if (name == "cosine") return WdIncrStyle::kCosine;
  return absl::InvalidArgumentError(absl::StrCat(
      "--weight-decay-incr-style ", name, ": expected one of constant, linear, cosine"));
}

const char* LrDecayStyleName(LrDecayStyle style) {
  switch (style) {
    case LrDecayStyle::kConstant: return "constant";
    case LrDecayStyle::kLinear: return "linear";
    case LrDecayStyle::kCosine: return "cosine";
    case LrDecayStyle::kInverseSquareRoot: return "inverse-square-root";
  }
  return "linear";
}

const char* WdIncrStyleName(WdIncrStyle style) {
  switch (style) {
    case WdIncrStyle::kConstant: return "constant";
    case WdIncrStyle::kLinear: return "linear";
    case WdIncrStyle::kCosine: return "cosine";
  }
  return "constant";
}

absl::StatusOr<OptimizerParamScheduler> OptimizerParamScheduler::Create(
    const OptimizerParamSchedulerConfig& c) {
  if (c.max_lr < c.min_lr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--min-lr ", c.min_lr, " is larger than --lr ", c.max_lr, ": expected min_lr <= lr"));
  }
  if (c.lr_warmup_steps < 0 || c.lr_decay_steps < 0 || c.wd_incr_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "learning-rate schedule steps must be >= 0 (warmup ", c.lr_warmup_steps,
        ", decay ", c.lr_decay_steps, ", wd increment ", c.wd_incr_steps, " samples)"));
  }
  if (c.lr_decay_style != LrDecayStyle::kConstant && c.lr_decay_steps <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--lr-decay-iters/--lr-decay-samples gives ", c.lr_decay_steps,
        " decay samples: expected > 0 for a decaying --lr-decay-style"));
  }
  if (c.lr_decay_style != LrDecayStyle::kConstant &&
      c.lr_decay_style != LrDecayStyle::kInverseSquareRoot &&
      c.lr_warmup_steps >= c.lr_decay_steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "learning-rate warmup (", c.lr_warmup_steps, " samples) must be shorter than decay (",
        c.lr_decay_steps, " samples)"));
  }
  if (c.start_wd < 0 || c.end_wd < c.start_wd) {
    return absl::InvalidArgumentError(absl::StrCat(
        "weight decay must satisfy 0 <= start_weight_decay <= end_weight_decay, got ",
        c.start_wd, " and ", c.end_wd));
  }
  if (c.decoupled_lr && (!std::isfinite(*c.decoupled_lr) || *c.decoupled_lr < 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--decoupled-lr ", *c.decoupled_lr, ": expected a finite number >= 0"));
  }
  if (c.decoupled_min_lr && !c.decoupled_lr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--decoupled-min-lr ", *c.decoupled_min_lr, " needs --decoupled-lr"));
  }
  if (c.decoupled_lr) {
    const double dmin = c.decoupled_min_lr.value_or(c.min_lr);
    if (!std::isfinite(dmin) || dmin < 0 || dmin > *c.decoupled_lr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--decoupled-min-lr ", dmin, " (default --min-lr) with --decoupled-lr ",
          *c.decoupled_lr, ": expected 0 <= decoupled_min_lr <= decoupled_lr"));
    }
  }
  OptimizerParamScheduler s(c);
  s.Step(0);
  return s;
}

double OptimizerParamScheduler::LrAt(int64_t num_steps) const {
  return LrAt(num_steps, config_.max_lr, config_.min_lr);
}

double OptimizerParamScheduler::LrAt(int64_t num_steps, double max_lr, double min_lr) const {
  OptimizerParamSchedulerConfig c = config_;
  c.max_lr = max_lr;
  c.min_lr = min_lr;
  // Linear warmup from init_lr to max_lr.
  if (c.lr_warmup_steps > 0 && num_steps <= c.lr_warmup_steps) {
    return c.init_lr + (c.max_lr - c.init_lr) * static_cast<double>(num_steps) /
                           static_cast<double>(c.lr_warmup_steps);
  }
  if (c.lr_decay_style == LrDecayStyle::kConstant) return c.max_lr;
  if (num_steps > c.lr_decay_steps) return c.min_lr;
  if (c.lr_decay_style == LrDecayStyle::kInverseSquareRoot) {
    const double warmup = std::max<int64_t>(c.lr_warmup_steps, 1);
    const double steps = std::max<int64_t>(num_steps, 1);
    const double lr = c.max_lr * std::sqrt(warmup) / std::sqrt(steps);
    return std::max(c.min_lr, lr);
  }
  const double decay_ratio = static_cast<double>(num_steps - c.lr_warmup_steps) /
                             static_cast<double>(c.lr_decay_steps - c.lr_warmup_steps);
  const double delta_lr = c.max_lr - c.min_lr;
  double coeff = 0.0;
  if (c.lr_decay_style == LrDecayStyle::kLinear) {
    coeff = 1.0 - decay_ratio;
  } else {  // cosine
    coeff = 0.5 * (std::cos(M_PI * decay_ratio) + 1.0);
  }
  return c.min_lr + coeff * delta_lr;
}

double OptimizerParamScheduler::WeightDecayAt(int64_t num_steps) const {
  const auto& c = config_;
  if (num_steps > c.wd_incr_steps) return c.end_wd;
  if (c.wd_incr_style == WdIncrStyle::kConstant) return c.end_wd;
  const double ratio = c.wd_incr_steps > 0 ? static_cast<double>(num_steps) /
                                                 static_cast<double>(c.wd_incr_steps)
                                           : 1.0;
  const double delta = c.end_wd - c.start_wd;
  const double coeff = c.wd_incr_style == WdIncrStyle::kLinear
                           ? ratio
                           : 0.5 * (std::cos(M_PI * (1 - ratio)) + 1.0);
  return c.start_wd + coeff * delta;
}

void OptimizerParamScheduler::Step(int64_t increment) {
  num_steps_ += increment;
  lr_ = LrAt(num_steps_);
  decoupled_lr_ = config_.decoupled_lr
                      ? LrAt(num_steps_, *config_.decoupled_lr,
                             config_.decoupled_min_lr.value_or(config_.min_lr))
                      : lr_;
  wd_ = WeightDecayAt(num_steps_);
}

void OptimizerParamScheduler::SetNumSteps(int64_t num_steps) {
  num_steps_ = 0;
  Step(num_steps);
}

}  // namespace mxmaca::layers
