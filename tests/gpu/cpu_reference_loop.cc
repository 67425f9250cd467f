// tests/gpu/cpu_reference_loop.cc
#include "tests/gpu/cpu_reference_loop.h"

#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/elementwise.h"
#include "layers/gpt_stage.h"
#include "layers/optimizer.h"

namespace mxmaca::gpu_check {

absl::StatusOr<std::vector<StepRecord>> RunCpuReference(const layers::GptConfig& config,
                                                        const TrainingLoopOptions& options) {
  const layers::StageLayout layout{0, config.num_layers, true, true};
  MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<layers::GptStage> stage,
                          layers::GptStage::Create(config, layout));
  stage->InitializeParameters();
  layers::ParameterStore& store = stage->parameters();
  std::vector<layers::OptimizerTensor> tensors;
  for (int i = 0; i < store.size(); ++i) {
    const layers::ParameterInfo& info = store.info(i);
    tensors.push_back({info.spec.name, store.param(i), store.grad(i), info.numel,
                       info.spec.weight_decay, 0});
  }
  layers::AdamWOptimizer adam(layers::AdamWOptions{}, std::move(tensors));
  kernels::ExecContext ctx;
  ctx.precision = config.precision;
  ctx.num_threads = 1;
  std::vector<StepRecord> records;
  for (int step = 0; step < options.steps; ++step) {
    const double tokens = StepTokens(config, options, step);
    const float loss_grad_scale = static_cast<float>(1.0 / tokens);
    double loss_sum = 0.0;
    for (int m = 0; m < options.num_micro_batches; ++m) {
      const TokenBatch bt = MakeTokenBatch(config, options, step, m);
      const layers::MicroBatchInput in = TrainingInput(bt, options, step, m);
      layers::StageOutput out;
      MXMACA_RETURN_IF_ERROR(stage->Forward(in, &out));
      loss_sum += out.loss_sum;
      std::vector<float> unused;
      MXMACA_RETURN_IF_ERROR(stage->BackwardInput(in.micro_batch_id, {}, loss_grad_scale, &unused));
      MXMACA_RETURN_IF_ERROR(stage->BackwardWeight(in.micro_batch_id));
    }
    // The norm as GptStage::GradNormSquared sums it: one fp64 SumSquares per tensor,
    // added in parameter order (layers/grad_clip.cc GradNormSquared's order too).
    double norm_sq = 0.0;
    for (int i = 0; i < store.size(); ++i) {
      norm_sq += kernels::cpu::SumSquares(ctx, store.grad(i), store.info(i).numel);
    }
    StepRecord rec{loss_sum / tokens, std::sqrt(norm_sq)};
    if (!std::isfinite(rec.loss) || !std::isfinite(rec.grad_norm)) {
      return absl::InternalError(absl::StrCat("CPU reference: step ", step, " loss ", rec.loss,
                                              ", grad norm ", rec.grad_norm));
    }
    const double clip = ClipCoefficient(rec.grad_norm, options.clip_grad);
    absl::Span<float> g = store.grads_arena();
    if (clip != 1.0) kernels::cpu::Scale(ctx, g.data(), g.size(), static_cast<float>(clip));
    adam.Step(ctx, LearningRate(options, step), options.weight_decay);
    store.ZeroGrads();
    records.push_back(rec);
  }
  return records;
}

}  // namespace mxmaca::gpu_check
