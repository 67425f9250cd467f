// tests/gpu/training_loop.h: the small, deterministic GPT training run of the GPU check
// (issue 8, "20 training steps of a small GPT on one GPU vs the CPU backend"): the model
// configurations, the synthetic data, the learning-rate schedule and the optimizer step
// shared by the CPU reference (cpu_reference_loop.h, layers::GptStage) and the device
// loop below (layers/gpt_stage.h GptStage::CreateOnDevice on any DeviceKernels).
//
// One training step (both loops, the same operations in the same order):
//   for each micro-batch m (in order): F, B (loss_grad_scale = 1 / num_tokens of the
//   whole step, Megatron's per-token mean), W;
//   total_norm = sqrt(sum over tensors, in parameter order, of fp64 SumSquares);
//   clip_coeff = clip_grad / (total_norm + 1e-6) when below 1 (layers/grad_clip.h,
//   Megatron's clip_grad_by_total_norm_fp32), applied as one Scale of every gradient;
//   AdamW (torch.optim.AdamW: beta 0.9/0.999, eps 1e-8, decoupled weight decay on
//   matrices only) with the step's learning rate; gradients zeroed.
// The reported loss of a step is sum(token loss * mask) / sum(mask) over its micro-batches.
//
// No CUDA dependency: the GPU check runs RunDeviceStage on CudaDeviceKernels, CI runs it
// on CpuDeviceKernels (training_loop_test: bit for bit equal to the CPU reference).
#ifndef MXMACA_TESTS_GPU_TRAINING_LOOP_H_
#define MXMACA_TESTS_GPU_TRAINING_LOOP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/exec_context.h"
#include "layers/gpt_stage.h"
#include "layers/device/device_kernels.h"
#include "layers/gpt_config.h"
#include "layers/stage_io.h"

namespace mxmaca::gpu_check {

// ModelVariant: the two small GPTs.
//   kGpt2:  LayerNorm, exact GELU, learned absolute positions, linear biases, tied
//           embeddings, multi-head attention (GPT-2's structure).
//   kLlama: RMSNorm, SwiGLU, RoPE, grouped-query attention (4 heads, 2 groups), no
//           linear biases, untied output layer (Llama's structure).
enum class ModelVariant { kGpt2, kLlama };

// VariantName: "gpt2" / "llama". PrecisionName: "fp32" / "bf16".
const char* VariantName(ModelVariant variant);
const char* PrecisionName(kernels::Precision precision);

// SmallGptConfig: L = 4 layers, h = 128, 4 heads, ffn 512 (SwiGLU: 352, about 8h/3
// rounded to 32), s = 128, vocabulary V = 1000 padded to 1024, dropout 0 (so segments are
// graph-safe and CPU and GPU draw no masks), seed 1234; `precision` = GEMM input precision.
layers::GptConfig SmallGptConfig(ModelVariant variant, kernels::Precision precision);

// TrainingLoopOptions: the run's shape and optimizer settings.
struct TrainingLoopOptions {
  int steps = 20;                // optimizer steps
  int num_micro_batches = 2;     // micro-batches per step (gradient accumulation)
  int64_t micro_batch_size = 4;  // b
  float lr = 1e-3f;              // peak learning rate
  int lr_warmup_steps = 4;       // linear warm-up: lr (i + 1) / warmup for step i < warmup
  float weight_decay = 0.01f;
  double clip_grad = 1.0;        // --clip-grad (max total norm)
  uint64_t data_seed = 2024;
};

// LearningRate: the learning rate of 0-based step `step` (fp32, as both loops use it).
float LearningRate(const TrainingLoopOptions& options, int step);

// ClipCoefficient: clip / (norm + 1e-6) when that is below 1 (and clip > 0), else 1.
double ClipCoefficient(double total_norm, double clip_grad);

// TokenBatch: one micro-batch in get_batch's form. tokens/labels [b, s] (labels = tokens
// shifted by one), loss_mask [b, s] all ones.
struct TokenBatch {
  int64_t b = 0, s = 0;
  std::vector<int32_t> tokens, labels;
  std::vector<float> loss_mask;
};

// MakeTokenBatch: micro-batch `micro_batch` of step `step`: each row is a sequence of
// s + 1 tokens x[0..s] with x[0] random and x[i+1] = (a x[i] + c) mod V with probability
// 0.9, else a random token (a = 37, c = 11, coprime with V: a learnable bigram structure).
// The randomness is a hash (splitmix64) of (data_seed, step, micro_batch, row, position),
// so every build and machine draws the same batches, different ones per step.
TokenBatch MakeTokenBatch(const layers::GptConfig& config, const TrainingLoopOptions& options,
                          int step, int micro_batch);

// TrainingInput: `batch` as the single stage's forward input: micro-batch id
// step * num_micro_batches + micro_batch, iteration `step`, tokens, labels and loss mask
// (spans into `batch`, which must outlive the call that reads them).
layers::MicroBatchInput TrainingInput(const TokenBatch& batch, const TrainingLoopOptions& options,
                                      int step, int micro_batch);

// StepTokens: sum of the loss masks of step `step`'s micro-batches (the denominator).
double StepTokens(const layers::GptConfig& config, const TrainingLoopOptions& options, int step);

// StepRecord: what one step reports. loss: the step's mean token loss before the update;
// grad_norm: the total gradient norm before clipping.
struct StepRecord {
  double loss = 0.0;
  double grad_norm = 0.0;
};

// RunDeviceStage: `options.steps` steps of the single device GptStage (all layers,
// embedding and loss head) on `kernels`, from the weights of config.seed (equal to
// GptStage's), with the device optimizer (GptStage::AdamWStep). `stage_options`
// gives fusion / fused attention; its micro_batch_size is raised to options'.
// `runner` (may be empty) is installed with set_segment_runner.
// Errors: the stage's (Create, F/B/W, optimizer calls), and kInternal for a non-finite
// loss or norm (naming the step).
absl::StatusOr<std::vector<StepRecord>> RunDeviceStage(
    layers::device::DeviceKernels& kernels, const layers::GptConfig& config,
    const TrainingLoopOptions& options, layers::DeviceStageOptions stage_options,
    const layers::device::SegmentRunner& runner = nullptr);

// RunFingerprint: one line naming every setting the losses depend on (model, data,
// optimizer), written beside the reference losses so a stale file is detected.
std::string RunFingerprint(const layers::GptConfig& config, const TrainingLoopOptions& options);

}  // namespace mxmaca::gpu_check

#endif  // MXMACA_TESTS_GPU_TRAINING_LOOP_H_
