// api/args/megatron_args_validate.cc: ValidateAndDeriveArgs, Megatron's
// `validate_args` (megatron/training/arguments.py) and the TransformerConfig checks
// (megatron/core/transformer/transformer_config.py) for the flags MXMACA honours,
// in Megatron's order, plus MXMACA's own limits (marked "MXMACA").
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "api/args/megatron_args.h"
#include "base/status_macros.h"

namespace mxmaca::api {
namespace {

template <typename... Parts>
absl::Status Invalid(const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(parts...));
}

// ExpandLayout: Megatron's --pipeline-model-parallel-layout shorthand expanded:
// commas dropped, "(...)*N" and "x*N" repeated N times ("E|(t|)*3,L" -> "E|t|t|t|L").
absl::StatusOr<std::string> ExpandLayout(std::string layout) {
  layout.erase(std::remove(layout.begin(), layout.end(), ','), layout.end());
  layout.erase(std::remove(layout.begin(), layout.end(), ' '), layout.end());
  for (int guard = 0; guard < 1000; ++guard) {
    const size_t star = layout.find('*');
    if (star == std::string::npos) return layout;
    size_t count_end = star + 1;
    while (count_end < layout.size() &&
           std::isdigit(static_cast<unsigned char>(layout[count_end]))) {
      ++count_end;
    }
    int count = 0;
    if (count_end == star + 1 ||
        !absl::SimpleAtoi(layout.substr(star + 1, count_end - star - 1), &count) || star == 0) {
      return Invalid("--pipeline-model-parallel-layout '", layout,
                     "': '*' must follow a layer or a (group) and precede a count");
    }
    size_t begin = star - 1;
    std::string unit;
    if (layout[star - 1] == ')') {
      int depth = 0;
      size_t j = star - 1;
      for (;; --j) {
        if (layout[j] == ')') ++depth;
        if (layout[j] == '(' && --depth == 0) break;
        if (j == 0) return Invalid("--pipeline-model-parallel-layout: unbalanced ')'");
      }
      begin = j;
      unit = layout.substr(j + 1, star - 2 - j);
    } else {
      unit = layout.substr(star - 1, 1);
    }
    std::string repeated;
    for (int k = 0; k < count; ++k) repeated += unit;
    layout = layout.substr(0, begin) + repeated + layout.substr(count_end);
  }
  return Invalid("--pipeline-model-parallel-layout: too deeply nested");
}

// CheckSplit: --split is 1 to 3 non-negative numbers separated by ',' or '/' whose
// sum is positive (Megatron's parse_and_normalize_split).
absl::Status CheckSplit(const std::string& split) {
  std::vector<std::string> parts = absl::StrSplit(split, absl::ByAnyChar(",/"));
  double sum = 0;
  for (const std::string& part : parts) {
    double value = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(part), &value) || value < 0) {
      return Invalid("--split '", split, "': '", part, "' is not a non-negative number");
    }
    sum += value;
  }
  if (parts.size() > 3 || sum <= 0) {
    return Invalid("--split '", split, "': expected up to 3 weights with a positive sum");
  }
  return absl::OkStatus();
}

absl::Status ValidateParallelism(MegatronArgs* a, int world_size) {
  if (world_size < 1) return Invalid("world size must be >= 1, got ", world_size);
  for (const auto& [name, value] :
       {std::pair<const char*, int64_t>{"--tensor-model-parallel-size",
                                        a->tensor_model_parallel_size},
        {"--pipeline-model-parallel-size", a->pipeline_model_parallel_size},
        {"--context-parallel-size", a->context_parallel_size},
        {"--expert-model-parallel-size", a->expert_model_parallel_size}}) {
    if (value < 1) return Invalid(name, " must be >= 1, got ", value);
  }
  a->world_size = world_size;
  const int64_t model_size =
      a->tensor_model_parallel_size * a->pipeline_model_parallel_size * a->context_parallel_size;
  if (world_size % model_size != 0) {
    return Invalid("world size (", world_size, ") is not divisible by tensor (",
                   a->tensor_model_parallel_size, ") x pipeline (", a->pipeline_model_parallel_size,
                   ") x context (", a->context_parallel_size, ") parallel size = ", model_size);
  }
  a->data_parallel_size = world_size / model_size;
  if (!a->expert_tensor_parallel_size.has_value()) {
    a->expert_tensor_parallel_size = a->tensor_model_parallel_size;
  }
  // parallel_state.initialize_model_parallel: the expert grid (etp, ep, edp, pp) tiles
  // the same ranks, so etp x ep x pp must divide the world size.
  const int64_t etp = *a->expert_tensor_parallel_size;
  const int64_t expert_grid = etp * a->expert_model_parallel_size * a->pipeline_model_parallel_size;
  if (etp < 1 || world_size % expert_grid != 0) {
    return Invalid("world size (", world_size, ") is not divisible by expert tensor (", etp,
                   ") x expert (", a->expert_model_parallel_size, ") x pipeline (",
                   a->pipeline_model_parallel_size, ") parallel size = ", expert_grid);
  }
  return absl::OkStatus();
}

