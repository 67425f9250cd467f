// Tests NumFloatingPointOperations against the closed form Megatron's formula reduces to
// for GPT-2 shapes (MEGATRON_FORMATS.md): 72·B·s·L·h²·(1 + s/(12h)) + 6·B·s·h·V_pad.
#include "layers/flops.h"

#include <catch2/catch.hpp>

namespace mxmaca::layers {
namespace {

TEST_CASE("dense GPT FLOPs reduce to Megatron's closed form for ffn = 4h, MHA") {
  for (int64_t h : {256, 1024, 12288}) {
    DenseGptShape m{6, h, 4 * h, 8, 8, h / 8, 256, 50304, false};
    const double B = 8, s = 256, L = 6, V = 50304, H = static_cast<double>(h);
    const double expect = 72 * B * s * L * H * H * (1 + s / (12 * H)) + 6 * B * s * H * V;
    CHECK(NumFloatingPointOperations(m, 8) == Approx(expect).epsilon(1e-12));
  }
}

TEST_CASE("SwiGLU counts three MLP GEMMs and GQA shrinks the KV projections") {
  DenseGptShape base{4, 512, 1024, 8, 8, 64, 128, 1024, false};
  DenseGptShape glu = base;
  glu.swiglu = true;
  // The difference is exactly the extra half of the MLP term: 12·B·s·L·h·ffn·0.5.
  CHECK(NumFloatingPointOperations(glu, 2) - NumFloatingPointOperations(base, 2) ==
        Approx(12.0 * 2 * 128 * 4 * 512 * 1024 * 0.5));
  DenseGptShape gqa = base;
  gqa.num_query_groups = 2;
  // KV projections: 12·B·s·L·h²·(ng/np)·q_ratio with q_ratio = 1.
  CHECK(NumFloatingPointOperations(base, 2) - NumFloatingPointOperations(gqa, 2) ==
        Approx(12.0 * 2 * 128 * 4 * 512.0 * 512 * (1.0 - 0.25)));
}

TEST_CASE("MoE layers count top-k routed experts and the shared expert per token") {
  DenseGptShape dense{4, 512, 1024, 8, 8, 64, 128, 1024, false};
  DenseGptShape moe = dense;
  moe.num_moe_layers = 2;  // 2 of 4 layers
  moe.moe_ffn_hidden_size = 256;
  moe.moe_router_topk = 2;
  moe.shared_expert_ffn_hidden_size = 128;
  // MLP FLOPs of a MoE layer: 12·B·s·h·(moe_ffn·topk + shared) instead of 12·B·s·h·ffn.
  const double per_layer_delta = 12.0 * 2 * 128 * 512 * (1024.0 - (256.0 * 2 + 128.0));
  CHECK(NumFloatingPointOperations(dense, 2) - NumFloatingPointOperations(moe, 2) ==
        Approx(2 * per_layer_delta));
}

}  // namespace
}  // namespace mxmaca::layers
