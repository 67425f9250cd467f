// layers/moe/dispatch/dispatch_testing.cc: inputs and the direct-gather reference.
#include "layers/moe/dispatch/dispatch_testing.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace mxmaca::layers::moe::dispatch::testing {

std::vector<RankInput> MakeInputs(int ep_size, int num_experts, int64_t hidden, int64_t min_rows,
                                  int64_t max_rows, Routing routing, uint32_t seed,
                                  const std::vector<int>& empty_ranks) {
  std::mt19937 gen(seed);
  std::vector<double> weights(num_experts, 1.0);
  if (routing == Routing::kZipf) {
    std::vector<int> perm(num_experts);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), gen);
    for (int e = 0; e < num_experts; ++e) weights[e] = 1.0 / std::pow(1.0 + perm[e], 1.2);
  }
  std::discrete_distribution<int> pick(weights.begin(), weights.end());
  std::normal_distribution<float> value(0.0f, 1.0f);
  std::vector<RankInput> inputs(ep_size);
  for (int s = 0; s < ep_size; ++s) {
    RankInput& in = inputs[s];
    const bool empty = std::find(empty_ranks.begin(), empty_ranks.end(), s) != empty_ranks.end();
    in.num_rows = empty ? 0 : std::uniform_int_distribution<int64_t>(min_rows, max_rows)(gen);
    in.tokens_per_expert.assign(num_experts, 0);
    for (int64_t r = 0; r < in.num_rows; ++r) {
      int e = 0;
      switch (routing) {
        case Routing::kUniform:
          e = std::uniform_int_distribution<int>(0, num_experts - 1)(gen);
          break;
        case Routing::kZipf:
          e = pick(gen);
          break;
        case Routing::kOneExpert:
          e = 0;
          break;
        case Routing::kSparse:
          e = (gen() & 1) ? num_experts - 1 : std::min(1, num_experts - 1);
          break;
      }
      ++in.tokens_per_expert[e];
    }
    in.rows.resize(in.num_rows * hidden);
    for (float& x : in.rows) {
      const uint32_t u = gen() % 64;
      x = u == 0   ? -0.0f
          : u == 1 ? std::numeric_limits<float>::infinity()
          : u == 2 ? -std::numeric_limits<float>::infinity()
                   : value(gen);
    }
  }
  return inputs;
}

ExpectedDispatch ReferenceDispatch(const std::vector<RankInput>& inputs, int num_experts,
                                   int64_t hidden, int d) {
  const int P = static_cast<int>(inputs.size());
  const int L = num_experts / P;
  ExpectedDispatch out;
  out.tokens_per_local_expert.assign(L, 0);
  for (int l = 0; l < L; ++l) {
    const int e = d * L + l;
    for (int s = 0; s < P; ++s) {
      int64_t row = 0;  // first row of expert e in s's input
      for (int e2 = 0; e2 < e; ++e2) row += inputs[s].tokens_per_expert[e2];
      const int64_t n = inputs[s].tokens_per_expert[e];
      out.rows.insert(out.rows.end(), inputs[s].rows.begin() + row * hidden,
                      inputs[s].rows.begin() + (row + n) * hidden);
      out.tokens_per_local_expert[l] += n;
    }
  }
  return out;
}

float ExpertFn(int e, float x) {
  const float scale = static_cast<float>(e + 1);
  const float shift = 0.25f * static_cast<float>(e);
  const float y = x * scale;
  return y + shift;
}

void ApplyExperts(std::vector<float>& rows, const std::vector<int64_t>& tokens_per_local_expert,
                  int d, int64_t hidden) {
  const int L = static_cast<int>(tokens_per_local_expert.size());
  int64_t i = 0;
  for (int l = 0; l < L; ++l) {
    for (int64_t k = 0; k < tokens_per_local_expert[l] * hidden; ++k, ++i) {
      rows[i] = ExpertFn(d * L + l, rows[i]);
    }
  }
}

std::vector<float> ReferenceCombine(const RankInput& input, int64_t hidden, bool identity) {
  std::vector<float> out = input.rows;
  if (identity) return out;
  int64_t i = 0;
  for (size_t e = 0; e < input.tokens_per_expert.size(); ++e) {
    for (int64_t k = 0; k < input.tokens_per_expert[e] * hidden; ++k, ++i) {
      out[i] = ExpertFn(static_cast<int>(e), out[i]);
    }
  }
  return out;
}

