// Unit tests of the local permutation: order, combine order, and backward.
#include "layers/moe/token_permutation.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

namespace mxmaca::layers::moe {
namespace {

// 4 tokens, 3 experts: t0 -> {0, 2}, t1 -> {1}, t2 -> {0, 1}, t3 -> {}.
const std::vector<uint8_t> kMap = {1, 0, 1, 0, 1, 0, 1, 1, 0, 0, 0, 0};
const std::vector<float> kProbs = {0.25f, 0, 0.75f, 0, 1.0f, 0, 0.5f, 0.5f, 0, 0, 0, 0};

TEST_CASE("permutation plan: expert-major rows, ascending tokens within an expert") {
  absl::StatusOr<PermutationPlan> plan = MakePermutationPlan(kMap.data(), kProbs.data(), 4, 3);
  REQUIRE(plan.ok());
  CHECK(plan->tokens_per_expert == std::vector<int64_t>{2, 2, 1});
  CHECK(plan->expert_offsets == std::vector<int64_t>{0, 2, 4, 5});
  CHECK(plan->row_token == std::vector<int32_t>{0, 2, 1, 2, 0});
  CHECK(plan->row_prob == std::vector<float>{0.25f, 0.5f, 1.0f, 0.5f, 0.75f});
  // token 0's rows: expert 0 (row 0) then expert 2 (row 4); token 3 has none.
  CHECK(plan->token_row_offsets == std::vector<int64_t>{0, 2, 3, 5, 5});
  CHECK(plan->token_rows == std::vector<int32_t>{0, 4, 2, 1, 3});
}

TEST_CASE("permute, unpermute and their backward") {
  const PermutationPlan plan = *MakePermutationPlan(kMap.data(), kProbs.data(), 4, 3);
  const int64_t h = 2;
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> xp(5 * h);
  Permute(plan, x.data(), h, xp.data());
  CHECK(xp == std::vector<float>{1, 2, 5, 6, 3, 4, 5, 6, 1, 2});
  // Experts as identity: unpermute gives sum_e p x.
  std::vector<float> y(4 * h);
  Unpermute(plan, xp.data(), h, y.data());
  CHECK(y == std::vector<float>{1, 2, 3, 4, 5, 6, 0, 0});  // probs of tokens 0..2 sum to 1
  const std::vector<float> dout = {1, -1, 2, 0, 0.5f, 4, 9, 9};
  std::vector<float> dyp(5 * h), dprobs(12, -1.0f);
  UnpermuteBackward(plan, xp.data(), dout.data(), h, dyp.data(), dprobs.data());
  CHECK(dyp == std::vector<float>{0.25f, -0.25f, 0.25f, 2, 2, 0, 0.25f, 2, 0.75f, -0.75f});
  // d p[t, e] = <y_row, dout_t>: t0: <(1,2),(1,-1)> = -1 for e0 and e2.
  CHECK(dprobs == std::vector<float>{-1, 0, -1, 0, 6, 0, 26.5f, 26.5f, 0, 0, 0, 0});
  std::vector<float> dx(4 * h, -1.0f);
  PermuteBackward(plan, dyp.data(), h, dx.data());
  CHECK(dx == std::vector<float>{1, -1, 2, 0, 0.5f, 4, 0, 0});
}

TEST_CASE("unpermute adds a token's rows in ascending expert order from 0") {
  // One token on all three experts with prob 1: rows 1e8, -1e8, 1 give exactly 1 only in
  // the order ((0 + 1e8) - 1e8) + 1 (1e8 + 1 rounds to 1e8 in fp32).
  const std::vector<uint8_t> map = {1, 1, 1};
  const std::vector<float> probs = {1, 1, 1};
  const PermutationPlan plan = *MakePermutationPlan(map.data(), probs.data(), 1, 3);
  const std::vector<float> rows = {1e8f, -1e8f, 1.0f};
  float out = 0.0f;
  Unpermute(plan, rows.data(), 1, &out);
  CHECK(out == 1.0f);
}

TEST_CASE("MakePermutationPlan rejects a map byte other than 0/1") {
  const std::vector<uint8_t> map = {0, 2};
  const std::vector<float> probs = {0, 0};
  const absl::StatusOr<PermutationPlan> plan = MakePermutationPlan(map.data(), probs.data(), 1, 2);
  CHECK(plan.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(plan.status().message().find("routing_map[0, 1] = 2") != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::layers::moe