// Virtual (interleaved) and uneven pipeline stages, as validate_args and
// TransformerConfig check them.
absl::Status ValidatePipeline(MegatronArgs* a) {
  const int64_t pp = a->pipeline_model_parallel_size;
  const int set_count = int(a->num_layers_per_virtual_pipeline_stage.has_value()) +
                        int(a->num_virtual_stages_per_pipeline_rank.has_value()) +
                        int(a->pipeline_model_parallel_layout.has_value());
  if (set_count > 1) {
    return Invalid(
        "no more than one of --num-layers-per-virtual-pipeline-stage, "
        "--num-virtual-stages-per-pipeline-rank and "
        "--pipeline-model-parallel-layout can be given");
  }
  int64_t num_layers = *a->num_layers;
  if (a->account_for_embedding_in_pipeline_split) ++num_layers;
  if (a->account_for_loss_in_pipeline_split) ++num_layers;
  const bool uneven = a->decoder_first_pipeline_num_layers.has_value() ||
                      a->decoder_last_pipeline_num_layers.has_value();
  a->virtual_pipeline_model_parallel_size.reset();
  if (a->pipeline_model_parallel_layout.has_value()) {
    MXMACA_ASSIGN_OR_RETURN(const std::string expanded,
                            ExpandLayout(*a->pipeline_model_parallel_layout));
    const int64_t stages = std::count(expanded.begin(), expanded.end(), '|') + 1;
    if (stages % pp != 0) {
      return Invalid("--pipeline-model-parallel-layout has ", stages,
                     " stages, not divisible by --pipeline-model-parallel-size ", pp);
    }
    a->virtual_pipeline_model_parallel_size = stages / pp;
  } else if (a->num_layers_per_virtual_pipeline_stage.has_value()) {
    const int64_t per_virtual = *a->num_layers_per_virtual_pipeline_stage;
    if (uneven) {
      return Invalid(
          "use --num-virtual-stages-per-pipeline-rank, not "
          "--num-layers-per-virtual-pipeline-stage, with uneven pipeline stages");
    }
    if (num_layers % pp != 0) {
      return Invalid("number of layers (", num_layers,
                     ") is not divisible by --pipeline-model-parallel-size (", pp, ")");
    }
    if (per_virtual < 1 || (num_layers / pp) % per_virtual != 0) {
      return Invalid("layers per pipeline stage (", num_layers / pp,
                     ") is not divisible by --num-layers-per-virtual-pipeline-stage (", per_virtual,
                     ")");
    }
    a->virtual_pipeline_model_parallel_size = num_layers / pp / per_virtual;
  } else if (a->num_virtual_stages_per_pipeline_rank.has_value()) {
    if (*a->num_virtual_stages_per_pipeline_rank < 1) {
      return Invalid("--num-virtual-stages-per-pipeline-rank must be >= 1, got ",
                     *a->num_virtual_stages_per_pipeline_rank);
    }
    a->virtual_pipeline_model_parallel_size = *a->num_virtual_stages_per_pipeline_rank;
  } else if (!uneven && num_layers % pp != 0) {
    return Invalid("number of layers (", num_layers,
                   ") is not divisible by --pipeline-model-parallel-size (", pp, ")");
  }
  if (a->virtual_pipeline_model_parallel_size == 1) a->virtual_pipeline_model_parallel_size.reset();
  // Megatron's default --overlap-p2p-communication (on) needs pp > 1 when interleaved.
  if (a->virtual_pipeline_model_parallel_size.has_value() && pp <= 1) {
    return Invalid("interleaved pipeline stages need --pipeline-model-parallel-size > 1");
  }
  if (uneven && !a->pipeline_model_parallel_layout.has_value()) {
    // TransformerConfig: the layers not on the first/last stage split evenly.
    int64_t rest_layers = *a->num_layers;
    int64_t rest_stages = pp;
    for (const auto& [name, value] :
         {std::pair<const char*, std::optional<int64_t>>{"--decoder-first-pipeline-num-layers",
                                                         a->decoder_first_pipeline_num_layers},
          {"--decoder-last-pipeline-num-layers", a->decoder_last_pipeline_num_layers}}) {
      if (!value.has_value()) continue;
      if (*value < 0) return Invalid(name, " must be >= 0, got ", *value);
      rest_layers -= *value;
      --rest_stages;
    }
    if (pp <= 1) {
      return Invalid(
          "--decoder-first-pipeline-num-layers/--decoder-last-pipeline-num-layers "
          "need --pipeline-model-parallel-size > 1");
    }
    if (rest_layers < 0 || (rest_stages == 0 && rest_layers != 0) ||
        (rest_stages > 0 &&
         rest_layers % (rest_stages * a->virtual_pipeline_model_parallel_size.value_or(1)) != 0)) {
      return Invalid("uneven pipeline: ", *a->num_layers,
                     " layers minus the first/last stage's "
                     "leave ",
                     rest_layers, " layers, which do not split evenly over the other ", rest_stages,
                     " of ", pp, " pipeline stages");
    }
  }
  if (a->overlap_param_gather && (!a->use_distributed_optimizer || !a->overlap_grad_reduce)) {
    return Invalid(
        "--overlap-param-gather needs --use-distributed-optimizer and "
        "--overlap-grad-reduce");
  }
  // megatron/training/arguments.py validate_args ("Optimizer CPU offload check").
  if (a->optimizer_cpu_offload && !a->use_precision_aware_optimizer) {
    return Invalid(
        "--optimizer-cpu-offload must be used together with --use-precision-aware-optimizer "
        "(as in Megatron, whose hybrid device optimizer reuses that flag's code path)");
  }
  return absl::OkStatus();
}

