// api/simulate/step_model.h: the cost model of one training step of a dense GPT on a
// cluster — op times by roofline, TP/CP/PP/DP communication by the alpha-beta model
// (scheduler/collective_cost.h), the pipeline replayed by scheduler::SimulateSchedule, the
// optimizer step and memory per rank. The model and its assumptions: docs/SIMULATOR.md.
//
// Shape legend (Megatron's names): b = micro-batch size, s = sequence length, h = hidden,
// a = attention heads, g = query groups, d = head dim (kv_channels), f = ffn hidden
// (f1 = 2f with SwiGLU), V = padded vocabulary, t = TP, c = CP, dp = DP, p = PP, v = model
// chunks per pipeline rank, m = micro-batches per step. T = b s / c tokens per rank and
// micro-batch. Activations bf16 (2 bytes), gradients reduced in fp32 (Megatron turns on
// --accumulate-allreduce-grads-in-fp32 with --bf16), Adam state fp32.
#ifndef MXMACA_API_SIMULATE_STEP_MODEL_H_
#define MXMACA_API_SIMULATE_STEP_MODEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/calibrate/cost_table.h"
#include "api/simulate/moe_cost.h"
#include "api/simulate/op_time.h"
#include "layers/gpt_config.h"
#include "layers/pipeline_placement.h"
#include "scheduler/cluster.h"
#include "scheduler/pipeline_schedule.h"
#include "scheduler/schedule_simulator.h"

namespace mxmaca::api {

// StepModelInputs: what the cost model needs (from the training flags and the cluster).
struct StepModelInputs {
  layers::GptConfig model;               // model shape and recomputation settings
  layers::PipelinePlacement placement;   // layers on (pipeline rank, chunk)
  scheduler::PipelineSchedule schedule;  // the training schedule (BuildSchedule)
  int64_t micro_batch_size = 1;          // b
  int64_t global_batch_size = 1;         // samples per step
  int64_t tensor_parallel_size = 1;      // t
  int64_t context_parallel_size = 1;     // c
  int64_t data_parallel_size = 1;        // dp
  bool sequence_parallel = false;
  bool distributed_optimizer = false;    // --use-distributed-optimizer
  bool overlap_grad_reduce = false;      // --overlap-grad-reduce
  bool overlap_param_gather = false;     // --overlap-param-gather
  // materialized_attention: --attention-backend unfused or local (Megatron's
  // DotProductAttention; every run before flash attention): core attention writes the
  // b (a/t) s^2 scores to HBM (step_model.cc CoreAttentionTimes). False: fused / flash.
  bool materialized_attention = false;
  // MoE (model.moe set): the expert grid (EP, ETP; EDP = t c dp / (etp ep)), the token
  // dispatcher and the load imbalance (moe_cost.h). Ignored for dense models.
  MoeParallelOptions moe;
  scheduler::ClusterSpec cluster;
  // cost_table: measured op times (`mxmaca calibrate`, api/calibrate/cost_table.h) instead
  // of the roofline, and the CPU backend's concurrency: the ranks' strands share the
  // compute pool's workers (docs/SIMULATOR.md, "Calibrated cost tables"). Null: roofline.
  std::shared_ptr<const CostTable> cost_table;
  // num_threads: --num-threads of the CPU run (with a cost table only): the pool has
  // min(world, num_threads) threads (world threads with TP > 1), as
  // api/train/train_command.cc sets up; each layer op runs num_threads OpenMP threads (the
  // GptStage gets the model config's num_threads), so the table should be measured with
  // --calibrate-threads-per-op num_threads (a note says when it was not).
  int64_t num_threads = 1;
};

// StageResult: one pipeline rank.
struct StageResult {
  std::array<OpTime, 3> op;            // F, B, W per (micro-batch, chunk), mean over chunks
  int64_t parameters = 0;              // parameters on this rank (its TP shard, all chunks)
                                       // outside the routed experts (dense-grid parameters)
  double expert_parameters = 0;        // routed experts' parameters on this rank (MoE)
  double pipeline_finish = 0;          // end of the rank's last op, s
  double dp_grad_sync = 0;             // reduce-scatter (dist. opt.) or all-reduce, s
  double dp_grad_exposed = 0;          // the part not hidden behind the last backward
  double param_gather = 0;             // all-gather of bf16 params (dist. opt.), s
  double param_gather_exposed = 0;
  // MoE: the routed experts' gradient sync over the expert-data-parallel group (EDP) and
  // their param all-gather, s; they share the exposure window with the dense sync above
  // (dp_grad_exposed and param_gather_exposed include them).
  double edp_grad_sync = 0;
  double expert_param_gather = 0;
  double optimizer = 0;                // Adam step, s
  double step_end = 0;                 // pipeline_finish + exposed comm + optimizer
  // Memory, bytes.
  int64_t stashed_microbatches = 0;    // PeakStashedMicrobatches (micro-batch, chunk) pairs
  double param_bytes = 0, grad_bytes = 0, optimizer_bytes = 0;
  // stash at the peak: stashed_microbatches x the mean stash of the rank's chunks
  // (exact for v = 1; with v > 1 the chunks' stashes differ only by embedding / loss head)
  double activation_bytes = 0;
  double transient_bytes = 0;          // a recomputed group's activations during B
  double total_bytes() const {
    return param_bytes + grad_bytes + optimizer_bytes + activation_bytes + transient_bytes;
  }
};

// StepResult: the whole step.
struct StepResult {
  scheduler::ScheduleTiming timing;  // the pipeline replay, seconds
  double p2p_seconds = 0;            // one activation / gradient hand-over between stages
  std::vector<StageResult> stages;   // [p]
  double step_seconds = 0;           // max over ranks of step_end
  double tokens_per_second = 0;      // global batch x s / step
  double model_flops = 0;            // Megatron's formula (layers/flops.h), per step
  double tflops_per_gpu = 0;         // model_flops / step / world / 1e12
  double mfu = 0;                    // tflops_per_gpu / peak
  double bubble_fraction = 0;        // the replay's idle share of p x makespan
  double exposed_comm_seconds = 0;   // on the slowest rank: TP + CP + EP in ops + DP exposed
  int64_t world_size = 0;
  int32_t slowest_stage = 0;
  int32_t peak_memory_stage = 0;
  double peak_memory_bytes = 0;
  // With a cost table: the workers the ranks' strands share (CPU cores in use, / t with
  // TP), the fixed per-step overhead included in step_seconds, and notes on where the
  // run differs from the measured conditions (e.g. threads per op).
  int workers = 0;
  double step_overhead_seconds = 0;
  std::vector<std::string> notes;
};

// SimulateStep: runs the model. Errors: InvalidArgument for sizes the model cannot use
// (non-positive sizes, T not divisible by t with SP, a schedule whose p differs from the
// placement's; for MoE: TP > 1 without SP, EP not dividing the experts, ETP x EP not
// dividing t c dp, a load imbalance below 1, a cost table), and SimulateSchedule's.
absl::StatusOr<StepResult> SimulateStep(const StepModelInputs& in);

}  // namespace mxmaca::api

#endif  // MXMACA_API_SIMULATE_STEP_MODEL_H_
