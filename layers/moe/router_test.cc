// Unit tests of the router's discrete rules (ties, capacity, expert bias, validation).
// Logits are made exact by x = the wanted logits and W = I (products with 1 and 0 are
// exact in fp32). The formulas' numerics are checked against PyTorch in moe_parity_test.
#include "layers/moe/router.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace mxmaca::layers::moe {
namespace {

RouterConfig Config(int64_t e, int64_t k) {
  RouterConfig c;
  c.hidden_size = e;
  c.num_experts = e;
  c.topk = k;
  c.load_balancing_type = LoadBalancingType::kNone;
  return c;
}

std::vector<float> Identity(int64_t e) {
  std::vector<float> w(e * e, 0.0f);
  for (int64_t i = 0; i < e; ++i) w[i * e + i] = 1.0f;
  return w;
}

RouterState Route(const RouterConfig& c, const std::vector<float>& logits,
                  const float* expert_bias = nullptr, bool training = true) {
  RouterCall call;
  call.num_tokens = static_cast<int64_t>(logits.size()) / c.num_experts;
  call.seq_length = call.num_tokens;
  call.training = training;
  call.expert_bias = expert_bias;
  RouterState st;
  const std::vector<float> w = Identity(c.num_experts);
  REQUIRE(RouterForward(kernels::ExecContext{}, c, call, logits.data(), w.data(), &st).ok());
  return st;
}

TEST_CASE("TopKIndices breaks ties toward the lower index") {
  const std::vector<float> v = {1.0f, 3.0f, 3.0f, -INFINITY, 3.0f, 2.0f};
  std::vector<int32_t> out(4);
  TopKIndices(v.data(), 6, 4, out.data());
  CHECK(out == std::vector<int32_t>{1, 2, 4, 5});
  const std::vector<float> zeros = {0.0f, -0.0f, 0.0f};
  std::vector<int32_t> two(2);
  TopKIndices(zeros.data(), 3, 2, two.data());
  CHECK(two == std::vector<int32_t>{0, 1});  // -0.0 == 0.0
}

TEST_CASE("GetCapacity is Megatron's ceil(tokens / experts * factor)") {
  CHECK(GetCapacity(48, 6, 1.0) == 8);
  CHECK(GetCapacity(10, 3, 1.0) == 4);
  CHECK(GetCapacity(10, 4, 1.5) == 4);  // ceil(3.75)
}

TEST_CASE("softmax top-2 with tied logits picks the lower experts") {
  const RouterConfig c = Config(5, 2);
  const RouterState st = Route(c, {0.5f, 1.0f, 1.0f, 1.0f, 0.0f});
  CHECK(st.top_indices == std::vector<int32_t>{1, 2});
  CHECK(st.routing_map == std::vector<uint8_t>{0, 1, 1, 0, 0});
  CHECK(st.probs[1] == 0.5f);  // softmax over two equal logits
  CHECK(st.probs[2] == 0.5f);
}

TEST_CASE("expert bias changes the selection, not the probs") {
  RouterConfig c = Config(2, 1);
  c.score_function = ScoreFunction::kSigmoid;
  c.enable_expert_bias = true;
  const std::vector<float> bias = {0.2f, 0.0f};
  const RouterState st = Route(c, {0.0f, 0.1f}, bias.data());
  CHECK(st.top_indices[0] == 0);
  CHECK(st.probs[0] == 0.5f);  // sigmoid(0), bias not added
  CHECK(st.probs[1] == 0.0f);
}

TEST_CASE("capacity: probs policy keeps the best, ties to the lower token") {
  // 4 tokens, 2 experts, top-1; capacity = ceil(4 / 2 * 0.5) = 1.
  RouterConfig c = Config(2, 1);
  c.capacity_factor = 0.5;
  c.pre_softmax = true;  // (post-softmax top-1 probs would all be 1)
  // Token probs for expert 0: tokens 1 and 2 tie with the highest prob.
  const RouterState st = Route(c, {1.0f, 0.0f, 2.0f, 0.0f, 2.0f, 0.0f, 0.0f, 3.0f});
  CHECK(st.capacity == 1);
  CHECK(st.routing_map == std::vector<uint8_t>{0, 0, 1, 0, 0, 0, 0, 1});
  CHECK(st.dropped_tokens == 2);
  CHECK(st.tokens_per_expert == std::vector<int64_t>{1, 1});
  CHECK(st.routed_tokens_per_expert == std::vector<int64_t>{3, 1});
  CHECK(st.probs[0] == 0.0f);  // dropped token's prob cleared
}

TEST_CASE("capacity: position policy keeps the earliest tokens; padding fills to capacity") {
  RouterConfig c = Config(2, 1);
  c.capacity_factor = 1.0;  // capacity 2 of 4 tokens
  c.drop_policy = TokenDropPolicy::kPosition;
  const std::vector<float> logits = {1.0f, 0.0f, 3.0f, 0.0f, 2.0f, 0.0f, 0.0f, 3.0f};
  const RouterState dropped = Route(c, logits);
  CHECK(dropped.routing_map == std::vector<uint8_t>{1, 0, 1, 0, 0, 0, 0, 1});
  c.pad_to_capacity = true;
  const RouterState padded = Route(c, logits);
  // Expert 1 had one routed token (3); padding adds the lowest unrouted token (0).
  CHECK(padded.routing_map == std::vector<uint8_t>{1, 1, 1, 0, 0, 0, 0, 1});
  CHECK(padded.tokens_per_expert == std::vector<int64_t>{2, 2});
  CHECK(padded.probs[1] == 0.0f);  // a padding row carries prob 0
}

TEST_CASE("group-limited top-k keeps experts inside the best groups") {
  RouterConfig c = Config(4, 2);
  c.num_groups = 2;
  c.group_topk = 1;
  // Group 0 = {0, 1} sums top-2 to 1.9, group 1 = {2, 3} to 1.5: expert 2 (0.9) loses to 1.
  const RouterState st = Route(c, {1.0f, 0.9f, 0.95f, 0.55f});
  CHECK(st.top_indices == std::vector<int32_t>{0, 1});
}

TEST_CASE("min_topk_margin: the smallest gap by which a top-k choice cleared a tie") {
  // Selection on logits: token 0 clears 0.25 (0.5 vs 0.25), token 1 0.875 (1.875 vs 1).
  RouterConfig c = Config(4, 2);
  const std::vector<float> logits = {1.0f, 0.5f, 0.25f, 0.0f, 0.0f, 2.0f, 1.875f, 1.0f};
  CHECK(Route(c, logits).min_topk_margin == 0.25f);
  // Nothing left out: no tie to be near.
  CHECK(std::isinf(Route(Config(2, 2), {0.0f, 0.0f}).min_topk_margin));
  // With the aux loss, its own top-k on softmax scores counts too: token 0's scores clear
  // (e^0.5 - e^0.25) / Z, smaller than any logit gap (fp32 softmax: ~1e-7 relative).
  c.load_balancing_type = LoadBalancingType::kAuxLoss;
  c.aux_loss_coeff = 1e-2;
  const double z = std::exp(1.0) + std::exp(0.5) + std::exp(0.25) + 1.0;
  CHECK(Route(c, logits).min_topk_margin ==
        Approx((std::exp(0.5) - std::exp(0.25)) / z).epsilon(1e-5));
  // Capacity with the probs policy: expert 0's routed probs of tokens 1 and 2 tie (the
  // capacity case above), margin 0; the position policy ranks exact 0/1 values, so only
  // the selection counts (logit gaps 1, 3, 2, 3).
  RouterConfig cap = Config(2, 1);
  cap.capacity_factor = 0.5;
  cap.pre_softmax = true;
  CHECK(Route(cap, {1.0f, 0.0f, 2.0f, 0.0f, 2.0f, 0.0f, 0.0f, 3.0f}).min_topk_margin == 0.0f);
  RouterConfig pos = Config(2, 1);
  pos.capacity_factor = 1.0;
  pos.drop_policy = TokenDropPolicy::kPosition;
  CHECK(Route(pos, {1.0f, 0.0f, 3.0f, 0.0f, 2.0f, 0.0f, 0.0f, 3.0f}).min_topk_margin == 1.0f);
  // Group-limited: the group choice (sums 1.9 vs 1.5) is the closest; the experts left out
  // of the kept group are masked.
  RouterConfig g = Config(4, 2);
  g.num_groups = 2;
  g.group_topk = 1;
  CHECK(Route(g, {1.0f, 0.9f, 0.95f, 0.55f}).min_topk_margin == (1.0f + 0.9f) - (0.95f + 0.55f));
}

TEST_CASE("z loss and aux loss values") {
  RouterConfig c = Config(2, 1);
  c.z_loss_coeff = 0.5;
  c.load_balancing_type = LoadBalancingType::kAuxLoss;
  c.aux_loss_coeff = 1.0;
  const RouterState st = Route(c, {0.0f, 0.0f, 0.0f, 0.0f});
  // logsumexp = log 2 for both tokens: z = 0.5 * log(2)^2.
  CHECK(st.z_loss == Approx(0.5 * std::log(2.0) * std::log(2.0)).epsilon(1e-12));
  // Both tokens choose expert 0 (tie): tpe = {2, 0}; scores 0.5 each: P = {1, 1};
  // aux = E * coeff / (k T^2) * sum P tpe = 2 / 4 * 2 = 1.
  CHECK(st.aux_loss == Approx(1.0).epsilon(1e-12));
  const RouterState eval = Route(c, {0.0f, 0.0f, 0.0f, 0.0f}, nullptr, /*training=*/false);
  CHECK(eval.aux_loss == 0.0);
  CHECK(eval.z_loss == 0.0);
}

TEST_CASE("sinkhorn routes by the balanced cost in training, by the activation in eval") {
  RouterConfig c = Config(2, 1);
  c.load_balancing_type = LoadBalancingType::kSinkhorn;
  // Both tokens prefer expert 0; sinkhorn balances: the token with the smaller margin
  // (token 1) moves to expert 1. Probs are sigmoid(logit) at the chosen expert.
  const std::vector<float> logits = {2.0f, 0.0f, 1.0f, 0.5f};
  const RouterState train = Route(c, logits);
  CHECK(train.top_indices == std::vector<int32_t>{0, 1});
  CHECK(train.probs[3] == Approx(1.0 / (1.0 + std::exp(-0.5))).epsilon(1e-6));
  const RouterState eval = Route(c, logits, nullptr, /*training=*/false);
  CHECK(eval.top_indices == std::vector<int32_t>{0, 0});
}

TEST_CASE("UpdateExpertBias moves toward the mean by the rate") {
  const std::vector<float> tpe = {1.0f, 5.0f, 3.0f};
  std::vector<float> bias = {0.0f, 0.0f, 0.5f};
  UpdateExpertBias(tpe.data(), 3, 0.25, bias.data());
  CHECK(bias == std::vector<float>{0.25f, -0.25f, 0.5f});
}

TEST_CASE("RouterForward rejects non-finite logits") {
  const RouterConfig c = Config(2, 1);
  RouterCall call;
  call.num_tokens = 1;
  const std::vector<float> x = {NAN, 0.0f}, w = Identity(2);
  RouterState st;
  const absl::Status s = RouterForward(kernels::ExecContext{}, c, call, x.data(), w.data(), &st);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message().find("token 0, expert 0") != std::string::npos);
}

