// actors/checkpoint/megatron/megatron_names.h: MXMACA's logical parameter names (the
// Megatron-Core names with GLOBAL layer numbers, layers/gpt_parameters.h and
// layers/moe/moe_layer.h) to and from the keys of Megatron-Core's GPTModel state dict in
// a legacy checkpoint, with how each tensor is split over tensor-parallel ranks.
//
// Keys (megatron/core/models/gpt/gpt_model.py, transformer_layer.py, attention.py,
// mlp.py, moe/moe_layer.py, experts.py; N = the layer index LOCAL to the file's pipeline
// stage and model chunk):
//   local spec (--transformer-impl local)     Transformer Engine spec (transformer_engine)
//   N.input_layernorm.{weight,bias}           N.self_attention.linear_qkv.layer_norm_{weight,bias}
//   N.pre_mlp_layernorm.{weight,bias}         N.mlp.linear_fc1.layer_norm_{weight,bias}
//                                             (dense layers; MoE layers keep pre_mlp_layernorm)
//   N.self_attention.linear_{qkv,proj}.*, N.mlp.linear_fc{1,2}.*: the same in both; the
//   TE spec adds <module>._extra_state for linear_qkv, linear_proj, core_attention,
//   linear_fc1, linear_fc2 (and the experts' grouped linears).
//   MoE experts (expert i of E, EP rank e holds [e E/EP, (e + 1) E/EP), j = i - e E/EP):
//     grouped GEMM (TEGroupedMLP): N.mlp.experts.linear_fc{1,2}.{weight,bias}<j>
//     SequentialMLP:               N.mlp.experts.local_experts.<j>.linear_fc{1,2}.{weight,bias}
// TP splits (layers/tensor_parallel.h, Megatron's ColumnParallelLinear /
// RowParallelLinear / VocabParallelEmbedding): rows for the word embeddings, output layer,
// linear_qkv (rows grouped per query group, so a row split keeps whole groups) and
// linear_fc1; SwiGLU's linear_fc1 per TP rank t is [gate_t; up_t], rows t·f/tp ..
// (t+1)·f/tp of each half of the logical [gate; up]; columns for linear_proj.weight and
// linear_fc2.weight; everything else (norms, row-parallel biases, position embeddings,
// router) replicated. Routed experts are not TP-split (expert tensor parallel size 1).
#ifndef MXMACA_ACTORS_CHECKPOINT_MEGATRON_MEGATRON_NAMES_H_
#define MXMACA_ACTORS_CHECKPOINT_MEGATRON_MEGATRON_NAMES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mxmaca::actors::checkpoint::megatron {

// LayerSpec: which of Megatron-Core's layer specs the keys follow.
enum class LayerSpec { kLocal, kTransformerEngine };

// TpSplit: how a tensor is divided over the TP ranks.
enum class TpSplit { kReplicated, kRows, kColumns, kGateUpRows };

// ModelNaming: what the name map needs to know about the model.
struct ModelNaming {
  LayerSpec spec = LayerSpec::kTransformerEngine;
  bool swiglu = false;
  int64_t num_experts = 0;        // 0: dense
  bool grouped_gemm = true;       // experts as TEGroupedMLP (true) or SequentialMLP keys
  int64_t expert_parallel_size = 1;
};

// MegatronKeyFor: the state-dict key of logical parameter `logical` (e.g.
// "decoder.layers.7.input_layernorm.weight") in the file of a stage whose first layer is
// global layer `first_layer`; for routed experts, "" when the expert is not held by EP
// rank `ep_rank`. `dense_layer`: the layer has a dense MLP (the TE spec fuses its
// pre-MLP norm into linear_fc1). InvalidArgument for a name outside the map.
absl::StatusOr<std::string> MegatronKeyFor(const std::string& logical, const ModelNaming& naming,
                                           int64_t first_layer, int ep_rank, bool dense_layer);

// LogicalNameFor: the inverse: the logical name of state-dict `key` in the file of a stage
// whose first layer is `first_layer` and of EP rank `ep_rank`; nullopt for keys that carry
// no parameter (_extra_state entries); InvalidArgument for a key outside the map.
absl::StatusOr<std::optional<std::string>> LogicalNameFor(const std::string& key,
                                                          const ModelNaming& naming,
                                                          int64_t first_layer, int ep_rank);

// SplitOf: the TP split of logical tensor `logical` (see above).
TpSplit SplitOf(const std::string& logical, const ModelNaming& naming);

// IsRoutedExpert: whether `logical` is a routed expert's tensor (mlp.experts.*).
bool IsRoutedExpert(const std::string& logical);

// ExtraStateKeys: the TE spec's _extra_state keys of local layer `n` (dense or MoE, with
// or without shared experts), in state-dict order; empty for the local spec.
std::vector<std::string> ExtraStateKeys(int64_t n, const ModelNaming& naming, bool dense_layer,
                                        bool shared_experts);

// ShardShape: the shape TP rank `t` of `tp` holds of a tensor of `full` shape.
// InvalidArgument when the split dimension is not divisible (naming the tensor).
absl::StatusOr<std::vector<int64_t>> ShardShape(const std::string& logical, TpSplit split,
                                                const std::vector<int64_t>& full, int tp);

// ExtractShard: TP rank `t`'s shard (C order) of `full_data` (C order over `full`).
std::vector<float> ExtractShard(TpSplit split, const std::vector<int64_t>& full,
                                const float* full_data, int t, int tp);

// PlaceShard: writes TP rank `t`'s shard into `full_data` (the inverse of ExtractShard).
void PlaceShard(TpSplit split, const std::vector<int64_t>& full, const float* shard, int t,
                int tp, float* full_data);

}  // namespace mxmaca::actors::checkpoint::megatron

#endif  // MXMACA_ACTORS_CHECKPOINT_MEGATRON_MEGATRON_NAMES_H_
