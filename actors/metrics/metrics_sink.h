// actors/metrics/metrics_sink.h: TrainingMetricsSink, where the coordinator sends the
// numbers behind its log lines (TensorBoard event files, the JSONL metrics file).
#ifndef MXMACA_ACTORS_METRICS_METRICS_SINK_H_
#define MXMACA_ACTORS_METRICS_METRICS_SINK_H_

#include "absl/status/status.h"
#include "actors/training_log.h"

namespace mxmaca::actors::metrics {

// TrainingMetricsSink: called by the coordinator (one thread at a time, in iteration
// order). An error ends the run with that error (CoordinatorConfig::metrics).
class TrainingMetricsSink {
 public:
  virtual ~TrainingMetricsSink() = default;
  // OnIteration: after every training step, with that iteration's values (loss and grad
  // norm of the step, the learning rate after the scheduler step, consumed samples after
  // the step), as Megatron's training_log receives them.
  virtual absl::Status OnIteration(const IterationLogRecord& iteration) = 0;
  // OnLogInterval: with every --log-interval line, with the line's values (averages over
  // the interval).
  virtual absl::Status OnLogInterval(const IterationLogRecord& interval) = 0;
  // OnValidation: after every evaluation on the validation split.
  virtual absl::Status OnValidation(const ValidationLogRecord& validation) = 0;
  // Close: at the end of the run (also after a failure); flushes and closes.
  virtual absl::Status Close() = 0;
};

}  // namespace mxmaca::actors::metrics

#endif  // MXMACA_ACTORS_METRICS_METRICS_SINK_H_