TEST_CASE("ValidateRouterConfig names the offending flag") {
  auto message = [](const RouterConfig& c) {
    return std::string(ValidateRouterConfig(c).message());
  };
  RouterConfig c = Config(4, 5);
  CHECK(message(c).find("--moe-router-topk") != std::string::npos);
  c = Config(6, 2);
  c.num_groups = 4;
  c.group_topk = 1;
  CHECK(message(c).find("not divisible by --moe-router-num-groups") != std::string::npos);
  c = Config(4, 2);
  c.score_function = ScoreFunction::kSigmoid;
  c.pre_softmax = true;
  CHECK(message(c).find("--moe-router-pre-softmax") != std::string::npos);
  c = Config(4, 2);
  c.enable_expert_bias = true;
  CHECK(message(c).find("--moe-router-enable-expert-bias") != std::string::npos);
  c = Config(4, 2);
  c.load_balancing_type = LoadBalancingType::kSinkhorn;
  c.aux_loss_coeff = 0.01;
  CHECK(message(c).find("sinkhorn") != std::string::npos);
  c = Config(4, 2);
  c.pad_to_capacity = true;
  CHECK(message(c).find("--moe-expert-capacity-factor") != std::string::npos);
  CHECK(ValidateRouterConfig(Config(4, 2)).ok());
}

}  // namespace
}  // namespace mxmaca::layers::moe
