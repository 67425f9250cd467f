// layers/device/device_stage_test.cc: layers::GptStage on a device backend (CreateOnDevice
// over the emulated device: the CPU kernels on memory the host cannot read) equals the same
// stage on the CPU backend (Create; itself checked against PyTorch) bit for bit: both
// run the same kernels in the same order on the same initial weights (a function of seed
// and name), so losses, input gradients, weight gradients and AdamW updates must agree in
// every bit; with --gradient-accumulation-fusion the weight GEMM adds into the arena
// (beta = 1) instead of adding a separately rounded product, so there the tolerance is a
// few fp32 roundings per element (1e-5 relative, norm-wise).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "layers/device/emulated_device_kernels.h"
#include "layers/gpt_stage.h"
#include "layers/moe/moe_layer.h"
#include "layers/optimizer.h"
#include "layers/testing/gpt_test_configs.h"
#include "layers/testing/stage_batches.h"

namespace mxmaca::layers::device {
namespace {

GptConfig TinyConfig() { return testing::TinyGptConfig(); }

GptConfig RopeConfig() {
  GptConfig c = testing::TinyLlamaConfig();
  c.hidden_dropout = 0.0f;
  c.attention_dropout = 0.0f;
  return c;
}

// Batch: fresh random tokens, labels and mask, the second document of each row at a
// random position.
using Batch = testing::StageBatch;

Batch MakeBatch(const GptConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  return testing::MakeStageBatch(rng, c.vocab_size, 2, c.seq_length,
                                 {testing::DocumentCuts::kRandom});
}

MicroBatchInput Input(const Batch& bt, int64_t id, int64_t iteration,
                      const std::vector<float>* hidden) {
  return testing::StageInput(bt, id, iteration, hidden);
}

using testing::BitEqual;

double RelDiff(absl::Span<const float> a, absl::Span<const float> b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

std::vector<OptimizerTensor> OptimizerTensors(ParameterStore& store) {
  std::vector<OptimizerTensor> out;
  for (int i = 0; i < store.size(); ++i) {
    const ParameterInfo& info = store.info(i);
    out.push_back(
        {info.spec.name, store.param(i), store.grad(i), info.numel, info.spec.weight_decay, 0});
  }
  return out;
}

// RunAndCompare: `iterations` training iterations of two micro-batches in the pipelined
// order F1 F2 B1 B2 W1 W2 on one stage on the CPU backend and one on the emulated device (single stage), then the
// scaled AdamW step; checks losses, gradients and parameters bit for bit (or within
// `tolerance` when fusion is on).
void RunAndCompare(const GptConfig& c, kernels::Precision precision, bool fusion,
                   double tolerance) {
  const StageLayout layout{0, c.num_layers, true, true};
  kernels::ExecContext ctx;
  ctx.precision = precision;
  GptConfig cpu_config = c;
  cpu_config.precision = precision;
  auto cpu = GptStage::Create(cpu_config, layout);
  REQUIRE(cpu.ok());
  (*cpu)->InitializeParameters();
  EmulatedDeviceKernels kernels(ctx);
  DeviceStageOptions opts;
  opts.micro_batch_size = 2;
  opts.gradient_accumulation_fusion = fusion;
  auto dev = GptStage::CreateOnDevice(cpu_config, layout, &kernels, opts);
  REQUIRE(dev.ok());
  ParameterStore& cs = (*cpu)->parameters();
  ParameterStore& ds = (*dev)->parameters();
  REQUIRE(cs.arena_elements() == ds.arena_elements());
  REQUIRE(BitEqual(cs.params_arena(), ds.params_arena()));  // same names, same init
  AdamWOptimizer adam(AdamWOptions{}, OptimizerTensors(cs));

  for (int64_t it = 0; it < 2; ++it) {
    const Batch b1 = MakeBatch(c, 100 + 2 * it), b2 = MakeBatch(c, 101 + 2 * it);
    const int64_t id1 = 2 * it, id2 = 2 * it + 1;
    StageOutput co1, co2;
    StageOutput do1, do2;
    REQUIRE((*cpu)->Forward(Input(b1, id1, it, nullptr), &co1).ok());
    REQUIRE((*cpu)->Forward(Input(b2, id2, it, nullptr), &co2).ok());
    REQUIRE((*dev)->Forward(Input(b1, id1, it, nullptr), &do1).ok());
    REQUIRE((*dev)->Forward(Input(b2, id2, it, nullptr), &do2).ok());
    CHECK(co1.loss_sum == do1.loss_sum);
    CHECK(co2.loss_sum == do2.loss_sum);
    CHECK(co1.num_tokens == do1.num_tokens);
    CHECK(BitEqual(co1.token_losses, do1.token_losses));
    const float scale = static_cast<float>(1.0 / (co1.num_tokens + co2.num_tokens));
    std::vector<float> unused;
    REQUIRE((*cpu)->BackwardInput(id1, {}, scale, &unused).ok());
    REQUIRE((*cpu)->BackwardInput(id2, {}, scale, &unused).ok());
    REQUIRE((*dev)->BackwardInput(id1, {}, scale, &unused).ok());
    REQUIRE((*dev)->BackwardInput(id2, {}, scale, &unused).ok());
    REQUIRE((*cpu)->BackwardWeight(id1).ok());
    REQUIRE((*cpu)->BackwardWeight(id2).ok());
    REQUIRE((*dev)->BackwardWeight(id1).ok());
    REQUIRE((*dev)->BackwardWeight(id2).ok());
    REQUIRE((*dev)->DownloadGradients().ok());
    if (tolerance == 0.0) {
      CHECK(BitEqual(cs.grads_arena(), ds.grads_arena()));
    } else {
      CHECK(RelDiff(ds.grads_arena(), cs.grads_arena()) < tolerance);
    }
    // The norm, then the update with a clip factor, as the stage actor's RunStep.
    auto norm = (*dev)->GradNormSquared(nullptr);
    REQUIRE(norm.ok());
    double cpu_norm = 0.0;
    for (float g : cs.grads_arena()) cpu_norm += static_cast<double>(g) * g;
    // fp64 sums of the same values in other orders (1e-12); with fusion the gradients
    // themselves differ by `tolerance`, their squares' sum by about twice that.
    CHECK(std::abs(*norm - cpu_norm) <= (tolerance == 0.0 ? 1e-12 : 2 * tolerance) * cpu_norm);
    const float clip = 0.5f;
    kernels::cpu::Scale(ctx, cs.grads_arena().data(), cs.arena_elements(), clip);
    adam.Step(ctx, 1e-3, 0.1);
    REQUIRE((*dev)->ScaleGrads(clip).ok());
    REQUIRE((*dev)->AdamWStep(1e-3f, 0.1f, 0.9f, 0.999f, 1e-8f, it + 1).ok());
    REQUIRE((*dev)->DownloadParameters().ok());
    if (tolerance == 0.0) {
      CHECK(BitEqual(cs.params_arena(), ds.params_arena()));
    } else {
      CHECK(RelDiff(ds.params_arena(), cs.params_arena()) < tolerance);
    }
    cs.ZeroGrads();
    REQUIRE((*dev)->ZeroGrads().ok());
  }
  CHECK((*dev)->num_slots() == 2);  // two micro-batches were in flight
}

TEST_CASE("device stage on CPU kernels equals GptStage bit for bit", "[device]") {
  SECTION("LayerNorm, GELU, learned positions, biases, tied, dropout, documents") {
    RunAndCompare(TinyConfig(), kernels::Precision::kFp32, false, 0.0);
  }
  SECTION("RMSNorm, SwiGLU, RoPE, GQA, no biases, untied") {
    RunAndCompare(RopeConfig(), kernels::Precision::kFp32, false, 0.0);
  }
  SECTION("q/k layernorms and zero-centred norm weights, LayerNorm and RMSNorm") {
    GptConfig ln = TinyConfig();
    ln.qk_layernorm = true;
    ln.apply_layernorm_1p = true;
    RunAndCompare(ln, kernels::Precision::kFp32, false, 0.0);
    GptConfig rms = RopeConfig();
    rms.qk_layernorm = true;
    rms.apply_layernorm_1p = true;
    RunAndCompare(rms, kernels::Precision::kFp32, false, 0.0);
  }
  SECTION("selective recomputation (LayerNorm/GELU/dropout/documents and RMSNorm/SwiGLU/RoPE)") {
    for (GptConfig c : {TinyConfig(), RopeConfig()}) {
      c.recompute_granularity = RecomputeGranularity::kSelective;
      RunAndCompare(c, kernels::Precision::kFp32, false, 0.0);
    }
  }
  SECTION("full recomputation, uniform and block (LayerNorm/GELU/dropout and RMSNorm/SwiGLU)") {
    // Recomputing a chunk in B runs the same F kernels on the same inputs and dropout keys:
    // the same bits, as on the CPU backend (gpt_stage_test.cc).
    for (GptConfig c : {TinyConfig(), RopeConfig()}) {
      c.recompute_granularity = RecomputeGranularity::kFull;
      c.recompute_method = RecomputeMethod::kUniform;
      c.recompute_num_layers = 2;
      RunAndCompare(c, kernels::Precision::kFp32, false, 0.0);
      c.recompute_method = RecomputeMethod::kBlock;
      c.recompute_num_layers = 1;
      RunAndCompare(c, kernels::Precision::kFp32, false, 0.0);
    }
  }
  SECTION("Llama-3 RoPE scaling, interleaved pairs, position interpolation") {
    GptConfig c = RopeConfig();
    c.rope_scaling = true;
    c.rope_scaling_factor = 8.0f;
    c.rotary_seq_len_interpolation_factor = 2.0f;
    c.rotary_interleaved = true;
    RunAndCompare(c, kernels::Precision::kFp32, false, 0.0);
  }
  SECTION("bf16 GEMM inputs") {
    GptConfig c = TinyConfig();
    c.gelu_tanh_approximation = true;
    RunAndCompare(c, kernels::Precision::kBf16, false, 0.0);
  }
}

TEST_CASE("selective recomputation: slots keep no attention probabilities", "[device]") {
  // Each slot of a stage without recomputation holds [b, np, s, s] probabilities per layer;
  // with selective recomputation every slot shares one buffer, so a slot is smaller by
  // layers x b np s^2 floats (rounded to the 256-byte carving).
  GptConfig c = TinyConfig();
  const StageLayout layout{0, c.num_layers, true, true};
  kernels::ExecContext ctx;
  EmulatedDeviceKernels kernels(ctx);
  DeviceStageOptions opts;
  opts.micro_batch_size = 2;
  auto plain = GptStage::CreateOnDevice(c, layout, &kernels, opts);
  REQUIRE(plain.ok());
  c.recompute_granularity = RecomputeGranularity::kSelective;
  auto selective = GptStage::CreateOnDevice(c, layout, &kernels, opts);
  REQUIRE(selective.ok());
  const Batch bt = MakeBatch(c, 7);
  StageOutput out;
  REQUIRE((*plain)->Forward(Input(bt, 0, 0, nullptr), &out).ok());
  REQUIRE((*selective)->Forward(Input(bt, 0, 0, nullptr), &out).ok());
  const int64_t probs = 2 * c.num_attention_heads * c.seq_length * c.seq_length;
  const int64_t saved = (*plain)->slot_bytes() - (*selective)->slot_bytes();
  CHECK(saved >= 4 * c.num_layers * probs);
  CHECK(saved < 4 * c.num_layers * (probs + 64));
}

TEST_CASE("W out of forward order (the dynamic pipeline) equals the CPU stage", "[device]") {
  // F0 F1 F2 B0 B1 B2 W2 W0 W1: W2 goes to its slot's pending buffer, W0 and W1 are added
  // directly, and W1 then retires the pending W2 — the arena sums g0, g1, g2 in forward
  // order on both backends with the same elementwise adds, so the gradients agree in every
  // bit (a pending buffer not zeroed, or added twice or never, would not).
  for (const GptConfig& c : {TinyConfig(), RopeConfig()}) {
    const StageLayout layout{0, c.num_layers, true, true};
    auto cpu = GptStage::Create(c, layout);
    REQUIRE(cpu.ok());
    (*cpu)->InitializeParameters();
    kernels::ExecContext ctx;
    EmulatedDeviceKernels kernels(ctx);
    DeviceStageOptions opts;
    opts.micro_batch_size = 2;
    auto dev = GptStage::CreateOnDevice(c, layout, &kernels, opts);
    REQUIRE(dev.ok());
    std::vector<Batch> batches;
    for (int m = 0; m < 3; ++m) batches.push_back(MakeBatch(c, 40 + m));
    for (GptStage* s : {cpu->get(), dev->get()}) {
      StageOutput out;
      for (int m = 0; m < 3; ++m) REQUIRE(s->Forward(Input(batches[m], m, 0, nullptr), &out).ok());
      std::vector<float> unused;
      for (int m = 0; m < 3; ++m) REQUIRE(s->BackwardInput(m, {}, 0.01f, &unused).ok());
      for (int m : {2, 0, 1}) REQUIRE(s->BackwardWeight(m).ok());
    }
    REQUIRE((*dev)->DownloadGradients().ok());
    CHECK(BitEqual((*cpu)->parameters().grads_arena(), (*dev)->parameters().grads_arena()));
    CHECK((*dev)->num_slots() == 3);
  }
}

TEST_CASE("a memory cap on a device stage caps its slots", "[device]") {
  GptConfig c = TinyConfig();
  const StageLayout layout{0, c.num_layers, true, true};
  kernels::ExecContext ctx;
  EmulatedDeviceKernels kernels(ctx);
  DeviceStageOptions opts;
  opts.micro_batch_size = 2;
  auto dev = GptStage::CreateOnDevice(c, layout, &kernels, opts);
  REQUIRE(dev.ok());
  const Batch bt = MakeBatch(c, 5);
  StageOutput out;
  REQUIRE((*dev)->Forward(Input(bt, 0, 0, nullptr), &out).ok());
  const int64_t slot = (*dev)->slot_bytes();
  (*dev)->SetMemoryCap(2 * slot, "rank 0");
  REQUIRE((*dev)->Forward(Input(bt, 1, 0, nullptr), &out).ok());  // two slots fit
  const absl::Status third = (*dev)->Forward(Input(bt, 2, 0, nullptr), &out);
  CHECK(third.code() == absl::StatusCode::kResourceExhausted);
  INFO(third.message());
  CHECK(std::string(third.message())
            .find("out of memory: shard rank 0: allocating " + std::to_string(slot) +
                  " bytes for the slot of "
                  "micro-batch 2") != std::string::npos);
  CHECK((*dev)->num_slots() == 2);
}

TEST_CASE("gradient accumulation fusion stays within fp32 rounding", "[device]") {
  // Each fused element differs from GptStage's by the rounding of one addition per
  // micro-batch (two here), relative 2^-24 each; the norm-wise bound 1e-5 leaves room for
  // AdamW's division amplifying it on tiny second moments.
  RunAndCompare(RopeConfig(), kernels::Precision::kFp32, true, 1e-5);
}

TEST_CASE("a two-stage pipeline equals GptStage's two stages", "[device]") {
  const GptConfig c = RopeConfig();
  const StageLayout first{0, 1, true, false}, last{1, c.num_layers, false, true};
  kernels::ExecContext ctx;
  EmulatedDeviceKernels kernels(ctx);
  DeviceStageOptions opts;
  opts.micro_batch_size = 2;
  auto c0 = GptStage::Create(c, first);
  auto c1 = GptStage::Create(c, last);
  auto d0 = GptStage::CreateOnDevice(c, first, &kernels, opts);
  auto d1 = GptStage::CreateOnDevice(c, last, &kernels, opts);
  REQUIRE((c0.ok() && c1.ok() && d0.ok() && d1.ok()));
  (*c0)->InitializeParameters();
  (*c1)->InitializeParameters();
  const Batch bt = MakeBatch(c, 7);
  StageOutput co0, co1;
  StageOutput do0, do1;
  REQUIRE((*c0)->Forward(Input(bt, 0, 0, nullptr), &co0).ok());
  REQUIRE((*d0)->Forward(Input(bt, 0, 0, nullptr), &do0).ok());
  REQUIRE(BitEqual(co0.hidden, do0.hidden));
  REQUIRE((*c1)->Forward(Input(bt, 0, 0, &co0.hidden), &co1).ok());
  REQUIRE((*d1)->Forward(Input(bt, 0, 0, &do0.hidden), &do1).ok());
  CHECK(co1.loss_sum == do1.loss_sum);
  std::vector<float> cg, dg, unused;
  REQUIRE((*c1)->BackwardInput(0, {}, 0.01f, &cg).ok());
  REQUIRE((*d1)->BackwardInput(0, {}, 0.01f, &dg).ok());
  REQUIRE(BitEqual(cg, dg));
  REQUIRE((*c0)->BackwardInput(0, cg, 1.0f, &unused).ok());
  REQUIRE((*d0)->BackwardInput(0, dg, 1.0f, &unused).ok());
  CHECK(unused.empty());
  for (auto* s : {c0->get(), c1->get()}) REQUIRE(s->BackwardWeight(0).ok());
  for (auto* s : {d0->get(), d1->get()}) {
    REQUIRE(s->BackwardWeight(0).ok());
    REQUIRE(s->DownloadGradients().ok());
  }
  CHECK(BitEqual((*c0)->parameters().grads_arena(), (*d0)->parameters().grads_arena()));
  CHECK(BitEqual((*c1)->parameters().grads_arena(), (*d1)->parameters().grads_arena()));
}

TEST_CASE("device stage: evaluation, segments, slots and errors", "[device]") {
  GptConfig c = RopeConfig();
  kernels::ExecContext ctx;
  EmulatedDeviceKernels kernels(ctx);
  DeviceStageOptions opts;
  opts.micro_batch_size = 2;
  auto dev = GptStage::CreateOnDevice(c, StageLayout{0, c.num_layers, true, true}, &kernels, opts);
  REQUIRE(dev.ok());
  std::vector<std::string> keys;
  (*dev)->set_segment_runner([&](const SegmentInfo& info, const Segment& segment) {
    keys.push_back(info.ToString());
    return segment();
  });
  const Batch bt = MakeBatch(c, 3);
  StageOutput out;
  // Eval frees its slot at once; three training micro-batches in flight take three slots.
  REQUIRE((*dev)->EvalForward(Input(bt, 50, 0, nullptr), &out).ok());
  for (int64_t id = 0; id < 3; ++id) {
    REQUIRE((*dev)->Forward(Input(bt, id, 0, nullptr), &out).ok());
  }
  CHECK((*dev)->num_slots() == 3);
  CHECK(keys.front() == "eval-F/slot0/b2/s12/doc");
  CHECK(keys.back() == "F/slot2/b2/s12/doc");
  // The same micro-batch twice (AlreadyExists, as on the CPU backend), W before B; a W
  // out of forward order is its own segment (into the slot's pending buffer).
  CHECK((*dev)->Forward(Input(bt, 1, 0, nullptr), &out).code() ==
        absl::StatusCode::kAlreadyExists);
  CHECK((*dev)->BackwardWeight(0).code() == absl::StatusCode::kFailedPrecondition);
  std::vector<float> unused;
  REQUIRE((*dev)->BackwardInput(1, {}, 1.0f, &unused).ok());
  REQUIRE((*dev)->BackwardWeight(1).ok());
  CHECK(keys.back() == "W-pending/slot1/b2/s12/doc");
  // Bad input: a token out of range, a shape beyond the slot.
  Batch bad = bt;
  bad.tokens[5] = static_cast<int32_t>(c.vocab_size);
  const absl::Status bad_token = (*dev)->Forward(Input(bad, 9, 0, nullptr), &out);
  CHECK(bad_token.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(bad_token.message()).find("tokens[5] = 90") != std::string::npos);
  Batch big = bt;
  big.b = 3;
  CHECK((*dev)->Forward(Input(big, 10, 0, nullptr), &out).code() ==
        absl::StatusCode::kInvalidArgument);
  // Refused configurations name their flag.
  GptConfig moe = c;
  auto moe_config = std::make_shared<moe::MoELayerConfig>();
  moe_config->router.hidden_size = c.hidden_size;
  moe_config->router.num_experts = 4;
  moe_config->router.topk = 2;
  moe_config->expert.hidden_size = c.hidden_size;
  moe_config->expert.ffn_hidden_size = 40;
  moe_config->num_layers = c.num_layers;
  moe.moe = moe_config;
  moe.moe_layers.assign(static_cast<size_t>(c.num_layers), true);
  auto refused =
      GptStage::CreateOnDevice(moe, StageLayout{0, c.num_layers, true, true}, &kernels, opts);
  CHECK(std::string(refused.status().message()).find("--num-experts") != std::string::npos);
  DeviceStageOptions fused = opts;
  fused.fused_attention = true;
  CHECK(GptStage::CreateOnDevice(c, StageLayout{0, c.num_layers, true, true}, &kernels, fused)
            .status()
            .code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mxmaca::layers::device