// CheckRange: `value` of `flag` is a finite number in the range `lo` .. `hi` (each end
// closed or open as `lo_open` / `hi_open` say; an infinite end is no bound); the message
// names the flag, the value and the expected range ("--adam-beta1 2: expected a finite
// number in [0, 1)").
absl::Status CheckRange(const char* flag, double value, double lo, bool lo_open, double hi,
                        bool hi_open) {
  const bool above = lo_open ? value > lo : value >= lo;
  const bool below = hi_open ? value < hi : value <= hi;
  if (std::isfinite(value) && above && below) return absl::OkStatus();
  std::string range;
  if (std::isinf(hi)) {
    range = absl::StrCat(lo_open ? "> " : ">= ", lo);
  } else {
    range = absl::StrCat("in ", lo_open ? "(" : "[", lo, ", ", hi, hi_open ? ")" : "]");
  }
  return Invalid(flag, " ", value, ": expected a finite number ", range);
}

constexpr double kInf = std::numeric_limits<double>::infinity();

// ValidateOptimizerAndSchedule: the ranges of the optimizer and schedule flags, each
// error naming the flag and the expected range. Megatron's checks: torch.optim.Adam /
// SGD's constructor (lr >= 0, eps >= 0 (here > 0: Adam divides by sqrt(v) + eps, and
// v = 0 for a parameter without gradient), 0 <= beta < 1, weight_decay >= 0,
// momentum >= 0), OptimizerParamScheduler.__init__ (min_lr >= 0, max_lr >= min_lr,
// init_lr <= max_lr, lr_decay_steps > 0, lr_warmup_steps < lr_decay_steps, start_wd >= 0,
// end_wd >= start_wd), clip_grad_norm_fp32 (--clip-grad 0 turns clipping off, a negative
// or NaN one is meaningless), training.py's `iteration % args.eval_interval` and
// evaluate's `for _ in range(eval_iters)` (an interval > 0, a count >= 0). NaN and
// infinities fail every check (NaN compares false).
absl::Status ValidateOptimizerAndSchedule(const MegatronArgs& a) {
  if (a.lr.has_value()) MXMACA_RETURN_IF_ERROR(CheckRange("--lr", *a.lr, 0, false, kInf, false));
  MXMACA_RETURN_IF_ERROR(CheckRange("--min-lr", a.min_lr, 0, false, kInf, false));
  MXMACA_RETURN_IF_ERROR(CheckRange("--lr-warmup-init", a.lr_warmup_init, 0, false, kInf, false));
  if (a.lr.has_value() && a.lr_warmup_init > *a.lr) {
    return Invalid("--lr-warmup-init (", a.lr_warmup_init, ") must be <= --lr (", *a.lr, ")");
  }
  for (const auto& [flag, value] :
       {std::pair<const char*, int64_t>{"--lr-warmup-iters", a.lr_warmup_iters},
        {"--lr-warmup-samples", a.lr_warmup_samples}}) {
    if (value < 0) return Invalid(flag, " must be >= 0, got ", value);
  }
  for (const auto& [flag, value] :
       {std::pair<const char*, std::optional<int64_t>>{"--lr-decay-iters", a.lr_decay_iters},
        {"--lr-decay-samples", a.lr_decay_samples}}) {
    if (value.has_value() && *value < 1) return Invalid(flag, " must be >= 1, got ", *value);
  }
  MXMACA_RETURN_IF_ERROR(CheckRange("--clip-grad", a.clip_grad, 0, false, kInf, false));
  MXMACA_RETURN_IF_ERROR(CheckRange("--adam-beta1", a.adam_beta1, 0, false, 1, true));
  MXMACA_RETURN_IF_ERROR(CheckRange("--adam-beta2", a.adam_beta2, 0, false, 1, true));
  MXMACA_RETURN_IF_ERROR(CheckRange("--adam-eps", a.adam_eps, 0, true, kInf, false));
  MXMACA_RETURN_IF_ERROR(CheckRange("--sgd-momentum", a.sgd_momentum, 0, false, kInf, false));
  MXMACA_RETURN_IF_ERROR(CheckRange("--weight-decay", a.weight_decay, 0, false, kInf, false));
  if (a.start_weight_decay.has_value()) {
    MXMACA_RETURN_IF_ERROR(
        CheckRange("--start-weight-decay", *a.start_weight_decay, 0, false, kInf, false));
  }
  if (a.end_weight_decay.has_value()) {
    MXMACA_RETURN_IF_ERROR(
        CheckRange("--end-weight-decay", *a.end_weight_decay, 0, false, kInf, false));
  }
  if (a.start_weight_decay.has_value() && a.end_weight_decay.has_value() &&
      *a.end_weight_decay < *a.start_weight_decay) {
    return Invalid("--end-weight-decay (", *a.end_weight_decay,
                   ") must be >= --start-weight-decay (", *a.start_weight_decay, ")");
  }
  if (a.eval_iters < 0) return Invalid("--eval-iters must be >= 0, got ", a.eval_iters);
  if (a.eval_interval.has_value() && *a.eval_interval < 1) {
    return Invalid("--eval-interval must be >= 1, got ", *a.eval_interval);
  }
  return absl::OkStatus();
}

