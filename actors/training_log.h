// actors/training_log.h: Megatron-style log lines (formatting only).
//
// Source: megatron/training/training.py training_log and evaluate_and_print_results
// (core_v0.15.0; MEGATRON_FORMATS.md "Log lines"). Megatron's segments come first, in
// Megatron's order and format, so tools that parse Megatron logs read ours; MXMACA's own
// segments (tokens/s, model GFLOP/s, MFU against the measured GEMM peak, activation
// memory, per-stage bubble) follow after them, in the same "name: value |" shape.
#ifndef MXMACA_ACTORS_TRAINING_LOG_H_
#define MXMACA_ACTORS_TRAINING_LOG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace mxmaca::actors {

// IterationLogRecord: averages over the log interval, as Megatron reports them.
struct IterationLogRecord {
  absl::Time now;
  int64_t iteration = 0;
  int64_t train_iters = 0;
  int64_t consumed_samples = 0;
  double elapsed_ms_per_iteration = 0.0;    // wall time per iteration over the interval
  double tflops_per_device = 0.0;           // model TFLOP/s per device (Megatron's formula)
  double learning_rate = 0.0;               // after the scheduler step, as Megatron logs it
  int64_t global_batch_size = 0;
  double lm_loss = 0.0;                     // token-weighted mean over the interval
  // MoE models: Megatron's extra losses after lm loss ("load_balancing_loss", "z_loss"),
  // each the mean over MoE layers and micro-batches of the interval.
  std::vector<std::pair<std::string, double>> moe_losses;
  double loss_scale = 1.0;                  // 1.0 without fp16 loss scaling
  double grad_norm = 0.0;                   // of the last iteration in the interval
  // --log-num-zeros-in-grad: the zero gradient elements of the last step (not of a skipped
  // one), printed as Megatron's " num zeros: {} |" after grad norm when set.
  std::optional<int64_t> num_zeros_in_grad;
  // --log-params-norm: the parameters' L2 norm after the last step of the interval;
  // printed as Megatron's " params norm: {:.3f} |" after grad norm when set.
  std::optional<double> params_norm;
  int64_t skipped_iterations = 0;           // in the interval
  int64_t nan_iterations = 0;               // in the interval
  // MXMACA's own segments.
  double tokens_per_second = 0.0;
  double model_gflops_per_second = 0.0;     // per device
  double gemm_peak_gflops = 0.0;            // measured at start-up; 0 = not measured
  double peak_activation_mb = 0.0;          // largest stash held by any stage
  std::vector<double> stage_bubble_fraction;  // per pipeline stage, in [0, 1]
  // Not printed (for --metrics-jsonl): per pipeline stage, the busy milliseconds per
  // iteration over the interval (the stage's F/B/W and optimizer work).
  std::vector<double> stage_busy_ms;
};

// ValidationLogRecord: one finished evaluation (what FormatValidationLog prints).
struct ValidationLogRecord {
  absl::Time now;
  int64_t iteration = 0;               // training iterations done when it ran
  int64_t consumed_train_samples = 0;  // Megatron's args.consumed_train_samples then
  std::string where;                   // e.g. "iteration 100"
  double lm_loss = 0.0;                // token-weighted mean over the eval iterations
};

// FormatIterationLog: one line, starting with a space and ending with " |" like Megatron's.
std::string FormatIterationLog(const IterationLogRecord& r);

// FormatValidationLog: the three-line block Megatron prints after evaluation:
// dashes, " validation loss at {where} | lm loss value: {:.6E} | lm loss PPL: {:.6E} | ",
// dashes (dash count = line length + 1). `where` is e.g. "iteration 100".
std::string FormatValidationLog(const std::string& where, double lm_loss);

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_TRAINING_LOG_H_
