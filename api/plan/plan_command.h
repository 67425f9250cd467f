// api/plan/plan_command.h: `mxmaca plan` — searches parallel layouts (TP, PP, virtual
// stages, DP, micro-batch size, recomputation, pipeline schedule) for a model, a global
// batch and a cluster with the step simulator, and prints the fastest that fit in memory
// with the flags that run them. Every layout is simulated through the same code path as
// `mxmaca simulate` (its argv built, then PrepareSimulation and SimulateStep), so the
// planner and the simulator cannot disagree. docs/SIMULATOR.md ("Planning layouts").
#ifndef MXMACA_API_PLAN_PLAN_COMMAND_H_
#define MXMACA_API_PLAN_PLAN_COMMAND_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/simulate/step_model.h"
#include "scheduler/cluster.h"

namespace mxmaca::api {

// PlanOptions: the parsed `mxmaca plan` command.
struct PlanOptions {
  // Model (and other non-layout) flags passed unchanged to every simulation, e.g.
  // "--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048".
  std::vector<std::string> model_argv;
  int64_t global_batch_size = 0;          // --global-batch-size (samples per step)
  std::string cluster;                    // --cluster PRESET|FILE, as given
  int64_t world_size = 0;                 // --world-size N (GPUs)
  std::optional<double> memory_limit_gib; // --memory-limit-gib G; None = the GPU's HBM
  int64_t top = 5;                        // --top K
  // --moe-load-imbalance F (MoE): passed to every simulation, never to the printed train
  // / Megatron command lines (it is the simulator's own flag).
  std::optional<std::string> moe_load_imbalance;
};

// Recompute: activation recomputation as Megatron's flags select it.
enum class Recompute { kNone, kSelective, kFull };

// RecomputeName: "none", "selective", "full".
const char* RecomputeName(Recompute r);

// Layout: one point of the search space. World = tp x pp x dp (CP 1); for MoE models the
// expert grid ep x etp (x EDP = tp dp / (ep etp)) tiles the same tp x dp ranks.
struct Layout {
  int64_t tp = 1;        // --tensor-model-parallel-size (with --sequence-parallel if > 1)
  int64_t pp = 1;        // --pipeline-model-parallel-size
  int64_t vpp = 1;       // model chunks per pipeline rank (v); > 1 = interleaved
  int64_t dp = 1;        // data-parallel size, world / (tp pp)
  int64_t mbs = 1;       // --micro-batch-size
  Recompute recompute = Recompute::kNone;
  std::string schedule;  // "1f1b", "interleaved-1f1b" or "zb-h1" (ParseScheduleKind names)
  // MoE only (ep = 0 for a dense model: no expert flags): --expert-model-parallel-size and
  // --expert-tensor-parallel-size.
  int64_t ep = 0;
  int64_t etp = 0;
};

// ModelShape: what the enumeration needs to know of the model and cluster.
struct ModelShape {
  int64_t num_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t gpus_per_node = 8;
  int64_t num_experts = 0;  // --num-experts; 0 = dense
};

// EnumerateLayouts: every layout of the search space for `world_size` GPUs and
// `global_batch_size` samples: tp in {1, 2, 4, 8} dividing the heads and <= GPUs per
// node; pp in 1..64 dividing num_layers; vpp in {1, 2, 4} with num_layers divisible by
// pp x vpp (vpp > 1 only with pp > 1); dp = world / (tp pp) integral; mbs in {1, 2, 4}
// with global_batch_size divisible by mbs x dp; recompute none / selective / full;
// schedule 1f1b and zb-h1 for vpp 1, interleaved-1f1b for vpp > 1; for MoE models
// (num_experts > 0) also ep over the divisors of num_experts that divide tp x dp, and etp
// in {1, tp} (one value when tp = 1). Order: tp, pp, vpp, ep, etp, mbs, recompute,
// schedule ascending (deterministic).
std::vector<Layout> EnumerateLayouts(const ModelShape& shape, int64_t world_size,
                                     int64_t global_batch_size);

// LayoutFlags: the layout as training flags (Megatron's names, plus MXMACA's
// --pipeline-schedule for zb-h1), e.g. "--tensor-model-parallel-size 8
// --sequence-parallel --pipeline-model-parallel-size 8 --num-layers-per-virtual-pipeline-stage
// 6 --micro-batch-size 1 --recompute-activations --use-distributed-optimizer
// --overlap-grad-reduce --overlap-param-gather"; for MoE layouts also
// "--expert-model-parallel-size 8 --expert-tensor-parallel-size 1".
// `num_layers` sizes the virtual stages.
std::vector<std::string> LayoutFlags(const Layout& layout, int64_t num_layers);

// SimulateArgv: the full `mxmaca simulate` argv of `layout`: the model flags (for a MoE
// layout with ep > 1 and no --moe-token-dispatcher-type among them, "alltoall" as
// Megatron-Core recommends with EP, see ModelFlags), the layout flags,
// --global-batch-size, --bf16 (unless given), --cluster, --world-size and
// --moe-load-imbalance when given.
std::vector<std::string> SimulateArgv(const PlanOptions& options, const Layout& layout,
                                      int64_t num_layers);

// ModelFlags: options.model_argv plus --bf16 (unless given) and, for a MoE layout with
// ep > 1 when the user chose no dispatcher, "--moe-token-dispatcher-type alltoall".
std::vector<std::string> ModelFlags(const PlanOptions& options, const Layout& layout);

// PlanEntry: a simulated layout that fits.
struct PlanEntry {
  Layout layout;
  StepResult result;
  std::vector<std::string> argv;  // the simulate argv it ran with
};

// PlanResult: the search's outcome.
struct PlanResult {
  scheduler::ClusterSpec cluster;
  int64_t num_layers = 0;      // --num-layers of the model
  double memory_limit_bytes = 0;
  int64_t enumerated = 0;      // layouts in the search space
  int64_t rejected = 0;        // PrepareSimulation / SimulateStep returned an error
  std::string first_rejection; // the first such error, with its layout
  int64_t over_memory = 0;     // simulated but peak memory per rank > the limit
  int64_t fitting = 0;         // simulated and within the limit
  std::vector<PlanEntry> best; // the top K fitting layouts, tokens/s descending
  double seconds = 0;          // wall time of the search
};

// MfuBreakdown: where the step time of the slowest pipeline rank goes, seconds, and so
// what MFU is made of: MFU = gemm_efficiency x useful_gemm / step (model FLOPs at peak x
// efficiency), and every other part costs gemm_efficiency x part / step of MFU. The parts
// add up to step_seconds (busy time is the replay's StepResult::timing.busy of that rank).
struct MfuBreakdown {
  int32_t stage = 0;               // StepResult::slowest_stage
  double gemm_efficiency = 0;      // ClusterSpec::gemm_efficiency
  double step_seconds = 0;         // StepResult::step_seconds
  double useful_gemm = 0;          // model FLOPs per GPU / (peak x efficiency)
  double extra_gemm = 0;           // this rank's GEMM time beyond it: recompute, logits on
                                   // the last stage, imbalance (negative on a rank with
                                   // less GEMM work than the average)
  double memory = 0;               // memory-bound kernels (OpTime::memory) x ops
  double tp_cp_comm = 0;           // TP/SP and CP collectives inside ops x ops
  double ep_comm = 0;              // MoE dispatch / combine inside ops x ops (0 if dense)
  double pipeline_idle = 0;        // pipeline_finish - busy: bubble and waits on this rank
  double dp_grad_exposed = 0;      // StageResult::dp_grad_exposed
  double param_gather_exposed = 0; // StageResult::param_gather_exposed
  double optimizer = 0;            // StageResult::optimizer
  double busy = 0;                 // timing.busy of the rank (gemm + memory + comm parts)
};

// BreakDownMfu: the MfuBreakdown of `result` on `cluster`, for a layout whose ranks run
// `ops_per_stage` = m x v (micro-batch, chunk) pairs of F, B and W each.
MfuBreakdown BreakDownMfu(const scheduler::ClusterSpec& cluster, const StepResult& result,
                          int64_t ops_per_stage);

// OpsPerStage: m x v of `layout` at `global_batch_size`: the (micro-batch, chunk) pairs
// one pipeline rank runs per step.
int64_t OpsPerStage(const Layout& layout, int64_t global_batch_size);

// ParsePlanArgs: `mxmaca plan` argv -> PlanOptions. Required: --global-batch-size,
// --cluster, --world-size. Errors (InvalidArgument): a missing required flag, a
// non-numeric or non-positive value, and any layout flag the planner chooses itself
// (--tensor-model-parallel-size, --pipeline-model-parallel-size, --micro-batch-size,
// --recompute-*, --pipeline-schedule, virtual stage flags, --sequence-parallel,
// --context-parallel-size, --expert-model-parallel-size, --expert-tensor-parallel-size,
// ...), named. --moe-load-imbalance is taken into PlanOptions::moe_load_imbalance.
absl::StatusOr<PlanOptions> ParsePlanArgs(const std::vector<std::string>& argv);

// Plan: enumerates, simulates and ranks. Errors: the model flags' parse errors
// (ParseMegatronArgs), a missing --num-layers / --num-attention-heads, LoadCluster's;
// InvalidArgument when no layout of the space fits (with the counts and the first
// rejection). Individual layouts the simulator rejects are counted, not errors.
absl::StatusOr<PlanResult> Plan(const PlanOptions& options);

// FormatPlan: the report: the search counts, then one block per layout of `result.best`
// (rank, TP/PP/VPP/DP/mbs/recompute/schedule, step time, tokens/s, TFLOP/s per GPU, MFU,
// bubble share, exposed communication, peak memory per rank, and the flags for
// `mxmaca train` and for Megatron-LM's pretrain_gpt.py), then the MfuBreakdown of #1.
std::string FormatPlan(const PlanOptions& options, const PlanResult& result);

// RunPlan: `mxmaca plan ARGS`: ParsePlanArgs, Plan, prints FormatPlan to stdout.
absl::Status RunPlan(const std::vector<std::string>& argv);

}  // namespace mxmaca::api

#endif  // MXMACA_API_PLAN_PLAN_COMMAND_H_
