// layers/moe/token_permutation.cc: index maps and row gathers / combines.
#include "layers/moe/token_permutation.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace mxmaca::layers::moe {

absl::StatusOr<PermutationPlan> MakePermutationPlan(const uint8_t* routing_map, const float* probs,
                                                    int64_t num_tokens, int64_t num_experts) {
  if (num_tokens < 0 || num_experts < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("MoE permute: bad shape [", num_tokens, ", ", num_experts, "]"));
  }
  const int64_t t = num_tokens, e = num_experts;
  PermutationPlan plan;
  plan.num_tokens = t;
  plan.num_experts = e;
  plan.tokens_per_expert.assign(e, 0);
  std::vector<int64_t> per_token(t, 0);
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t x = 0; x < e; ++x) {
      const uint8_t m = routing_map[r * e + x];
      if (m > 1) {
        return absl::InvalidArgumentError(absl::StrCat("MoE permute: routing_map[", r, ", ", x,
                                                       "] = ", int{m}, ", expected 0 or 1"));
      }
      plan.tokens_per_expert[x] += m;
      per_token[r] += m;
    }
  }
  plan.expert_offsets.assign(e + 1, 0);
  for (int64_t x = 0; x < e; ++x) {
    plan.expert_offsets[x + 1] = plan.expert_offsets[x] + plan.tokens_per_expert[x];
  }
  const int64_t rows = plan.expert_offsets[e];
  plan.row_token.resize(rows);
  plan.row_expert.resize(rows);
  plan.row_prob.resize(rows);
  std::vector<int64_t> next(plan.expert_offsets.begin(), plan.expert_offsets.end() - 1);
  // Expert-major, ascending token within an expert.
  for (int64_t x = 0; x < e; ++x) {
    for (int64_t r = 0; r < t; ++r) {
      if (!routing_map[r * e + x]) continue;
      const int64_t row = next[x]++;
      plan.row_token[row] = static_cast<int32_t>(r);
      plan.row_expert[row] = static_cast<int32_t>(x);
      plan.row_prob[row] = probs[r * e + x];
    }
  }
  plan.token_row_offsets.assign(t + 1, 0);
  for (int64_t r = 0; r < t; ++r)
    plan.token_row_offsets[r + 1] = plan.token_row_offsets[r] + per_token[r];
  plan.token_rows.resize(rows);
  std::vector<int64_t> fill(plan.token_row_offsets.begin(), plan.token_row_offsets.end() - 1);
  // Rows are visited in ascending row order = ascending expert for each token.
  for (int64_t row = 0; row < rows; ++row) {
    plan.token_rows[fill[plan.row_token[row]]++] = static_cast<int32_t>(row);
  }
  return plan;
}

void Permute(const PermutationPlan& plan, const float* x, int64_t hidden, float* out) {
  const int64_t rows = plan.num_rows();
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(out + r * hidden, x + int64_t{plan.row_token[r]} * hidden, sizeof(float) * hidden);
  }
}

void PermuteBackward(const PermutationPlan& plan, const float* d_out, int64_t hidden, float* dx) {
  for (int64_t t = 0; t < plan.num_tokens; ++t) {
    float* o = dx + t * hidden;
    std::fill(o, o + hidden, 0.0f);
    for (int64_t i = plan.token_row_offsets[t]; i < plan.token_row_offsets[t + 1]; ++i) {
      const float* src = d_out + int64_t{plan.token_rows[i]} * hidden;
      for (int64_t j = 0; j < hidden; ++j) o[j] += src[j];
    }
  }
}

void Unpermute(const PermutationPlan& plan, const float* y, int64_t hidden, float* out) {
  for (int64_t t = 0; t < plan.num_tokens; ++t) {
    float* o = out + t * hidden;
    std::fill(o, o + hidden, 0.0f);
    for (int64_t i = plan.token_row_offsets[t]; i < plan.token_row_offsets[t + 1]; ++i) {
      const int64_t row = plan.token_rows[i];
      const float p = plan.row_prob[row];
      const float* src = y + row * hidden;
      for (int64_t j = 0; j < hidden; ++j) o[j] += p * src[j];
    }
  }
}

void UnpermuteBackward(const PermutationPlan& plan, const float* y, const float* d_out,
                       int64_t hidden, float* dy, float* d_probs) {
  const int64_t e = plan.num_experts;
  std::fill(d_probs, d_probs + plan.num_tokens * e, 0.0f);
  const int64_t rows = plan.num_rows();
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t t = plan.row_token[row];
    const float p = plan.row_prob[row];
    const float* g = d_out + t * hidden;
    const float* src = y + row * hidden;
    float* d = dy + row * hidden;
    double dot = 0.0;
    for (int64_t j = 0; j < hidden; ++j) {
      d[j] = p * g[j];
      dot += static_cast<double>(src[j]) * g[j];
    }
    d_probs[t * e + plan.row_expert[row]] = static_cast<float>(dot);
  }
}

}  // namespace mxmaca::layers::moe
