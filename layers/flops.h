// layers/flops.h: model FLOPs per iteration, Megatron's num_floating_point_operations.
//
// Source: megatron/training/training.py num_floating_point_operations (core_v0.15.0),
// dense-transformer branch (MEGATRON_FORMATS.md "FLOPs"): with E = 12 (3 passes x 2
// FLOPs per multiply-add x 2 GEMMs per ...), per iteration
//   E·B·s·L·h² · [ (1 + ng/np + s/(2h))·(kv·np/h)           attention (causal halves s²)
//                 + (ffn/h)·g                                 MLP, g = 3/2 with SwiGLU
//                 + V_pad/(2·L·h) ]                           logits (6·B·s·h·V_pad)
// For GPT-2 shapes (ffn = 4h, MHA) this is 72·B·s·L·h²·(1 + s/(12h)) + 6·B·s·h·V_pad.
// MoE (the same function's MoE terms): with L_moe of the L layers MoE, the MLP term is
//   g·[ffn·(L - L_moe)/L + (moe_ffn·topk + shared_ffn)·L_moe/L] / h
// (routed experts count top-k times, the shared expert once; the router is not counted).
#ifndef MXMACA_LAYERS_FLOPS_H_
#define MXMACA_LAYERS_FLOPS_H_

#include <cstdint>

namespace mxmaca::layers {

// DenseGptShape: the dimensions the FLOPs formula needs (Megatron flag names).
struct DenseGptShape {
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t ffn_hidden_size = 0;
  int64_t num_attention_heads = 0;
  int64_t num_query_groups = 0;   // = heads without GQA
  int64_t kv_channels = 0;        // = hidden / heads by default
  int64_t seq_length = 0;
  int64_t padded_vocab_size = 0;
  bool swiglu = false;
  // MoE: layers whose MLP is a MoE layer, --moe-ffn-hidden-size, --moe-router-topk,
  // --moe-shared-expert-intermediate-size (0 = none). num_moe_layers = 0: dense.
  int64_t num_moe_layers = 0;
  int64_t moe_ffn_hidden_size = 0;
  int64_t moe_router_topk = 1;
  int64_t shared_expert_ffn_hidden_size = 0;
};

// NumFloatingPointOperations: FLOPs of one training iteration (forward + backward) over
// `global_batch_size` samples of seq_length tokens. Double precision (values reach 1e18).
double NumFloatingPointOperations(const DenseGptShape& shape, int64_t global_batch_size);

}  // namespace mxmaca::layers

#endif  // MXMACA_LAYERS_FLOPS_H_
