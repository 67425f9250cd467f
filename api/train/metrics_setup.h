// api/train/metrics_setup.h: the metrics sinks of `mxmaca train` (--tensorboard-dir,
// --metrics-jsonl) from its flags.
#ifndef MXMACA_API_TRAIN_METRICS_SETUP_H_
#define MXMACA_API_TRAIN_METRICS_SETUP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/metrics/metrics_sink.h"
#include "api/args/megatron_args.h"

namespace mxmaca::api {

// MetricsSinksFromArgs: the sinks this process writes, for the coordinator
// (CoordinatorConfig::metrics):
//   - --tensorboard-dir: a TensorBoardLogger (actors/metrics/tensorboard_logger.h) with
//     Megatron's --tensorboard-log-interval, --tensorboard-queue-size and --log-*-to-
//     tensorboard switches, on the last rank only (rank == world_size - 1), as Megatron's
//     _set_tensorboard_writer; prints Megatron's "> setting tensorboard ..." there; writes
//     the args as text summaries (write_args_to_tensorboard: every MegatronArgs field MXMACA
//     binds, as Python's str(value), at step `start_iteration`);
//   - --metrics-jsonl: a MetricsJsonlWriter on rank 0 (the rank that prints the log),
//     appending when start_iteration > 0 (the run continues a checkpoint), else truncating.
// `rank` is this process's rank (0 when every rank runs in this process, which then is
// also the last). Errors: the writers' (a directory or file that cannot be created, an
// interval or queue size < 1), naming the flag.
absl::StatusOr<std::vector<std::shared_ptr<actors::metrics::TrainingMetricsSink>>>
MetricsSinksFromArgs(const MegatronArgs& args, int64_t world_size, int64_t rank, bool in_process,
                     int64_t start_iteration, const std::function<void(const std::string&)>& print);

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_METRICS_SETUP_H_
