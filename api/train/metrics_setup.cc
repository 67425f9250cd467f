// api/train/metrics_setup.cc: see metrics_setup.h.
#include "api/train/metrics_setup.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "actors/metrics/metrics_jsonl.h"
#include "actors/metrics/tensorboard_logger.h"
#include "base/status_macros.h"

namespace mxmaca::api {
namespace {

// PythonStr: str(value) from repr(value): the same except for a string, whose quotes and
// escapes repr adds (MegatronArgRepr quotes with ' or ").
std::string PythonStr(const std::string& repr) {
  if (repr.size() < 2 || (repr[0] != '\'' && repr[0] != '"') || repr.back() != repr[0]) return repr;
  std::string out;
  for (size_t i = 1; i + 1 < repr.size(); ++i) {
    if (repr[i] == '\\' && i + 2 < repr.size()) {
      const char c = repr[++i];
      out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
    } else {
      out += repr[i];
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::shared_ptr<actors::metrics::TrainingMetricsSink>>>
MetricsSinksFromArgs(const MegatronArgs& args, int64_t world_size, int64_t rank, bool in_process,
                     int64_t start_iteration,
                     const std::function<void(const std::string&)>& print) {
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
    std::vector<std::pair<std::string, std::string>> text;
    for (const std::string& dest : MegatronArgsBoundDests()) {
      text.emplace_back(dest, PythonStr(MegatronArgRepr(args, dest).value_or("None")));
    }
    std::sort(text.begin(), text.end());
    MXMACA_RETURN_IF_ERROR(tb->WriteArgs(text, start_iteration));
    sinks.push_back(std::move(tb));
  }
  if (args.metrics_jsonl && (in_process || rank == 0)) {
    if (args.metrics_jsonl->empty()) {
      return absl::InvalidArgumentError("--metrics-jsonl: expected a file path, got ''");
    }
    MXMACA_ASSIGN_OR_RETURN(
        std::unique_ptr<actors::metrics::MetricsJsonlWriter> jsonl,
        actors::metrics::MetricsJsonlWriter::Create(*args.metrics_jsonl, start_iteration > 0));
    sinks.push_back(std::move(jsonl));
  }
  return sinks;
}

}  // namespace mxmaca::api
