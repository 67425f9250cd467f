// tests/gpu/pipeline_loop.h: the GPU check's two-stage pipeline (issue 8, "a 2-stage
// pipeline of actors on one GPU with graphs on and off"): two device GptStages (GptStage::CreateOnDevice) — layers
// [0, L/2) with the embedding, [L/2, L) with the loss head — each on its OWN DeviceKernels
// (own stream) with its own SegmentRunner (the stage's CUDA graph cache on the GPU),
// driven as two actor threads that exchange activations forward and input gradients
// backward through FIFO channels, in 1F1B order (PipeDream-Flush; Megatron's
// forward_backward_pipelining_without_interleaving) with W right after each B.
//
// Per step: every micro-batch's F/B/W as above; then, on the calling thread, the total
// gradient norm = sqrt(norm^2 of stage 0 + norm^2 of stage 1), one clip factor, one
// ScaleGrads and AdamWStep per stage (training_loop.h's step). The losses do not depend on
// thread timing: each stage's operations, and the order of messages on each channel, are
// fixed by the schedule; only their interleaving across stages varies.
//
// No CUDA dependency (the runners are passed in): CI runs it on CpuDeviceKernels.
#ifndef MXMACA_TESTS_GPU_PIPELINE_LOOP_H_
#define MXMACA_TESTS_GPU_PIPELINE_LOOP_H_

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "layers/gpt_stage.h"
#include "layers/device/device_kernels.h"
#include "layers/gpt_config.h"
#include "tests/gpu/training_loop.h"

namespace mxmaca::gpu_check {

// OneFOneBOrder: the op sequence of pipeline stage `rank` of `stages` over
// `micro_batches` micro-batches: warm-up forwards (stages - rank - 1, at most
// micro_batches), then alternating F and B, then the remaining Bs. Each entry is
// ('F' or 'B', micro-batch index); a 'B' means B then W of that micro-batch.
std::vector<std::pair<char, int>> OneFOneBOrder(int rank, int stages, int micro_batches);

// PipelineStepTiming: host time one stage spent inside its segment runner (issuing the
// device work of its F/B/W segments: kernel launches eagerly, cudaGraphLaunch when
// replayed), in seconds, and how many segments it ran, in one step.
struct PipelineStepTiming {
  std::array<double, 2> runner_seconds{0.0, 0.0};
  std::array<int64_t, 2> segments{0, 0};
};

// PipelineResult: per-step records (loss, total grad norm) and per-step timing.
struct PipelineResult {
  std::vector<StepRecord> steps;
  std::vector<PipelineStepTiming> timing;
};

// RunTwoStagePipeline: `options.steps` steps of `options.num_micro_batches` micro-batches
// (training_loop.h's data) on a 2-stage split of `config` (config.num_layers >= 2; tied
// embeddings are refused: the embedding/output all-reduce between the stages is not part
// of this check). kernels[i] and runners[i] belong to stage i (a runner may be empty:
// eager). The segment runner timing wraps runners[i] (or the plain segment call).
// Errors: the stages', InvalidArgument for a config this split cannot take, Internal for a
// message out of order on a channel or a non-finite loss or norm.
absl::StatusOr<PipelineResult> RunTwoStagePipeline(
    std::array<layers::device::DeviceKernels*, 2> kernels, const layers::GptConfig& config,
    const TrainingLoopOptions& options, layers::DeviceStageOptions stage_options,
    std::array<layers::device::SegmentRunner, 2> runners);

}  // namespace mxmaca::gpu_check

#endif  // MXMACA_TESTS_GPU_PIPELINE_LOOP_H_
