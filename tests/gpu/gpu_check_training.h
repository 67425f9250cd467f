// tests/gpu/gpu_check_training.h: the GPU check's model-level sections (issue 8), run by
// gpu_check_main.cc after the kernel sections:
//   (a) training: 20 steps of the small GPTs of training_loop.h on CudaDeviceKernels vs
//       the CPU backend's per-step losses (cpu_reference_losses.txt beside the binary):
//       fp32 within 1e-4 relative per step, bf16 GEMM inputs within 2e-2;
//   (b) pipeline: two device GptStages as two actor threads on one GPU, each with its own
//       stream and CUDA graph cache (kernels/cuda/graph_cache.h), 1F1B over 4
//       micro-batches, graphs off and on: losses identical bit for bit, and the host time
//       per micro-batch spent issuing the device work (eager launches vs graph launches);
//   (c) throughput: GPT h 2048, 24 layers, 16 heads, s 2048, V 50304, bf16 GEMM inputs,
//       fused attention, gradient-accumulation fusion, graphs on, the largest micro-batch
//       of {16, 8, 4, 2, 1} that fits: TFLOP/s (Megatron's FLOPs formula, layers/flops.h)
//       and MFU against 989 TFLOP/s and against the cuBLASLt bf16 peak measured here.
#ifndef MXMACA_TESTS_GPU_GPU_CHECK_TRAINING_H_
#define MXMACA_TESTS_GPU_GPU_CHECK_TRAINING_H_

#include <string>

#include "tests/gpu/check_util.h"

namespace mxmaca::gpu_check {

// TrainingCheckOptions: which sections run, and the reference file of (a).
struct TrainingCheckOptions {
  std::string reference_path;  // cpu_reference_losses.txt
  bool quick = false;          // fewer pipeline and throughput steps, a smaller peak GEMM
  bool training = true, pipeline = true, throughput = true;
};

// RunTrainingChecks: the sections above; (a) and (b) add rows to `table`, (c) prints its
// figures; a failed call in any section becomes a failed row and the others still run.
void RunTrainingChecks(Table* table, const TrainingCheckOptions& options);

}  // namespace mxmaca::gpu_check

#endif  // MXMACA_TESTS_GPU_GPU_CHECK_TRAINING_H_