// CheckWarmupBeforeDecay: OptimizerParamScheduler asserts lr_warmup_steps <
// lr_decay_steps (after the decay length is derived); the message names the flags.
absl::Status CheckWarmupBeforeDecay(const MegatronArgs& a) {
  if (a.train_iters.value_or(0) > 0 && a.lr_decay_iters.has_value()) {
    const double decay = static_cast<double>(*a.lr_decay_iters);
    const double warmup = a.lr_warmup_fraction ? *a.lr_warmup_fraction * decay
                                               : static_cast<double>(a.lr_warmup_iters);
    if (warmup >= decay && warmup > 0) {
      return Invalid(a.lr_warmup_fraction ? "--lr-warmup-fraction" : "--lr-warmup-iters",
                     " gives ", warmup, " warmup iterations, which must be fewer than the ",
                     *a.lr_decay_iters, " decay iterations (--lr-decay-iters, default "
                     "--train-iters)");
    }
  }
  if (a.train_samples.value_or(0) > 0 && a.lr_decay_samples.has_value()) {
    const double decay = static_cast<double>(*a.lr_decay_samples);
    const double warmup = a.lr_warmup_fraction ? *a.lr_warmup_fraction * decay
                                               : static_cast<double>(a.lr_warmup_samples);
    if (warmup >= decay && warmup > 0) {
      return Invalid(a.lr_warmup_fraction ? "--lr-warmup-fraction" : "--lr-warmup-samples",
                     " gives ", warmup, " warmup samples, which must be fewer than the ",
                     *a.lr_decay_samples, " decay samples (--lr-decay-samples, default "
                     "--train-samples)");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateIterationsAndLr(MegatronArgs* a) {
  MXMACA_RETURN_IF_ERROR(ValidateOptimizerAndSchedule(*a));
  if (a->train_iters.value_or(0) != 0) {
    if (a->train_samples.has_value()) {
      return Invalid("--train-iters (", *a->train_iters, ") and --train-samples (",
                     *a->train_samples, ") are exclusive");
    }
    if (a->lr_decay_samples.has_value()) {
      return Invalid(
          "--lr-decay-samples needs sample-based training (--train-samples), "
          "not --train-iters");
    }
    if (a->lr_warmup_samples != 0) {
      return Invalid("--lr-warmup-samples (", a->lr_warmup_samples,
                     ") needs sample-based training (--train-samples), not --train-iters");
    }
    if (a->lr_warmup_fraction.has_value() && a->lr_warmup_iters != 0) {
      return Invalid("--lr-warmup-fraction (", *a->lr_warmup_fraction, ") and --lr-warmup-iters (",
                     a->lr_warmup_iters, ") are exclusive");
    }
  }
  if (a->train_samples.value_or(0) != 0) {
    if (a->train_iters.has_value()) {
      return Invalid("--train-samples (", *a->train_samples, ") and --train-iters (",
                     *a->train_iters, ") are exclusive");
    }
    if (a->lr_decay_iters.has_value()) {
      return Invalid(
          "--lr-decay-iters needs iteration-based training (--train-iters), "
          "not --train-samples");
    }
    if (a->lr_warmup_iters != 0) {
      return Invalid("--lr-warmup-iters (", a->lr_warmup_iters,
                     ") needs iteration-based training (--train-iters), not --train-samples");
    }
    if (a->lr_warmup_fraction.has_value() && a->lr_warmup_samples != 0) {
      return Invalid("--lr-warmup-fraction (", *a->lr_warmup_fraction,
                     ") and --lr-warmup-samples (", a->lr_warmup_samples, ") are exclusive");
    }
  }
  if (!a->skip_train && a->train_iters.value_or(0) <= 0 && a->train_samples.value_or(0) <= 0) {
    return Invalid("give --train-iters or --train-samples (a positive number)");
  }
  if (!a->lr.has_value() && !a->skip_train) return Invalid("--lr is required for training");
  if (a->lr.has_value() && a->min_lr > *a->lr) {
    return Invalid("--min-lr (", a->min_lr, ") must be <= --lr (", *a->lr, ")");
  }
  if (a->lr_warmup_fraction.has_value() &&
      !(*a->lr_warmup_fraction >= 0 && *a->lr_warmup_fraction <= 1)) {  // NaN too
    return Invalid("--lr-warmup-fraction must be in [0, 1], got ", *a->lr_warmup_fraction);
  }
  if (a->lr_decay_style != "constant" && a->lr_decay_style != "linear" &&
      a->lr_decay_style != "cosine") {
    return Invalid("--lr-decay-style ", a->lr_decay_style,
                   " is not supported by MXMACA yet (constant, linear, cosine)");
  }
  if (a->optimizer != "adam") {
    return Invalid("--optimizer ", a->optimizer, " is not supported by MXMACA yet (adam)");
  }
  // OptimizerParamScheduler.__init__ asserts this.
  if (a->override_opt_param_scheduler && a->use_checkpoint_opt_param_scheduler) {
    return Invalid("--override-opt_param-scheduler and --use-checkpoint-opt_param-scheduler "
                   "are exclusive");
  }
  // get_optimizer_param_scheduler: decay over the whole run unless told otherwise.
  if (a->train_iters.has_value() && !a->lr_decay_iters.has_value()) {
    a->lr_decay_iters = a->train_iters;
  }
  if (a->train_samples.has_value() && !a->lr_decay_samples.has_value()) {
    a->lr_decay_samples = a->train_samples;
  }
  MXMACA_RETURN_IF_ERROR(CheckWarmupBeforeDecay(*a));
  if (a->weight_decay_incr_style == "constant") {
    if (a->start_weight_decay.has_value() || a->end_weight_decay.has_value()) {
      return Invalid(
          "--start-weight-decay/--end-weight-decay need "
          "--weight-decay-incr-style linear or cosine (got constant)");
    }
    a->start_weight_decay = a->weight_decay;
    a->end_weight_decay = a->weight_decay;
  } else if (!a->start_weight_decay.has_value() || !a->end_weight_decay.has_value()) {
    return Invalid("--weight-decay-incr-style ", a->weight_decay_incr_style,
                   " needs --start-weight-decay and --end-weight-decay");
  }
  return absl::OkStatus();
}

absl::Status ValidateModel(MegatronArgs* a) {
  const int64_t tp = a->tensor_model_parallel_size;
  for (const auto& [name, value] :
       {std::pair<const char*, const std::optional<int64_t>*>{"--num-layers", &a->num_layers},
        {"--hidden-size", &a->hidden_size},
        {"--num-attention-heads", &a->num_attention_heads},
        {"--max-position-embeddings", &a->max_position_embeddings},
        {"--seq-length", &a->seq_length}}) {
    if (!value->has_value()) return Invalid(name, " is required");
    if (**value < 1) return Invalid(name, " must be >= 1, got ", **value);
  }
  const int64_t hidden = *a->hidden_size;
  const int64_t heads = *a->num_attention_heads;
  if (!a->ffn_hidden_size.has_value()) {
    // SwiGLU keeps the parameter count near 4h with two fc1 halves, rounded down to 64.
    a->ffn_hidden_size =
        a->swiglu ? static_cast<int64_t>((4.0 * hidden * 2 / 3) / 64) * 64 : 4 * hidden;
  }
  if (!a->kv_channels.has_value()) {
    if (hidden % heads != 0) {
      return Invalid("--hidden-size (", hidden, ") is not divisible by --num-attention-heads (",
                     heads, "); give --kv-channels to use another head size");
    }
    a->kv_channels = hidden / heads;
  }
  if (!a->group_query_attention) a->num_query_groups = heads;
  if (a->num_query_groups < 1 || heads % a->num_query_groups != 0) {
    return Invalid("--num-attention-heads (", heads, ") is not divisible by --num-query-groups (",
                   a->num_query_groups, ")");
  }
  if (heads % tp != 0 || a->num_query_groups % tp != 0) {
    return Invalid("--num-attention-heads (", heads, ") and query groups (", a->num_query_groups,
                   ") must be divisible by --tensor-model-parallel-size (", tp, ")");
  }
  if (*a->ffn_hidden_size % tp != 0) {
    return Invalid("ffn hidden size (", *a->ffn_hidden_size,
                   ") is not divisible by --tensor-model-parallel-size (", tp, ")");
  }
  if (a->context_parallel_size > 1 && *a->seq_length % (2 * a->context_parallel_size) != 0) {
    return Invalid("--seq-length (", *a->seq_length,
                   ") must be a multiple of 2 x --context-parallel-size (",
                   a->context_parallel_size, ")");
  }
  // Megatron asserts this for every position embedding type.
  if (*a->max_position_embeddings < *a->seq_length) {
    return Invalid("--max-position-embeddings (", *a->max_position_embeddings,
                   ") must be >= --seq-length (", *a->seq_length, ")");
  }
  // Sequence parallelism scatters the sequence over the tensor-parallel ranks
  // (mappings.py asserts the divisibility at run time; checked here up front).
  if (a->sequence_parallel && tp > 1 && *a->seq_length % tp != 0) {
    return Invalid("--seq-length (", *a->seq_length,
                   ") must be divisible by "
                   "--tensor-model-parallel-size (",
                   tp, ") with --sequence-parallel");
  }
  for (const auto& [name, p] :
       {std::pair<const char*, double>{"--hidden-dropout", a->hidden_dropout},
        {"--attention-dropout", a->attention_dropout}}) {
    if (!(p >= 0 && p <= 1)) return Invalid(name, " must be in [0, 1], got ", p);
  }
  if (!(a->rotary_percent > 0 && a->rotary_percent <= 1)) {
    return Invalid("--rotary-percent must be in (0, 1], got ", a->rotary_percent);
  }
  if (a->use_rotary_position_embeddings) a->position_embedding_type = "rope";
  if (!a->add_position_embedding && a->position_embedding_type != "rope") {
    return Invalid("--no-position-embedding is deprecated, use --position-embedding-type");
  }
  if (a->position_embedding_type == "mrope" || a->position_embedding_type == "relative") {
    return Invalid("--position-embedding-type ", a->position_embedding_type,
                   " is not supported by MXMACA yet (learned_absolute, rope, none)");
  }
  if (a->add_bias_linear) a->add_qkv_bias = true;
  if (a->apply_query_key_layer_scaling) a->attention_softmax_in_fp32 = true;
  if (tp == 1) a->sequence_parallel = false;
  // Activation recomputation (validate_args and TransformerConfig).
  if (a->recompute_activations) a->recompute_granularity = "selective";
  if (a->recompute_granularity == "selective" && a->recompute_method.has_value()) {
    return Invalid("--recompute-method ", *a->recompute_method,
                   " is not supported with --recompute-granularity selective");
  }
  if (a->recompute_granularity == "full") {
    if (!a->recompute_method.has_value()) {
      return Invalid("--recompute-granularity full needs --recompute-method uniform or block");
    }
    if (!a->recompute_num_layers.has_value() || *a->recompute_num_layers < 1) {
      return Invalid(
          "--recompute-granularity full needs --recompute-num-layers between 1 and "
          "the layers per pipeline rank (",
          *a->num_layers / a->pipeline_model_parallel_size, ")");
    }
  } else if (a->recompute_granularity == "selective" && a->recompute_num_layers.has_value()) {
    return Invalid(
        "--recompute-num-layers must not be given with --recompute-granularity "
        "selective");
  }
  // Without --recompute-granularity, --recompute-method/--recompute-num-layers are
  // ignored, as TransformerConfig ignores them.
  // MoE.
  if (a->num_experts == 0) a->num_experts.reset();
  if (a->num_experts.has_value() && !a->moe_ffn_hidden_size.has_value()) {
    a->moe_ffn_hidden_size = a->ffn_hidden_size;
  }
  if (a->expert_model_parallel_size > 1 &&
      (!a->num_experts.has_value() || *a->num_experts % a->expert_model_parallel_size != 0)) {
    return Invalid("--num-experts (",
                   a->num_experts.has_value() ? absl::StrCat(*a->num_experts) : "None",
                   ") must be a multiple of --expert-model-parallel-size (",
                   a->expert_model_parallel_size, ")");
  }
  if (a->num_experts.has_value() &&
      (a->moe_router_topk < 1 || a->moe_router_topk > *a->num_experts)) {
    return Invalid("--moe-router-topk (", a->moe_router_topk, ") must be in [1, --num-experts (",
                   *a->num_experts, ")]");
  }
  return absl::OkStatus();
}

absl::Status ValidateDataAndTokenizer(MegatronArgs* a) {
  // pretrain_gpt.py passes args_defaults={'tokenizer_type': 'GPT2BPETokenizer'}.
  if (!a->tokenizer_type.has_value()) a->tokenizer_type = "GPT2BPETokenizer";
  if (!a->data_path.empty() && !a->split.has_value()) a->split = "969, 30, 1";
  if (a->split.has_value()) MXMACA_RETURN_IF_ERROR(CheckSplit(*a->split));
  const bool per_split =
      !a->train_data_path.empty() || !a->valid_data_path.empty() || !a->test_data_path.empty();
  if (int(a->mock_data) + int(!a->data_path.empty()) + int(per_split) > 1) {
    return Invalid(
        "give one data source: --mock-data, --data-path, or "
        "--train-data-path/--valid-data-path/--test-data-path");
  }
  if (a->dataloader_type.value_or("single") != "single") {
    return Invalid("--dataloader-type ", *a->dataloader_type,
                   " is not supported by MXMACA yet (single)");
  }
  a->dataloader_type = "single";
  if (*a->tokenizer_type == "GPT2BPETokenizer") {
    if (!a->vocab_file.has_value() || !a->merge_file.has_value()) {
      return Invalid("--tokenizer-type GPT2BPETokenizer needs --vocab-file and --merge-file");
    }
  } else if (*a->tokenizer_type == "NullTokenizer") {
    if (!a->vocab_size.has_value() || *a->vocab_size < 1) {
      return Invalid("--tokenizer-type NullTokenizer needs --vocab-size >= 1");
    }
    // _NullTokenizer adds an EOD token after the vocab_size ids.
    if (!a->padded_vocab_size.has_value()) {
      a->padded_vocab_size = PaddedVocabSize(*a->vocab_size + 1, a->make_vocab_size_divisible_by,
                                             a->tensor_model_parallel_size);
    }
  } else if (*a->tokenizer_type == "HuggingFaceTokenizer" ||
             *a->tokenizer_type == "SentencePieceTokenizer" ||
             *a->tokenizer_type == "GPTSentencePieceTokenizer" ||
             *a->tokenizer_type == "Llama2Tokenizer" || *a->tokenizer_type == "TikTokenizer") {
    // build_tokenizer's asserts; the files are read (and checked) by the train command.
    if (!a->tokenizer_model.has_value()) {
      return Invalid("--tokenizer-type ", *a->tokenizer_type, " needs --tokenizer-model");
    }
    if (*a->tokenizer_type == "TikTokenizer" &&
        (!a->tiktoken_pattern.has_value() ||
         (*a->tiktoken_pattern != "v1" && *a->tiktoken_pattern != "v2"))) {
      return Invalid("--tokenizer-type TikTokenizer needs --tiktoken-pattern v1 or v2");
    }
    if (a->vocab_extra_ids < 0) {
      return Invalid("--vocab-extra-ids must be >= 0, got ", a->vocab_extra_ids);
    }
    // TikTokenizer's vocab_size is --vocab-size (default 2^17) and known here.
    if (*a->tokenizer_type == "TikTokenizer" && !a->padded_vocab_size.has_value() &&
        a->make_vocab_size_divisible_by >= 1) {
      a->padded_vocab_size = PaddedVocabSize(a->vocab_size.value_or(int64_t{1} << 17),
                                             a->make_vocab_size_divisible_by,
                                             a->tensor_model_parallel_size);
    }
  } else {
    return Invalid("--tokenizer-type ", *a->tokenizer_type,
                   " is not supported by MXMACA yet (GPT2BPETokenizer, HuggingFaceTokenizer, "
                   "SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer, "
                   "TikTokenizer, NullTokenizer)");
  }
  if (a->make_vocab_size_divisible_by < 1) {
    return Invalid("--make-vocab-size-divisible-by must be >= 1, got ",
                   a->make_vocab_size_divisible_by);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateAndDeriveArgs(MegatronArgs* a, int world_size) {
  a->padded_vocab_size_given = a->padded_vocab_size.has_value();
  MXMACA_RETURN_IF_ERROR(ValidateParallelism(a, world_size));
  // Batch size.
  if (!a->micro_batch_size.has_value() || *a->micro_batch_size < 1) {
    return Invalid("--micro-batch-size is required and must be >= 1");
  }
  if (!a->global_batch_size.has_value()) {
    a->global_batch_size = *a->micro_batch_size * a->data_parallel_size;
  }
  const int64_t per_step = *a->micro_batch_size * a->data_parallel_size;
  if (*a->global_batch_size < 1 || *a->global_batch_size % per_step != 0) {
    return Invalid("--global-batch-size (", *a->global_batch_size,
                   ") is not divisible by --micro-batch-size (", *a->micro_batch_size,
                   ") x data-parallel size (", a->data_parallel_size, ") = ", per_step);
  }
  // Evaluation batch sizes (arguments.py core_v0.19.0): default to the training ones, and
  // eval_global_batch_size divisible by eval_micro_batch_size x data-parallel size.
  if (a->eval_micro_batch_size.has_value() && *a->eval_micro_batch_size != *a->micro_batch_size) {
    return absl::UnimplementedError(absl::StrCat(
        "--eval-micro-batch-size ", *a->eval_micro_batch_size, " differs from --micro-batch-size ",
        *a->micro_batch_size,
        ": MXMACA evaluates with the training micro-batch size (--eval-global-batch-size may "
        "differ)"));
  }
  if (!a->eval_global_batch_size.has_value()) a->eval_global_batch_size = *a->global_batch_size;
  if (!a->eval_micro_batch_size.has_value()) a->eval_micro_batch_size = *a->micro_batch_size;
  if (*a->eval_global_batch_size < 1 || *a->eval_global_batch_size % per_step != 0) {
    return Invalid("--eval-global-batch-size (", *a->eval_global_batch_size,
                   ") must be divisible by --eval-micro-batch-size (", *a->eval_micro_batch_size,
                   ") x data-parallel size (", a->data_parallel_size, ") = ", per_step);
  }
  MXMACA_RETURN_IF_ERROR(ValidateModel(a));
  MXMACA_RETURN_IF_ERROR(ValidatePipeline(a));
  MXMACA_RETURN_IF_ERROR(ValidateIterationsAndLr(a));
  MXMACA_RETURN_IF_ERROR(ValidateDataAndTokenizer(a));
  if (a->save.has_value() && a->save_interval.value_or(0) <= 0) {
    return Invalid("--save needs --save-interval > 0");
  }
  // arguments.py (core_v0.19.0): with --save, save_retain_interval > 0 and a multiple of
  // save_interval.
  if (a->save.has_value() && a->save_retain_interval.has_value() &&
      (*a->save_retain_interval <= 0 || *a->save_retain_interval % *a->save_interval != 0)) {
    return Invalid("--save-retain-interval ", *a->save_retain_interval,
                   " must be > 0 and a multiple of --save-interval (", *a->save_interval, ")");
  }
  // training.py computes `iteration % log_interval`.
  if (a->log_interval < 1) return Invalid("--log-interval must be >= 1, got ", a->log_interval);
  if (a->fp16) return Invalid("--fp16 is not supported by MXMACA yet (use --bf16 or fp32)");
  if (a->rope_type.has_value() && *a->rope_type != "rope") {
    return absl::UnimplementedError(
        absl::StrCat("--rope-type ", *a->rope_type,
                     ": YaRN RoPE is not supported (rope is MXMACA's RoPE, "
                     "with --position-embedding-type rope)"));
  }
  if (a->exit_signal.has_value() && *a->exit_signal != "SIGTERM") {
    return absl::UnimplementedError(
        absl::StrCat("--exit-signal ", *a->exit_signal,
                     ": MXMACA's --exit-signal-handler catches SIGTERM only (Megatron's default)"));
  }
  // MXMACA's own flags.
  if (a->max_consecutive_nan_iterations < 1) {
    return Invalid("--max-consecutive-nan-iterations must be >= 1, got ",
                   a->max_consecutive_nan_iterations);
  }
  if (!a->num_threads.has_value()) {
    a->num_threads = std::max<int64_t>(1, std::thread::hardware_concurrency());
  } else if (*a->num_threads < 1) {
    return Invalid("--num-threads must be >= 1, got ", *a->num_threads);
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::api
