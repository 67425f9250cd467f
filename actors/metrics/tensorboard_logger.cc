// actors/metrics/tensorboard_logger.cc: see tensorboard_logger.h.
#include "actors/metrics/tensorboard_logger.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mxmaca::actors::metrics {

absl::StatusOr<std::unique_ptr<TensorBoardLogger>> TensorBoardLogger::Create(
    const TensorBoardOptions& options) {
  if (options.log_interval < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tensorboard-log-interval ", options.log_interval, ": expected >= 1"));
  }
  MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<EventFileWriter> writer,
                          EventFileWriter::Create(options.dir, options.queue_size));
  return std::unique_ptr<TensorBoardLogger>(new TensorBoardLogger(options, std::move(writer)));
}

TensorBoardLogger::TensorBoardLogger(const TensorBoardOptions& options,
                                     std::unique_ptr<EventFileWriter> writer)
    : options_(options), writer_(std::move(writer)) {}

absl::Status TensorBoardLogger::Scalar(const std::string& tag, double value, int64_t step,
                                       int64_t samples) {
  MXMACA_RETURN_IF_ERROR(writer_->AddScalar(tag, value, step));
  if (samples >= 0) MXMACA_RETURN_IF_ERROR(writer_->AddScalar(tag + " vs samples", value, samples));
  return absl::OkStatus();
}

absl::Status TensorBoardLogger::OnIteration(const IterationLogRecord& r) {
  if (first_iteration_ < 0) first_iteration_ = r.iteration;
  if (r.iteration % options_.log_interval != 0) return absl::OkStatus();
  const int64_t it = r.iteration, samples = r.consumed_samples;
  if (options_.log_learning_rate) {
    MXMACA_RETURN_IF_ERROR(Scalar("learning-rate", r.learning_rate, it, samples));
  }
  MXMACA_RETURN_IF_ERROR(
      Scalar("batch-size", static_cast<double>(r.global_batch_size), it, samples));
  MXMACA_RETURN_IF_ERROR(Scalar("lm loss", r.lm_loss, it, samples));
  if (options_.log_loss_scale)
    MXMACA_RETURN_IF_ERROR(Scalar("loss-scale", r.loss_scale, it, samples));
  if (options_.log_world_size) {
    MXMACA_RETURN_IF_ERROR(
        Scalar("world-size", static_cast<double>(options_.world_size), it, samples));
  }
  MXMACA_RETURN_IF_ERROR(Scalar("grad-norm", r.grad_norm, it, samples));
  if (r.num_zeros_in_grad) {
    MXMACA_RETURN_IF_ERROR(
        Scalar("num-zeros", static_cast<double>(*r.num_zeros_in_grad), it, samples));
  }
  if (r.params_norm) MXMACA_RETURN_IF_ERROR(Scalar("params-norm", *r.params_norm, it, samples));
  return absl::OkStatus();
}

absl::Status TensorBoardLogger::OnLogInterval(const IterationLogRecord& r) {
  const int64_t it = r.iteration;
  if (options_.log_timers && it != first_iteration_) {
    MXMACA_RETURN_IF_ERROR(Scalar("iteration-time", r.elapsed_ms_per_iteration / 1e3, it));
  }
  if (options_.log_throughput && options_.log_timers) {
    MXMACA_RETURN_IF_ERROR(Scalar("throughput", r.tflops_per_device, it));
  }
  if (options_.log_memory) {
    MXMACA_RETURN_IF_ERROR(
        Scalar("mem-peak-activation-bytes", r.peak_activation_mb * 1024.0 * 1024.0, it));
  }
  for (const auto& [name, value] : r.moe_losses) MXMACA_RETURN_IF_ERROR(Scalar(name, value, it));
  return writer_->Flush();
}

absl::Status TensorBoardLogger::OnValidation(const ValidationLogRecord& v) {
  MXMACA_RETURN_IF_ERROR(
      Scalar("lm loss validation", v.lm_loss, v.iteration, v.consumed_train_samples));
  if (options_.log_validation_ppl) {
    const double ppl = std::exp(std::min(20.0, v.lm_loss));  // Megatron caps the exponent at 20
    MXMACA_RETURN_IF_ERROR(
        Scalar("lm loss validation ppl", ppl, v.iteration, v.consumed_train_samples));
  }
  return writer_->Flush();
}

absl::Status TensorBoardLogger::WriteArgs(
    const std::vector<std::pair<std::string, std::string>>& args, int64_t iteration) {
  for (const auto& [name, value] : args)
    MXMACA_RETURN_IF_ERROR(writer_->AddText(name, value, iteration));
  return writer_->Flush();
}

absl::Status TensorBoardLogger::Close() { return writer_->Close(); }

}  // namespace mxmaca::actors::metrics
