// actors/metrics/metrics_jsonl.cc: see metrics_jsonl.h.
#include "actors/metrics/metrics_jsonl.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace mxmaca::actors::metrics {
namespace {

double UnixSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

// Number: the value, or null when it is NaN or infinite (JSON has neither).
nlohmann::json Number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

}  // namespace

nlohmann::json TrainJson(const IterationLogRecord& r) {
  nlohmann::json j;
  j["type"] = "train";
  j["iteration"] = r.iteration;
  j["train_iters"] = r.train_iters;
  j["consumed_samples"] = r.consumed_samples;
  j["time"] = UnixSeconds(r.now);
  j["elapsed_ms_per_iteration"] = Number(r.elapsed_ms_per_iteration);
  j["learning_rate"] = Number(r.learning_rate);
  j["global_batch_size"] = r.global_batch_size;
  j["lm_loss"] = Number(r.lm_loss);
  for (const auto& [name, value] : r.moe_losses) j[name] = Number(value);
  j["loss_scale"] = Number(r.loss_scale);
  j["grad_norm"] = Number(r.grad_norm);
  if (r.num_zeros_in_grad) j["num_zeros_in_grad"] = *r.num_zeros_in_grad;
  if (r.params_norm) j["params_norm"] = Number(*r.params_norm);
  j["skipped_iterations"] = r.skipped_iterations;
  j["nan_iterations"] = r.nan_iterations;
  j["tokens_per_second"] = Number(r.tokens_per_second);
  j["tflops_per_device"] = Number(r.tflops_per_device);
  j["model_gflops_per_second"] = Number(r.model_gflops_per_second);
  if (r.gemm_peak_gflops > 0) j["mfu"] = Number(r.model_gflops_per_second / r.gemm_peak_gflops);
  j["peak_activation_mb"] = Number(r.peak_activation_mb);
  if (!r.stage_bubble_fraction.empty()) {
    nlohmann::json bubbles = nlohmann::json::array();
    double sum = 0.0;
    for (double b : r.stage_bubble_fraction) {
      bubbles.push_back(Number(b));
      sum += b;
    }
    j["stage_bubble_fraction"] = bubbles;
    j["bubble_percent"] = Number(100.0 * sum / static_cast<double>(r.stage_bubble_fraction.size()));
  }
  if (!r.stage_busy_ms.empty()) {
    nlohmann::json busy = nlohmann::json::array();
    for (double ms : r.stage_busy_ms) busy.push_back(Number(ms));
    j["stage_busy_ms"] = busy;
  }
  return j;
}

nlohmann::json ValidationJson(const ValidationLogRecord& v) {
  nlohmann::json j;
  j["type"] = "validation";
  j["iteration"] = v.iteration;
  j["consumed_samples"] = v.consumed_train_samples;
  j["time"] = UnixSeconds(v.now);
  j["where"] = v.where;
  j["lm_loss"] = Number(v.lm_loss);
  j["lm_loss_ppl"] = Number(std::exp(std::min(20.0, v.lm_loss)));  // as the log line
  return j;
}

absl::StatusOr<std::unique_ptr<MetricsJsonlWriter>> MetricsJsonlWriter::Create(
    const std::string& path, bool append) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
  }
  std::FILE* file = std::fopen(path.c_str(), append ? "ab" : "wb");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-jsonl ", path, ": cannot open the file: ", std::strerror(errno)));
  }
  return std::unique_ptr<MetricsJsonlWriter>(new MetricsJsonlWriter(path, file));
}

MetricsJsonlWriter::~MetricsJsonlWriter() { (void)Close(); }

absl::Status MetricsJsonlWriter::WriteLine(const nlohmann::json& object) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": the metrics file is closed"));
  }
  const std::string line = object.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    return absl::DataLossError(
        absl::StrCat("writing --metrics-jsonl ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status MetricsJsonlWriter::OnLogInterval(const IterationLogRecord& interval) {
  return WriteLine(TrainJson(interval));
}

absl::Status MetricsJsonlWriter::OnValidation(const ValidationLogRecord& validation) {
  return WriteLine(ValidationJson(validation));
}

absl::Status MetricsJsonlWriter::Close() {
  if (file_ == nullptr) return absl::OkStatus();
  const bool ok = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok) {
    return absl::DataLossError(
        absl::StrCat("closing --metrics-jsonl ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::actors::metrics
