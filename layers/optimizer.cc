// layers/optimizer.cc: see optimizer.h.
#include "layers/optimizer.h"

#include <utility>

#include "kernels/cpu/adamw.h"

namespace mxmaca::layers {

AdamWOptimizer::AdamWOptimizer(const AdamWOptions& options,
                               std::vector<OptimizerTensor> tensors)
    : options_(options), tensors_(std::move(tensors)) {
  exp_avg_.reserve(tensors_.size());
  exp_avg_sq_.reserve(tensors_.size());
  for (const OptimizerTensor& t : tensors_) {
    exp_avg_.emplace_back(static_cast<size_t>(t.numel), 0.0f);
    exp_avg_sq_.emplace_back(static_cast<size_t>(t.numel), 0.0f);
  }
}

bool IsEmbeddingOrOutputParameter(const std::string& name) {
  return name == "embedding.word_embeddings.weight" || name == "output_layer.weight";
}

void AdamWOptimizer::Step(const kernels::ExecContext& ctx, double lr, double weight_decay) {
  Step(ctx, lr, lr, weight_decay);
}

void AdamWOptimizer::Step(const kernels::ExecContext& ctx, double lr, double decoupled_lr,
                          double weight_decay) {
  ++step_;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const OptimizerTensor& t = tensors_[i];
    kernels::cpu::AdamWStep(ctx, t.param, t.grad, exp_avg_[i].data(), exp_avg_sq_[i].data(),
                            t.numel, static_cast<float>(t.is_decoupled_lr ? decoupled_lr : lr),
                            options_.beta1, options_.beta2,
                            options_.eps,
                            t.apply_weight_decay ? static_cast<float>(weight_decay) : 0.0f,
                            step_);
  }
}

}  // namespace mxmaca::layers
