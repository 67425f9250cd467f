// Unit tests of MoELayer: parameter names, binding errors, batch invariance of a token's
// output (dropless), metrics under skewed routing, expert-bias bookkeeping.
// Numerical parity with PyTorch: moe_parity_test.
#include "layers/moe/moe_layer.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace mxmaca::layers::moe {
namespace {

MoELayerConfig Config() {
  MoELayerConfig c;
  c.router.hidden_size = 16;
  c.router.num_experts = 4;
  c.router.topk = 2;
  c.router.aux_loss_coeff = 0.01;
  c.expert.hidden_size = 16;
  c.expert.ffn_hidden_size = 32;
  c.expert.add_bias = true;
  c.shared_expert_ffn_hidden_size = 8;
  c.init_method_std = 0.3;
  return c;
}

TEST_CASE("parameters are registered under Megatron's TEGroupedMLP names") {
  ParameterStore store;
  REQUIRE(RegisterMoEParameters(Config(), 5, &store).ok());
  for (const char* name :
       {"decoder.layers.5.mlp.router.weight", "decoder.layers.5.mlp.experts.linear_fc1.weight0",
        "decoder.layers.5.mlp.experts.linear_fc1.bias3",
        "decoder.layers.5.mlp.experts.linear_fc2.weight3",
        "decoder.layers.5.mlp.experts.linear_fc2.bias0",
        "decoder.layers.5.mlp.shared_experts.linear_fc1.weight",
        "decoder.layers.5.mlp.shared_experts.linear_fc2.bias"}) {
    INFO(name);
    CHECK(store.Index(name).ok());
  }
  // router + 4 experts x 4 tensors + shared 4 tensors.
  CHECK(store.size() == 1 + 16 + 4);
  const ParameterInfo& fc2 =
      store.info(*store.Index("decoder.layers.5.mlp.experts.linear_fc2.weight1"));
  CHECK(fc2.spec.shape == std::vector<int64_t>{16, 32});
  CHECK(fc2.spec.init_std == Approx(0.3 / std::sqrt(2.0)));  // num_layers = 1
}

TEST_CASE("MoELayer::Create errors") {
  ParameterStore store;
  REQUIRE(RegisterMoEParameters(Config(), 0, &store).ok());
  CHECK(MoELayer::Create(Config(), 0, &store).status().code() ==
        absl::StatusCode::kInvalidArgument);  // not finalized
  store.Finalize();
  CHECK(MoELayer::Create(Config(), 1, &store).status().code() == absl::StatusCode::kNotFound);
  MoELayerConfig bad = Config();
  bad.router.topk = 5;
  CHECK(!MoELayer::Create(bad, 0, &store).ok());
  CHECK(MoELayer::Create(Config(), 0, &store).ok());
}

// Runs the layer on `t` tokens whose row `at` is `token`, the rest random; returns row `at`.
std::vector<float> TokenOutput(MoELayer& layer, const std::vector<float>& token, int64_t t,
                               int64_t at, std::mt19937& gen) {
  const int64_t h = 16;
  std::normal_distribution<float> normal;
  std::vector<float> x(t * h), y(t * h);
  for (float& v : x) v = normal(gen);
  std::memcpy(&x[at * h], token.data(), sizeof(float) * h);
  MoECall call;
  call.num_tokens = t;
  call.seq_length = t;
  MoEStash stash;
  REQUIRE(layer.Forward(kernels::ExecContext{}, call, x.data(), y.data(), &stash, nullptr).ok());
  return std::vector<float>(y.begin() + at * h, y.begin() + (at + 1) * h);
}

TEST_CASE("dropless: a token's output is bit-identical whatever the other tokens are") {
  ParameterStore store;
  REQUIRE(RegisterMoEParameters(Config(), 0, &store).ok());
  store.Finalize();
  store.Initialize(17);
  MoELayer layer = *MoELayer::Create(Config(), 0, &store);
  std::mt19937 gen(2);
  std::normal_distribution<float> normal;
  std::vector<float> token(16);
  for (float& v : token) v = normal(gen);
  const std::vector<float> alone = TokenOutput(layer, token, 1, 0, gen);
  for (int64_t t : {7, 64, 301}) {
    INFO("tokens " << t);
    const std::vector<float> row = TokenOutput(layer, token, t, t / 3, gen);
    CHECK(std::memcmp(row.data(), alone.data(), sizeof(float) * 16) == 0);
  }
}

TEST_CASE("every token to one expert: completes, metrics show the skew and the drops") {
  MoELayerConfig c = Config();
  c.router.topk = 1;
  c.router.z_loss_coeff = 0.001;
  ParameterStore store;
  REQUIRE(RegisterMoEParameters(c, 0, &store).ok());
  store.Finalize();
  store.Initialize(3);
  float* wg = store.param(*store.Index("decoder.layers.0.mlp.router.weight"));
  for (int64_t i = 0; i < 4 * 16; ++i) wg[i] = i / 16 == 1 ? 0.5f : -0.5f;  // expert 1 wins
  const int64_t t = 40;
  std::vector<float> x(t * 16, 1.0f), y(t * 16), dx(t * 16);
  for (int64_t i = 0; i < t * 16; ++i) x[i] += 0.01f * static_cast<float>(i % 7);
  MoECall call;
  call.num_tokens = t;
  call.seq_length = t;
  for (bool capacity : {false, true}) {
    c.router.capacity_factor.reset();
    if (capacity) c.router.capacity_factor = 1.0;
    MoELayer layer = *MoELayer::Create(c, 0, &store);
    MoEStash stash;
    MoEMetrics m;
    REQUIRE(layer.Forward(kernels::ExecContext{}, call, x.data(), y.data(), &stash, &m).ok());
    REQUIRE(layer.BackwardInput(kernels::ExecContext{}, x.data(), y.data(), 1.0, &stash, dx.data()).ok());
    REQUIRE(layer.BackwardWeight(kernels::ExecContext{}, x.data(), y.data(), stash).ok());
    const int64_t kept = capacity ? 10 : 40;  // capacity = ceil(40 / 4 * 1.0)
    // At least the permuted input and expert output rows ([kept, 16] fp32 each).
    CHECK(MoEStashBytes(stash) >= 2 * kept * 16 * 4);
    CHECK(m.tokens_per_expert == std::vector<int64_t>{0, kept, 0, 0});
    CHECK(m.max_tokens_per_expert == kept);
    CHECK(m.load_imbalance == Approx(4.0));
    CHECK(m.dropped_tokens == 40 - kept);
    CHECK(m.capacity == (capacity ? 10 : -1));
    // One expert for all: f_1 = 1, P_1 = mean prob of expert 1 -> loss = E * P_1 > 1.
    CHECK(m.load_balancing_loss > 1.0);
    CHECK(m.z_loss > 0.0);
  }
}

TEST_CASE("expert bias: tokens counted in training, update moves the bias, counts reset") {
  MoELayerConfig c = Config();
  c.router.score_function = ScoreFunction::kSigmoid;
  c.router.enable_expert_bias = true;
  c.router.bias_update_rate = 0.125;
  ParameterStore store;
  REQUIRE(RegisterMoEParameters(c, 0, &store).ok());
  store.Finalize();
  store.Initialize(5);
  MoELayer layer = *MoELayer::Create(c, 0, &store);
  std::mt19937 gen(8);
  std::normal_distribution<float> normal;
  const int64_t t = 10;
  std::vector<float> x(t * 16), y(t * 16);
  for (float& v : x) v = normal(gen);
  MoECall call;
  call.num_tokens = t;
  call.seq_length = t;
  MoEStash stash;
  MoEMetrics m;
  REQUIRE(layer.Forward(kernels::ExecContext{}, call, x.data(), y.data(), &stash, &m).ok());
  call.training = false;  // evaluation does not count
  REQUIRE(layer.Forward(kernels::ExecContext{}, call, x.data(), y.data(), &stash, nullptr).ok());
  float total = 0.0f;
  for (int64_t i = 0; i < 4; ++i) {
    CHECK(layer.local_tokens_per_expert()[i] == static_cast<float>(m.tokens_per_expert[i]));
    total += layer.local_tokens_per_expert()[i];
  }
  CHECK(total == t * 2.0f);
  const std::vector<float> counts = layer.local_tokens_per_expert();
  layer.UpdateExpertBias(nullptr);
  for (int64_t i = 0; i < 4; ++i) {
    const float want = counts[i] < 5.0f ? 0.125f : (counts[i] > 5.0f ? -0.125f : 0.0f);
    CHECK(layer.expert_bias()[i] == want);
    CHECK(layer.local_tokens_per_expert()[i] == 0.0f);
  }
}

TEST_CASE("forward and backward are bit-identical for 1 and 2 threads") {
  MoELayerConfig c = Config();
  c.router.z_loss_coeff = 0.01;
  c.router.capacity_factor = 1.0;
  const int64_t t = 150, h = 16;
  std::mt19937 gen(12);
  std::normal_distribution<float> normal;
  std::vector<float> x(t * h), dy(t * h);
  for (float& v : x) v = normal(gen);
  for (float& v : dy) v = normal(gen);
  std::vector<std::vector<float>> outputs;
  for (int threads : {1, 2}) {
    ParameterStore store;
    REQUIRE(RegisterMoEParameters(c, 0, &store).ok());
    store.Finalize();
    store.Initialize(21);
    MoELayer layer = *MoELayer::Create(c, 0, &store);
    kernels::ExecContext ctx;
    ctx.num_threads = threads;
    MoECall call;
    call.num_tokens = t;
    call.seq_length = t;
    MoEStash stash;
    std::vector<float> y(t * h), dx(t * h);
    REQUIRE(layer.Forward(ctx, call, x.data(), y.data(), &stash, nullptr).ok());
    REQUIRE(layer.BackwardInput(ctx, x.data(), dy.data(), 0.5, &stash, dx.data()).ok());
    REQUIRE(layer.BackwardWeight(ctx, x.data(), dy.data(), stash).ok());
    std::vector<float> all = y;
    all.insert(all.end(), dx.begin(), dx.end());
    all.insert(all.end(), store.grads_arena().begin(), store.grads_arena().end());
    outputs.push_back(all);
  }
  REQUIRE(outputs[0].size() == outputs[1].size());
  CHECK(std::memcmp(outputs[0].data(), outputs[1].data(), sizeof(float) * outputs[0].size()) == 0);
}

}  // namespace
}  // namespace mxmaca::layers::moe
