// layers/lr_schedule.h: Megatron's OptimizerParamScheduler (learning rate and weight
// decay as functions of the number of samples consumed).
//
// Source: megatron/core/optimizer_param_scheduler.py (core_v0.15.0; the decoupled group and
// the resume rules (api/train/resume_rules.h) as of core_v0.19.0), get_lr / get_wd /
// step, and megatron/training/training.py get_optimizer_param_scheduler, which counts
// steps in SAMPLES: with --train-iters, lr_decay_steps = lr_decay_iters x global batch,
// warmup steps = lr_warmup_iters x global batch (or lr_warmup_fraction x decay steps), and
// the scheduler advances by the global batch size after each successful iteration. The
// scheduler is constructed at step 0 (so iteration 1 runs at the step-0 learning rate,
// init_lr when warming up), exactly as Megatron does.
#ifndef MXMACA_LAYERS_LR_SCHEDULE_H_
#define MXMACA_LAYERS_LR_SCHEDULE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace mxmaca::layers {

// LrDecayStyle: --lr-decay-style.
enum class LrDecayStyle { kConstant, kLinear, kCosine, kInverseSquareRoot };
// WdIncrStyle: --weight-decay-incr-style.
enum class WdIncrStyle { kConstant, kLinear, kCosine };

// ParseLrDecayStyle: "constant" | "linear" | "cosine" | "inverse-square-root"; any other
// value is InvalidArgument naming it and the choices.
absl::StatusOr<LrDecayStyle> ParseLrDecayStyle(const std::string& name);
// ParseWdIncrStyle: "constant" | "linear" | "cosine".
absl::StatusOr<WdIncrStyle> ParseWdIncrStyle(const std::string& name);
// LrDecayStyleName / WdIncrStyleName: the flag spellings above (Megatron's state_dict
// stores these strings).
const char* LrDecayStyleName(LrDecayStyle style);
const char* WdIncrStyleName(WdIncrStyle style);

// OptimizerParamSchedulerConfig: all step counts are in samples (see the file comment).
struct OptimizerParamSchedulerConfig {
  double init_lr = 0.0;          // --lr-warmup-init
  double max_lr = 0.0;           // --lr
  double min_lr = 0.0;           // --min-lr
  int64_t lr_warmup_steps = 0;   // samples
  int64_t lr_decay_steps = 0;    // samples, > 0 unless the style is constant
  LrDecayStyle lr_decay_style = LrDecayStyle::kLinear;
  double start_wd = 0.01;        // --start-weight-decay (default --weight-decay)
  double end_wd = 0.01;          // --end-weight-decay (default --weight-decay)
  int64_t wd_incr_steps = 0;     // samples (train_iters x global batch)
  WdIncrStyle wd_incr_style = WdIncrStyle::kConstant;
  // --decoupled-lr / --decoupled-min-lr: the max_lr / min_lr of Megatron's decoupled
  // parameter group (embedding.word_embeddings.weight and output_layer.weight;
  // megatron/core/optimizer/__init__.py get_standard_config_overrides). The group follows
  // the same warmup (from init_lr), decay style and steps; unset decoupled_min_lr = min_lr.
  std::optional<double> decoupled_lr;
  std::optional<double> decoupled_min_lr;
};

// OptimizerParamScheduler: lr() and weight_decay() for the current step count.
class OptimizerParamScheduler {
 public:
  // Validates the config (InvalidArgument naming the value: max_lr < min_lr, negative
  // steps, decay steps <= warmup steps for a decaying style) and sets step 0.
  static absl::StatusOr<OptimizerParamScheduler> Create(
      const OptimizerParamSchedulerConfig& config);

  // Step: advances by `increment` samples (the global batch size after a successful
  // iteration) and recomputes lr and weight decay.
  void Step(int64_t increment);
  // SetNumSteps: restores the sample count from a checkpoint.
  void SetNumSteps(int64_t num_steps);

  double lr() const { return lr_; }
  // decoupled_lr: the decoupled group's learning rate at the current step (lr() when
  // config().decoupled_lr is unset).
  double decoupled_lr() const { return decoupled_lr_; }
  double weight_decay() const { return wd_; }
  int64_t num_steps() const { return num_steps_; }
  const OptimizerParamSchedulerConfig& config() const { return config_; }

  // LrAt / WeightDecayAt: the values at a given sample count (Megatron's get_lr / get_wd).
  double LrAt(int64_t num_steps) const;
  // LrAt with a parameter group's own bounds (Megatron's get_lr(param_group) with the
  // group's max_lr / min_lr).
  double LrAt(int64_t num_steps, double max_lr, double min_lr) const;
  double WeightDecayAt(int64_t num_steps) const;

 private:
  explicit OptimizerParamScheduler(const OptimizerParamSchedulerConfig& c) : config_(c) {}
  OptimizerParamSchedulerConfig config_;
  int64_t num_steps_ = 0;
  double lr_ = 0.0;
  double decoupled_lr_ = 0.0;
  double wd_ = 0.0;
};

}  // namespace mxmaca::layers

#endif  // MXMACA_LAYERS_LR_SCHEDULE_H_
