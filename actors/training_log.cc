// actors/training_log.cc: see training_log.h.
#include "actors/training_log.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mxmaca::actors {

std::string FormatIterationLog(const IterationLogRecord& r) {
  std::string line = absl::StrCat(
      " [", absl::FormatTime("%Y-%m-%d %H:%M:%S", r.now, absl::LocalTimeZone()), "]");
  absl::StrAppendFormat(&line, " iteration %8d/%8d |", r.iteration, r.train_iters);
  absl::StrAppendFormat(&line, " consumed samples: %12d |", r.consumed_samples);
  absl::StrAppendFormat(&line, " elapsed time per iteration (ms): %.1f |",
                        r.elapsed_ms_per_iteration);
  absl::StrAppendFormat(&line, " throughput per GPU (TFLOP/s/GPU): %.1f |", r.tflops_per_device);
  absl::StrAppendFormat(&line, " learning rate: %.6E |", r.learning_rate);
  absl::StrAppendFormat(&line, " global batch size: %5d |", r.global_batch_size);
  absl::StrAppendFormat(&line, " lm loss: %.6E |", r.lm_loss);
  for (const auto& [name, value] : r.moe_losses) {
    absl::StrAppendFormat(&line, " %s: %.6E |", name, value);
  }
  absl::StrAppendFormat(&line, " loss scale: %.1f |", r.loss_scale);
  absl::StrAppendFormat(&line, " grad norm: %.3f |", r.grad_norm);
  if (r.num_zeros_in_grad) absl::StrAppendFormat(&line, " num zeros: %d |", *r.num_zeros_in_grad);
  if (r.params_norm) absl::StrAppendFormat(&line, " params norm: %.3f |", *r.params_norm);
  absl::StrAppendFormat(&line, " number of skipped iterations: %3d |", r.skipped_iterations);
  absl::StrAppendFormat(&line, " number of nan iterations: %3d |", r.nan_iterations);
  absl::StrAppendFormat(&line, " tokens/s: %.0f |", r.tokens_per_second);
  absl::StrAppendFormat(&line, " model GFLOP/s: %.1f |", r.model_gflops_per_second);
  if (r.gemm_peak_gflops > 0) {
    absl::StrAppendFormat(&line, " MFU (vs measured GEMM peak %.0f GFLOP/s): %.1f%% |",
                          r.gemm_peak_gflops,
                          100.0 * r.model_gflops_per_second / r.gemm_peak_gflops);
  }
  absl::StrAppendFormat(&line, " peak activation memory (MB): %.1f |", r.peak_activation_mb);
  if (!r.stage_bubble_fraction.empty()) {
    line += " bubble per stage:";
    for (double b : r.stage_bubble_fraction) absl::StrAppendFormat(&line, " %.1f%%", 100.0 * b);
    line += " |";
  }
  return line;
}

std::string FormatValidationLog(const std::string& where, double lm_loss) {
  const double ppl = std::exp(std::min(20.0, lm_loss));  // Megatron caps the exponent at 20
  const std::string line =
      absl::StrFormat(" validation loss at %s | lm loss value: %.6E | lm loss PPL: %.6E | ",
                      where, lm_loss, ppl);
  const std::string dashes(line.size() + 1, '-');
  return absl::StrCat(dashes, "\n", line, "\n", dashes);
}

}  // namespace mxmaca::actors
