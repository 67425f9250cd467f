// api/train/metrics_setup.cc: see metrics_setup.h.
#include "api/train/metrics_setup.h"

#include "absl/strings/str_cat.h"
#include "actors/metrics/metrics_jsonl.h"
#include "actors/metrics/tensorboard_logger.h"
#include "base/status_macros.h"

namespace mxmaca::api {

absl::StatusOr<std::vector<std::shared_ptr<actors::metrics::TrainingMetricsSink>>>
MetricsSinksFromArgs(const MegatronArgs& args, int64_t world_size, int64_t rank, bool in_process,
                     bool resuming, const std::function<void(const std::string&)>& print) {
  std::vector<std::shared_ptr<actors::metrics::TrainingMetricsSink>> sinks;
  const bool last_rank = in_process || rank == world_size - 1;
  if (args.tensorboard_dir && !args.tensorboard_dir->empty() && last_rank) {
    actors::metrics::TensorBoardOptions o;
    o.dir = *args.tensorboard_dir;
    o.log_interval = args.tensorboard_log_interval;
    o.queue_size = args.tensorboard_queue_size;
    o.log_learning_rate = args.log_learning_rate_to_tensorboard;
    o.log_loss_scale = args.log_loss_scale_to_tensorboard;
    o.log_world_size = args.log_world_size_to_tensorboard;
    o.log_timers = args.log_timers_to_tensorboard;
    o.log_throughput = args.log_throughput;
    o.log_memory = args.log_memory_to_tensorboard;
    o.log_validation_ppl = args.log_validation_ppl_to_tensorboard;
    o.world_size = world_size;
    print("> setting tensorboard ...");
    MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<actors::metrics::TensorBoardLogger> tb,
                            actors::metrics::TensorBoardLogger::Create(o));
    print(absl::StrCat(" > TensorBoard event file: ", tb->path()));
    sinks.push_back(std::move(tb));
  }
  if (args.metrics_jsonl && (in_process || rank == 0)) {
    if (args.metrics_jsonl->empty()) {
      return absl::InvalidArgumentError("--metrics-jsonl: expected a file path, got ''");
    }
    MXMACA_ASSIGN_OR_RETURN(
        std::unique_ptr<actors::metrics::MetricsJsonlWriter> jsonl,
        actors::metrics::MetricsJsonlWriter::Create(*args.metrics_jsonl, resuming));
    sinks.push_back(std::move(jsonl));
  }
  return sinks;
}

}  // namespace mxmaca::api
