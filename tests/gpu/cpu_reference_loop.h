// tests/gpu/cpu_reference_loop.h: the CPU backend's run of the GPU check's training loop
// (training_loop.h): layers::GptStage (kernels/cpu, itself checked against PyTorch) with
// layers::AdamWOptimizer, scaled and clipped as the stage actor's RunStep does
// (actors/stage_actor.cc: one kernels::cpu::Scale of the gradient arena per factor,
// then AdamWOptimizer::Step). Kept apart from training_loop.h because it needs the CPU
// kernels (oneDNN), which the nvcc-built GPU check binary does not link.
#ifndef MXMACA_TESTS_GPU_CPU_REFERENCE_LOOP_H_
#define MXMACA_TESTS_GPU_CPU_REFERENCE_LOOP_H_

#include <vector>

#include "absl/status/statusor.h"
#include "layers/gpt_config.h"
#include "tests/gpu/training_loop.h"

namespace mxmaca::gpu_check {

// RunCpuReference: `options.steps` steps of the single-stage GptStage from the weights of
// config.seed, GEMM inputs in config.precision, one kernel thread. Per step the same
// operations as RunDeviceStage (training_loop.h), so on CpuDeviceKernels the two agree bit
// for bit. Errors: GptStage's, and kInternal for a non-finite loss or norm.
absl::StatusOr<std::vector<StepRecord>> RunCpuReference(const layers::GptConfig& config,
                                                        const TrainingLoopOptions& options);

}  // namespace mxmaca::gpu_check

#endif  // MXMACA_TESTS_GPU_CPU_REFERENCE_LOOP_H_