std::string FirstDifference(const std::vector<float>& got, const std::vector<float>& want,
                            const std::string& what) {
  if (got.size() != want.size()) {
    return absl::StrCat(what, ": ", got.size(), " values, expected ", want.size());
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      return absl::StrCat(what, ": value ", i, " is ", got[i], ", expected ", want[i]);
    }
  }
  return "";
}

double Imbalance(const std::vector<RankInput>& inputs, int num_experts) {
  std::vector<int64_t> per_expert(num_experts, 0);
  int64_t total = 0;
  for (const RankInput& in : inputs) {
    for (int e = 0; e < num_experts; ++e) {
      per_expert[e] += in.tokens_per_expert[e];
      total += in.tokens_per_expert[e];
    }
  }
  if (total == 0) return 1.0;
  const double mean = static_cast<double>(total) / num_experts;
  return *std::max_element(per_expert.begin(), per_expert.end()) / mean;
}

namespace {

std::vector<float> RandomRows(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

}  // namespace

std::string CheckOneRank(TokenDispatcher& disp, const std::vector<RankInput>& inputs,
                         int num_experts, int64_t h, int d, uint32_t grad_seed,
                         absl::Duration timeout) {
  const std::string who = absl::StrCat(disp.name(), " EP rank ", d);
  const RankInput& in = inputs[d];
  auto got = DispatchAndWait(disp, in.rows.data(), in.num_rows, h, in.tokens_per_expert, timeout);
  if (!got.ok()) return absl::StrCat(who, " dispatch: ", got.status().ToString());
  const ExpectedDispatch want = ReferenceDispatch(inputs, num_experts, h, d);
  if (got->tokens_per_local_expert != want.tokens_per_local_expert) {
    return absl::StrCat(who, ": tokens_per_local_expert differs");
  }
  std::string e = FirstDifference(got->rows, want.rows, who + " dispatch rows");
  if (!e.empty()) return e;
  const int64_t n = static_cast<int64_t>(got->rows.size()) / h;

  // Identity experts: combine(dispatch(x)) == x.
  auto back = CombineAndWait(disp, got->layout, got->rows.data(), n, timeout);
  if (!back.ok()) return absl::StrCat(who, " combine: ", back.status().ToString());
  e = FirstDifference(*back, in.rows, who + " combine of identity experts");
  if (!e.empty()) return e;

  // Per-expert functions: each row comes back transformed by the expert it was routed to.
  std::vector<float> expert_out = got->rows;
  ApplyExperts(expert_out, got->tokens_per_local_expert, d, h);
  back = CombineAndWait(disp, got->layout, expert_out.data(), n, timeout);
  if (!back.ok()) return absl::StrCat(who, " combine: ", back.status().ToString());
  const std::vector<float> want_combined = ReferenceCombine(in, h, /*identity=*/false);
  e = FirstDifference(*back, want_combined, who + " combine of expert outputs");
  if (!e.empty()) return e;

  // Backward of combine: the gradient [T, h] moves like dispatch (no count exchange).
  std::vector<RankInput> grads = inputs;
  for (size_t s = 0; s < grads.size(); ++s) {
    grads[s].rows = RandomRows(grads[s].num_rows * h, grad_seed + static_cast<uint32_t>(s));
  }
  auto g = CombineBackwardAndWait(disp, got->layout, grads[d].rows.data(), in.num_rows, timeout);
  if (!g.ok()) return absl::StrCat(who, " combine backward: ", g.status().ToString());
  e = FirstDifference(*g, ReferenceDispatch(grads, num_experts, h, d).rows,
                      who + " combine backward");
  if (!e.empty()) return e;

  // Backward of dispatch: the gradient [N, h] moves like combine.
  auto db = DispatchBackwardAndWait(disp, got->layout, expert_out.data(), n, timeout);
  if (!db.ok()) return absl::StrCat(who, " dispatch backward: ", db.status().ToString());
  e = FirstDifference(*db, want_combined, who + " dispatch backward");
  // Hand every output back: the next call on this dispatcher then runs on recycled
  // buffers, whose stale contents must not leak into results.
  for (auto* v : {&got->rows, &*back, &*g, &*db}) disp.Recycle(std::move(*v));
  return e;
}

}  // namespace mxmaca::layers::moe::dispatch::testing
