// api/simulate/calibrated_step.h: the step model with a measured cost table
// (`mxmaca simulate --cost-table FILE`): op times from the table, the ranks' strands on
// shared workers (shared_worker_replay.h), the in-process gradient all-reduce, the
// optimizer and the per-step overhead measured by `mxmaca calibrate`.
// docs/SIMULATOR.md, "Calibrated cost tables", lists the model and what it leaves out.
#ifndef MXMACA_API_SIMULATE_CALIBRATED_STEP_H_
#define MXMACA_API_SIMULATE_CALIBRATED_STEP_H_

#include "absl/status/statusor.h"
#include "api/calibrate/cost_table.h"
#include "api/simulate/step_model.h"

namespace mxmaca::api {

// OpShapeOf: the cost-table shape of `in`'s model at its micro-batch and TP size.
OpShape OpShapeOf(const StepModelInputs& in);

// CalibratedWorkers: how many ops run at once on the CPU backend for `in` on a machine
// with `cores` cores: pool threads = min(world, num_threads), or world with TP > 1
// (train_command.cc); a TP group of t ranks runs one op on t threads at once, so
// workers = max(1, min(pool threads, cores) / t).
int CalibratedWorkers(const StepModelInputs& in, int cores);

// SimulateCalibratedStep: SimulateStep with in.cost_table set (required: InvalidArgument
// otherwise). Memory and FLOPs as the roofline model; times as described in the file
// comment. Errors: CostTable::OpSeconds' NotFound (no entry for this TP size), the
// replay's errors, SimulateStep's.
absl::StatusOr<StepResult> SimulateCalibratedStep(const StepModelInputs& in);

}  // namespace mxmaca::api

#endif  // MXMACA_API_SIMULATE_CALIBRATED_STEP_H_
