// layers/optimizer.h: AdamW over a set of named fp32 tensors (Megatron's Adam with
// decoupled weight decay, --optimizer adam).
//
// Megatron (megatron/core/optimizer/__init__.py, _get_param_groups) puts biases and 1-D
// tensors (norm weights) in a no-weight-decay group and everything else in the decay
// group; its fused Adam in adam_w_mode performs torch.optim.AdamW's update, which
// kernels::cpu::AdamWStep implements. Optimizer state (exp_avg, exp_avg_sq) is fp32 and
// stored per tensor under the tensor's logical name, so a checkpoint can hold it as
// logical tensors (docs/ARCHITECTURE.md).
#ifndef MXMACA_LAYERS_OPTIMIZER_H_
#define MXMACA_LAYERS_OPTIMIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "kernels/exec_context.h"

namespace mxmaca::layers {

// OptimizerTensor: one parameter tensor, or one flat piece of it, that the optimizer
// updates. `param` and `grad` point to `numel` fp32 values owned by the caller (the
// stage's parameter store) and must outlive the optimizer. With the distributed
// optimizer (layers/grad_buckets.h, DistributedOptimizerTensors) a DP rank updates only
// pieces: the flat elements [flat_offset, flat_offset + numel) of the tensor held here
// (C order over ParameterInfo::shard_shape; the whole logical tensor while the store
// holds whole tensors), as Megatron's distrib_optimizer.py param_range does. AdamW is
// elementwise, so pieces update exactly as the whole tensor would.
struct OptimizerTensor {
  std::string name;         // logical name, e.g. "decoder.layers.0.mlp.linear_fc1.weight"
  float* param = nullptr;
  const float* grad = nullptr;
  int64_t numel = 0;
  bool apply_weight_decay = true;  // false for biases and norm weights
  int64_t flat_offset = 0;         // first element of this piece in the tensor (0: whole)
  // is_decoupled_lr: stepped with the decoupled learning rate (--decoupled-lr); set for
  // IsEmbeddingOrOutputParameter(name).
  bool is_decoupled_lr = false;
};

// IsEmbeddingOrOutputParameter: Megatron's is_embedding_or_output_parameter attribute
// (megatron/core/models/common/language_module/language_module.py,
// setup_embeddings_and_output_layer, core_v0.19.0): true for
// "embedding.word_embeddings.weight" (on the first stage, and the last stage's tied copy)
// and "output_layer.weight"; the parameters --decoupled-lr applies to. Position
// embeddings, norms and biases are not in the group.
bool IsEmbeddingOrOutputParameter(const std::string& name);

// AdamWOptions: --adam-beta1, --adam-beta2, --adam-eps (Megatron's defaults).
struct AdamWOptions {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
};

// AdamWOptimizer: owns exp_avg / exp_avg_sq for each tensor (zero-initialised).
class AdamWOptimizer {
 public:
  AdamWOptimizer(const AdamWOptions& options, std::vector<OptimizerTensor> tensors);

  // Step: one update of every tensor with learning rate `lr` and weight decay
  // `weight_decay` (applied only where apply_weight_decay), then step() += 1.
  // Tensors are updated one after another; within a tensor the kernel is elementwise,
  // so the result does not depend on ctx.num_threads.
  void Step(const kernels::ExecContext& ctx, double lr, double weight_decay);
  // Step with Megatron's decoupled parameter group: tensors with is_decoupled_lr use
  // `decoupled_lr`, the others `lr` (weight decay as above).
  void Step(const kernels::ExecContext& ctx, double lr, double decoupled_lr,
            double weight_decay);

  // step: the number of completed updates (Adam's t; bias corrections use t + 1 next).
  int64_t step() const { return step_; }
  void set_step(int64_t step) { step_ = step; }

  const std::vector<OptimizerTensor>& tensors() const { return tensors_; }
  // exp_avg / exp_avg_sq of tensor i: numel fp32 values.
  absl::Span<float> exp_avg(size_t i) { return absl::MakeSpan(exp_avg_[i]); }
  absl::Span<float> exp_avg_sq(size_t i) { return absl::MakeSpan(exp_avg_sq_[i]); }
  const AdamWOptions& options() const { return options_; }

 private:
  AdamWOptions options_;
  std::vector<OptimizerTensor> tensors_;
  std::vector<std::vector<float>> exp_avg_;
  std::vector<std::vector<float>> exp_avg_sq_;
  int64_t step_ = 0;
};

}  // namespace mxmaca::layers

#endif  // MXMACA_LAYERS_OPTIMIZER_H_
