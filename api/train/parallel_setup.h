// api/train/parallel_setup.h: the pipeline / data-parallel layout of a training run from
// Megatron's flags: the placement of layers on (pipeline rank, model chunk), the pipeline
// schedules for training and evaluation (validated before anything runs), and the
// start-up memory report.
#ifndef MXMACA_API_TRAIN_PARALLEL_SETUP_H_
#define MXMACA_API_TRAIN_PARALLEL_SETUP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/args/megatron_args.h"
#include "api/train/stage_ranks.h"
#include "layers/gpt_config.h"
#include "layers/pipeline_placement.h"
#include "scheduler/pipeline_schedule.h"

namespace mxmaca::api {

// ParallelSetup: see file comment.
struct ParallelSetup {
  int32_t pipeline_size = 1;       // P = --pipeline-model-parallel-size
  int32_t virtual_size = 1;        // v (model chunks per pipeline rank)
  int32_t data_parallel_size = 1;  // dp = world / (tp x cp x P)
  int32_t tensor_parallel_size = 1;  // tp = --tensor-model-parallel-size
  int32_t context_parallel_size = 1;  // cp = --context-parallel-size
  bool sequence_parallel = false;
  int32_t num_microbatches = 1;    // m = global batch / (micro batch x dp)
  int32_t eval_num_microbatches = 1;  // --eval-global-batch-size / (micro batch x dp)
  layers::PipelinePlacement placement;
  scheduler::PipelineSchedule train_schedule;
  scheduler::PipelineSchedule eval_schedule;

  // Describe: the start-up lines: grid sizes, schedule, placement (one line per rank and
  // chunk, and Megatron's --pipeline-model-parallel-layout string).
  std::string Describe() const;
};

// BuildParallelSetup: from validated args (ValidateAndDeriveArgs ran). The schedule is
// --pipeline-schedule, or Megatron's choice (interleaved 1F1B with virtual stages, else
// 1F1B). Errors (InvalidArgument naming the flags and values): layers that cannot be
// split (BuildPipelinePlacement), a schedule that does not fit (e.g. interleaved with
// m not a multiple of P, GPipe with v > 1), an unknown schedule name.
absl::StatusOr<ParallelSetup> BuildParallelSetup(const MegatronArgs& args,
                                                 const layers::GptConfig& model);

// MemoryReport: one line per pipeline rank (of DP replica 0): parameters, gradients,
// optimizer state (sharded with --use-distributed-optimizer) and the activations the
// schedule stashes at its peak (scheduler::PeakStashedMicrobatches x the largest chunk's
// stash per micro-batch, layers/stage_memory.h), in MB.
std::vector<std::string> MemoryReport(const ParallelSetup& setup, const layers::GptConfig& model,
                                      const std::vector<StageRank>& ranks,
                                      const MegatronArgs& args);

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_PARALLEL_SETUP_H_
