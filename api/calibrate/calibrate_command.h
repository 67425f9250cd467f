// api/calibrate/calibrate_command.h: `mxmaca calibrate` — measures, on the CPU backend of
// this machine, the op times a training step is made of and writes a cost table
// (cost_table.h) for `mxmaca simulate --cost-table FILE` (docs/SIMULATOR.md, "Calibrated
// cost tables").
//
// What is measured (the fastest of --calibrate-repeats timed runs after one warm-up: other
// processes only ever slow a run down, so on a shared machine the fastest run estimates the
// unloaded time; the synthetic-runtime steps use the median):
//   layer      F, B (input gradient) and W (weight gradient) of one transformer layer:
//              a layers::GptStage of 2 layers, and one of all --num-layers layers (no
//              embedding, no loss head), timed by Forward / BackwardInput /
//              BackwardWeight on random hidden states and output gradients, / layers
//              (the deeper stage's working set is larger: slower per layer on a CPU); with TP t > 1, t such stages (the TP shards) on t
//              threads over an in-process hub, so the TP collectives are inside the
//              times, with and without sequence parallelism; with concurrency k > 1
//              (TP 1 only), k independent stages run at once on k threads (memory-
//              bandwidth and cache contention of k ranks sharing the machine), mean over
//              the k;
//   embedding  a stage with the embedding only (0 layers): lookup F, its (empty) B and the
//              gradient scatter-add W;
//   loss_head  a stage with the final norm, output layer and cross-entropy only;
//   optimizer  the step end of a rank per parameter: the gradient-norm pass, AdamW
//              (layers/optimizer.h) and zeroing the gradients, over 4 M fp32 parameters;
//   allreduce  the in-process hub's all-reduce of fp32 buffers between 2 ranks on 2
//              threads at 1 MiB and 16 MiB: latency + seconds per byte (a line through
//              the two points);
//   overheads  the actor runtime on synthetic zero-time stages
//              (actors/synthetic_stage_program.h): per-step overhead (p 1, m 1: op lists
//              out, reports back, optimizer of a tiny tensor, logging), per-op turnaround
//              ((step at m 64 - step at m 1) / (3 x 63)) and the pipeline hop (p 2,
//              m 64, 1F1B: the hop latency for which the shared-worker replay of that
//              schedule matches the measured step, found by bisection).
// Each op runs with --calibrate-threads-per-op OpenMP threads (default: the model flags'
// --num-threads, else 1 — mxmaca train runs every layer op with --num-threads threads), at
// the model's precision (--bf16).
#ifndef MXMACA_API_CALIBRATE_CALIBRATE_COMMAND_H_
#define MXMACA_API_CALIBRATE_CALIBRATE_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/calibrate/cost_table.h"

namespace mxmaca::api {

// CalibrateOptions: calibrate's own flags.
struct CalibrateOptions {
  std::string output;                    // --output FILE (required)
  std::vector<int> tp_sizes = {1};       // --calibrate-tp 1,2
  std::vector<int> concurrency = {1};    // --calibrate-concurrency 1,2 (TP 1 only)
  std::vector<int> micro_batch_sizes;    // --calibrate-micro-batch-sizes (default: --micro-batch-size)
  int repeats = 5;                       // --calibrate-repeats
  int threads_per_op = 0;                // --calibrate-threads-per-op; 0: --num-threads or 1
  bool skip_runtime = false;             // --calibrate-skip-runtime: no synthetic-actor runs
};

// Calibrate: measures the table for the model flags `model_argv` (Megatron's training
// flags; layout flags such as --tensor-model-parallel-size, --pipeline-model-parallel-size,
// --world-size are ignored: calibrate sets them per measurement). One line per measurement
// is appended to `log` (may be null); nothing is printed. Errors: InvalidArgument for bad flags (ParseMegatronArgs' and
// ValidateAndDeriveArgs' messages), a TP size that does not divide the heads / ffn /
// vocabulary; the layers' and runtime's errors.
absl::StatusOr<CostTable> Calibrate(const std::vector<std::string>& model_argv,
                                    const CalibrateOptions& options, std::string* log);

// RunCalibrate: `mxmaca calibrate ARGS`: parses calibrate's flags (above) out of `argv`,
// runs Calibrate, prints its lines to stdout and writes the table to --output.
absl::Status RunCalibrate(const std::vector<std::string>& argv);

}  // namespace mxmaca::api

#endif  // MXMACA_API_CALIBRATE_CALIBRATE_COMMAND_H_
