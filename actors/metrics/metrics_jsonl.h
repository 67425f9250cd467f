// actors/metrics/metrics_jsonl.h: --metrics-jsonl, one JSON object per line.
//
// MXMACA's own file for plotting (`mxmaca plot --metrics FILE`) and for tools: one object
// per --log-interval line and one per evaluation, flushed as written, so a crashed run keeps
// every line it printed. Keys (a value the run does not have is left out; NaN / Inf are
// written as null):
//   {"type": "train", "iteration", "train_iters", "consumed_samples", "time" (Unix seconds),
//    "elapsed_ms_per_iteration", "learning_rate", "global_batch_size", "lm_loss",
//    "<MoE loss name>" (load_balancing_loss, z_loss), "loss_scale", "grad_norm",
//    "num_zeros_in_grad" (--log-num-zeros-in-grad), "params_norm" (--log-params-norm),
//    "skipped_iterations", "nan_iterations", "tokens_per_second", "tflops_per_device",
//    "model_gflops_per_second", "mfu" (fraction of the measured GEMM peak),
//    "peak_activation_mb", "stage_bubble_fraction" [per stage, 0..1], "bubble_percent"
//    (mean over stages, 0..100), "stage_busy_ms" [per stage, per iteration]}
//   {"type": "validation", "iteration", "consumed_samples", "time", "where", "lm_loss",
//    "lm_loss_ppl"}
// The numbers are the ones the log line prints (IterationLogRecord), unrounded.
#ifndef MXMACA_ACTORS_METRICS_METRICS_JSONL_H_
#define MXMACA_ACTORS_METRICS_METRICS_JSONL_H_

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "actors/metrics/metrics_sink.h"

namespace mxmaca::actors::metrics {

// TrainJson / ValidationJson: the objects above.
nlohmann::json TrainJson(const IterationLogRecord& interval);
nlohmann::json ValidationJson(const ValidationLogRecord& validation);

// MetricsJsonlWriter: the sink that writes the file.
class MetricsJsonlWriter : public TrainingMetricsSink {
 public:
  // Create: opens `path` (its directory is created if needed), truncating it, or appending
  // when `append` (a run resumed from a checkpoint continues its file). Errors: the file
  // cannot be opened (InvalidArgument naming the path).
  static absl::StatusOr<std::unique_ptr<MetricsJsonlWriter>> Create(const std::string& path,
                                                                    bool append);
  ~MetricsJsonlWriter() override;

  absl::Status OnIteration(const IterationLogRecord&) override { return absl::OkStatus(); }
  absl::Status OnLogInterval(const IterationLogRecord& interval) override;
  absl::Status OnValidation(const ValidationLogRecord& validation) override;
  absl::Status Close() override;

 private:
  MetricsJsonlWriter(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}
  absl::Status WriteLine(const nlohmann::json& object);
  std::string path_;
  std::FILE* file_;
};

}  // namespace mxmaca::actors::metrics

#endif  // MXMACA_ACTORS_METRICS_METRICS_JSONL_H_
