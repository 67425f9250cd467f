// api/simulate/simulate_command.h: `mxmaca simulate` — training's flags plus a cluster;
// prints the simulated step (time, tokens/s, TFLOP/s per GPU, MFU, bubble share, exposed
// communication, peak memory per rank) and can write the simulated timeline as a
// Perfetto trace (actors/trace.h format, one track per pipeline stage).
// docs/SIMULATOR.md describes the model and the cluster file format.
#ifndef MXMACA_API_SIMULATE_SIMULATE_COMMAND_H_
#define MXMACA_API_SIMULATE_SIMULATE_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/args/megatron_args.h"
#include "api/calibrate/cost_table.h"
#include "api/simulate/step_model.h"
#include "scheduler/cluster.h"

namespace mxmaca::api {

// SimulateJob: the parsed command.
struct SimulateJob {
  MegatronArgs args;  // validated for args.world_size ranks
  StepModelInputs inputs;
  std::string cluster_source;     // --cluster as given (the cost table's path without it)
  std::string cost_table_source;  // --cost-table as given; empty without
};

// CpuClusterFromCostTable: the cluster `simulate --cost-table` reports against when no
// --cluster is given: one "GPU" per core of the measuring machine with the table's GEMM
// rate as its peak (for MFU); its bandwidths are placeholders, unused for times.
scheduler::ClusterSpec CpuClusterFromCostTable(const CostTable& table, const std::string& source);

// PrepareSimulation: parses `argv` (simulate's flags: Megatron training flags, plus
// --cluster NAME|FILE and MXMACA's --world-size N (required) and --trace-file PATH, and
// --cost-table FILE (`mxmaca calibrate`'s table: op times measured on the CPU backend
// instead of the roofline, with --num-threads as the CPU run's; --cluster is then
// optional). One of --cluster and --cost-table is required. Flags a simulation does not need get harmless defaults when absent:
// --train-iters 1, --lr 1e-4, and, without --tokenizer-type / --vocab-file, GPT-2's
// 50,257-token vocabulary (NullTokenizer --vocab-size 50256, which adds EOD); with
// GPT2BPETokenizer the vocabulary files are not read (50,257 tokens assumed). MoE models
// (--num-experts) take Megatron's MoE flags, including --expert-model-parallel-size,
// --expert-tensor-parallel-size and --moe-token-dispatcher-type (allgather, Megatron's
// default; alltoall; flex, DeepEP; hierarchical, MXMACA's), plus the simulator's own
// --moe-load-imbalance F (max / mean tokens per expert, >= 1, default 1; `mxmaca train`
// logs it per MoE layer as "max/mean load"). Errors: InvalidArgument for a missing
// --cluster / --world-size, a bad --moe-load-imbalance (or one without --num-experts) or
// dispatcher, and ParseMegatronArgs / ValidateAndDeriveArgs / GptConfigFromArgs /
// placement / schedule errors; LoadCluster's errors; SimulateStep checks the MoE layout.
absl::StatusOr<SimulateJob> PrepareSimulation(const std::vector<std::string>& argv);

// FormatReport: the human-readable report of a simulated step.
std::string FormatReport(const SimulateJob& job, const StepResult& result);

// WriteSimulatedTrace: the timeline of `result` as a Chrome/Perfetto trace at `path`:
// track s = "pipeline stage s" with F/B/W spans ("F3", "B3.c1"), then "dp grad sync",
// "optimizer" and "param all-gather" spans; times in simulated microseconds. Errors:
// ChromeTraceWriter's (the path named).
absl::Status WriteSimulatedTrace(const SimulateJob& job, const StepResult& result,
                                 const std::string& path);

// RunSimulate: `mxmaca simulate ARGS`: PrepareSimulation, SimulateStep, prints the
// report to stdout, writes --trace-file if given.
absl::Status RunSimulate(const std::vector<std::string>& argv);

}  // namespace mxmaca::api

#endif  // MXMACA_API_SIMULATE_SIMULATE_COMMAND_H_
