// actors/metrics/tensorboard_logger.h: Megatron's TensorBoard scalars (--tensorboard-dir).
//
// Source: megatron/training/training.py at core_v0.19.0, training_log (the scalars of every
// --tensorboard-log-interval iteration and of every --log-interval line) and
// evaluate_and_print_results (validation); the writer exists on the last rank only
// (megatron/training/global_vars.py _set_tensorboard_writer). Tags and steps:
//   every iteration i with i % tensorboard_log_interval == 0, s = consumed train samples:
//     'learning-rate' (unless --no-log-learnig-rate-to-tensorboard, a pre-2024 Megatron
//     switch), 'learning-rate vs samples' (step s), 'batch-size', 'batch-size vs samples',
//     'lm loss', 'lm loss vs samples', 'loss-scale' and 'loss-scale vs samples' (unless
//     --no-log-loss-scale-to-tensorboard), 'world-size' and 'world-size vs samples'
//     (--log-world-size-to-tensorboard), 'grad-norm', 'grad-norm vs samples', 'num-zeros'
//     and 'num-zeros vs samples' (--log-num-zeros-in-grad), 'params-norm' and
//     'params-norm vs samples' (--log-params-norm);
//   every --log-interval line: 'iteration-time' (seconds per iteration over the interval;
//     --log-timers-to-tensorboard, not on the run's first iteration, as Megatron),
//     'throughput' (TFLOP/s per GPU; --log-throughput and --log-timers-to-tensorboard),
//     'mem-peak-activation-bytes' (--log-memory-to-tensorboard: MXMACA's largest stash of
//     any stage over the interval; Megatron's torch.cuda allocator counters have no
//     counterpart here), MoE runs: 'load_balancing_loss' and 'z_loss' (the line's values);
//     then the file is flushed;
//   every evaluation: 'lm loss validation', 'lm loss validation vs samples', and with
//     --log-validation-ppl-to-tensorboard 'lm loss validation ppl' (+ ' vs samples');
//     flushed.
#ifndef MXMACA_ACTORS_METRICS_TENSORBOARD_LOGGER_H_
#define MXMACA_ACTORS_METRICS_TENSORBOARD_LOGGER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/metrics/metrics_sink.h"
#include "actors/metrics/tensorboard_events.h"

namespace mxmaca::actors::metrics {

// TensorBoardOptions: Megatron's logging flags that shape the event file.
struct TensorBoardOptions {
  std::string dir;                  // --tensorboard-dir
  int64_t log_interval = 1;         // --tensorboard-log-interval (>= 1)
  int64_t queue_size = 1000;        // --tensorboard-queue-size (>= 1)
  bool log_learning_rate = true;    // --no-log-learnig-rate-to-tensorboard clears it
  bool log_loss_scale = true;       // --no-log-loss-scale-to-tensorboard clears it
  bool log_world_size = false;      // --log-world-size-to-tensorboard
  bool log_timers = false;          // --log-timers-to-tensorboard
  bool log_throughput = false;      // --log-throughput
  bool log_memory = false;          // --log-memory-to-tensorboard
  bool log_validation_ppl = false;  // --log-validation-ppl-to-tensorboard
  int64_t world_size = 1;           // Megatron's args.world_size
};

// TensorBoardLogger: the sink that writes the scalars above into one event file.
class TensorBoardLogger : public TrainingMetricsSink {
 public:
  // Create: opens a new event file in options.dir (EventFileWriter::Create). Errors: an
  // interval or queue size < 1 (InvalidArgument naming the flag), or the file's errors.
  static absl::StatusOr<std::unique_ptr<TensorBoardLogger>> Create(
      const TensorBoardOptions& options);

  absl::Status OnIteration(const IterationLogRecord& iteration) override;
  absl::Status OnLogInterval(const IterationLogRecord& interval) override;
  absl::Status OnValidation(const ValidationLogRecord& validation) override;
  absl::Status Close() override;
  // WriteArgs: Megatron's write_args_to_tensorboard (megatron/training/initialize.py): one
  // text summary per (name, str(value)) at step `iteration` (the iteration the run starts
  // from), then a flush.
  absl::Status WriteArgs(const std::vector<std::pair<std::string, std::string>>& args,
                         int64_t iteration);
  // path: the event file's path.
  const std::string& path() const { return writer_->path(); }

 private:
  TensorBoardLogger(const TensorBoardOptions& options, std::unique_ptr<EventFileWriter> writer);
  // Scalar: `tag` at `step` and, when `samples` >= 0, "<tag> vs samples" at `samples`.
  absl::Status Scalar(const std::string& tag, double value, int64_t step, int64_t samples = -1);
  TensorBoardOptions options_;
  std::unique_ptr<EventFileWriter> writer_;
  int64_t first_iteration_ = -1;  // the run's first iteration (Megatron's is_first_iteration)
};

}  // namespace mxmaca::actors::metrics

#endif  // MXMACA_ACTORS_METRICS_TENSORBOARD_LOGGER_H_
