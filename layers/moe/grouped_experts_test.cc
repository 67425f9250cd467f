// Unit tests of the grouped expert MLPs: batch invariance of a row's output and input
// gradient, and agreement with a direct fp64 evaluation.
#include "layers/moe/grouped_experts.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace mxmaca::layers::moe {
namespace {

struct Experts {
  ExpertMlpConfig config;
  std::vector<std::vector<float>> w1, b1, w2, b2;
  ExpertWeights weights;
};

Experts MakeExperts(int64_t num, bool swiglu, uint32_t seed) {
  Experts ex;
  ex.config.hidden_size = 24;
  ex.config.ffn_hidden_size = 40;
  ex.config.swiglu = swiglu;
  ex.config.add_bias = true;
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 0.2f);
  auto fill = [&](int64_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = normal(gen);
    return v;
  };
  const int64_t h = ex.config.hidden_size, f = ex.config.ffn_hidden_size, f1 = ex.config.fc1_size();
  for (int64_t i = 0; i < num; ++i) {
    ex.w1.push_back(fill(f1 * h));
    ex.b1.push_back(fill(f1));
    ex.w2.push_back(fill(h * f));
    ex.b2.push_back(fill(h));
  }
  for (int64_t i = 0; i < num; ++i) {
    ex.weights.fc1_weight.push_back(ex.w1[i].data());
    ex.weights.fc1_bias.push_back(ex.b1[i].data());
    ex.weights.fc2_weight.push_back(ex.w2[i].data());
    ex.weights.fc2_bias.push_back(ex.b2[i].data());
  }
  return ex;
}

TEST_CASE("an expert row's output and input gradient do not depend on the row count") {
  for (bool swiglu : {false, true}) {
    INFO("swiglu " << swiglu);
    const Experts ex = MakeExperts(2, swiglu, 7);
    const int64_t h = ex.config.hidden_size;
    std::mt19937 gen(9);
    std::normal_distribution<float> normal;
    std::vector<float> token(h), grad(h);
    for (float& v : token) v = normal(gen);
    for (float& v : grad) v = normal(gen);
    std::vector<float> ref_y, ref_dx;
    for (int64_t m : {1, 7, 64, 301}) {
      // Expert 0 gets 5 rows; expert 1 gets m rows with the token at row m / 2.
      const int64_t rows = 5 + m, at = 5 + m / 2;
      std::vector<float> x(rows * h), dy(rows * h), y(rows * h), dx(rows * h);
      for (float& v : x) v = normal(gen);
      for (float& v : dy) v = normal(gen);
      std::memcpy(&x[at * h], token.data(), sizeof(float) * h);
      std::memcpy(&dy[at * h], grad.data(), sizeof(float) * h);
      const std::vector<int64_t> counts = {5, m};
      GroupedExpertsStash stash;
      kernels::ExecContext ctx;
      ctx.num_threads = 2;
      GroupedExpertsForward(ctx, ex.config, ex.weights, counts, x.data(), y.data(), &stash);
      GroupedExpertsBackwardInput(ctx, ex.config, ex.weights, counts, dy.data(), dx.data(), &stash);
      const std::vector<float> row_y(y.begin() + at * h, y.begin() + (at + 1) * h);
      const std::vector<float> row_dx(dx.begin() + at * h, dx.begin() + (at + 1) * h);
      if (ref_y.empty()) {
        ref_y = row_y;
        ref_dx = row_dx;
      } else {
        INFO("rows " << m);
        CHECK(std::memcmp(ref_y.data(), row_y.data(), sizeof(float) * h) == 0);
        CHECK(std::memcmp(ref_dx.data(), row_dx.data(), sizeof(float) * h) == 0);
      }
    }
  }
}

TEST_CASE("grouped experts equal a direct fp64 evaluation (GELU), empty experts skipped") {
  const Experts ex = MakeExperts(3, false, 3);
  const int64_t h = ex.config.hidden_size, f = ex.config.ffn_hidden_size;
  const std::vector<int64_t> counts = {3, 0, 2};
  std::mt19937 gen(4);
  std::normal_distribution<float> normal;
  std::vector<float> x(5 * h), y(5 * h);
  for (float& v : x) v = normal(gen);
  GroupedExpertsStash stash;
  GroupedExpertsForward(kernels::ExecContext{}, ex.config, ex.weights, counts, x.data(), y.data(),
                        &stash);
  for (int64_t r = 0; r < 5; ++r) {
    const int64_t e = r < 3 ? 0 : 2;
    std::vector<double> act(f);
    for (int64_t j = 0; j < f; ++j) {
      double s = ex.b1[e][j];
      for (int64_t i = 0; i < h; ++i) s += double(x[r * h + i]) * ex.w1[e][j * h + i];
      act[j] = 0.5 * s * std::erfc(-s / std::sqrt(2.0));
    }
    for (int64_t i = 0; i < h; ++i) {
      double s = ex.b2[e][i], mag = std::abs(s);
      for (int64_t j = 0; j < f; ++j) {
        s += act[j] * ex.w2[e][i * f + j];
        mag += std::abs(act[j] * ex.w2[e][i * f + j]);
      }
      // Two fp32 dot products of <= 40 terms plus a GELU of a few ulp: |error| well under
      // 64 u sum|terms| (u = 2^-24); a wrong expert or weight layout is off by O(|s|).
      REQUIRE(std::abs(y[r * h + i] - s) <= 64 * 0x1p-24 * (mag + 1.0));
    }
  }
}

}  // namespace
}  // namespace mxmaca::layers::moe
