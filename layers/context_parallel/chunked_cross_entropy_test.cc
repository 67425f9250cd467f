// layers/context_parallel/chunked_cross_entropy_test.cc: the chunked output layer +
// cross-entropy against the unchunked pipeline (whole [N, VP] logits, then
// kernels/cpu/cross_entropy.h), for several chunk sizes including 1, a non-divisor and
// more rows than there are tokens.
#include "layers/context_parallel/chunked_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/gemm.h"
#include "layers/moe/expert_gemm.h"

namespace mxmaca::layers::cp {
namespace {

constexpr double kEps32 = 1.1920928955078125e-07;

std::vector<float> RandomNormal(int64_t n, uint32_t seed, float stddev) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> x(n);
  for (float& v : x) v = dist(gen);
  return x;
}

// NormRel: ||got - want||_2 / ||want||_2.
double NormRel(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

struct Problem {
  int64_t n = 300, h = 64, vp = 512, v = 500;
  std::vector<float> hidden, weight, dloss;
  std::vector<int32_t> targets;
};

Problem MakeProblem() {
  Problem p;
  p.hidden = RandomNormal(p.n * p.h, 51, 1.0f);
  p.weight = RandomNormal(p.vp * p.h, 52, 0.2f);
  std::mt19937 gen(53);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(p.v - 1));
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  p.targets.resize(p.n);
  p.dloss.resize(p.n);
  for (int64_t i = 0; i < p.n; ++i) {
    p.targets[i] = tok(gen);
    if (i % 50 == 7) p.targets[i] = -1;  // a target outside this vocabulary: loss = lse
    // loss mask / token count, with every 5th token masked out (dloss 0).
    p.dloss[i] = (i % 5 == 3) ? 0.0f : (0.5f + u(gen)) / static_cast<float>(p.n);
  }
  return p;
}

struct Outputs {
  std::vector<float> loss, lse, d_hidden, d_weight;
};

// Unchunked: whole logits [N, VP], then the kernels, then the two products.
Outputs Unchunked(const Problem& p, bool row_invariant) {
  kernels::ExecContext ctx;
  ctx.num_threads = 2;
  std::vector<float> logits(p.n * p.vp);
  if (row_invariant) {
    moe::BatchInvariantGemm(ctx, true, p.n, p.vp, p.h, p.hidden.data(), p.weight.data(),
                            logits.data());
  } else {
    kernels::cpu::Gemm(ctx, false, true, p.n, p.vp, p.h, 1.0f, p.hidden.data(), p.h,
                       p.weight.data(), p.h, 0.0f, logits.data(), p.vp);
  }
  Outputs o;
  o.loss.resize(p.n);
  o.lse.resize(p.n);
  kernels::cpu::CrossEntropyForward(ctx, logits.data(), p.targets.data(), p.n, p.vp, p.v,
                                    o.loss.data(), o.lse.data());
  kernels::cpu::CrossEntropyBackward(ctx, logits.data(), p.targets.data(), o.lse.data(),
                                     p.dloss.data(), p.n, p.vp, p.v, logits.data());
  o.d_hidden.resize(p.n * p.h);
  if (row_invariant) {
    moe::BatchInvariantGemm(ctx, false, p.n, p.h, p.vp, logits.data(), p.weight.data(),
                            o.d_hidden.data());
  } else {
    kernels::cpu::Gemm(ctx, false, false, p.n, p.h, p.vp, 1.0f, logits.data(), p.vp,
                       p.weight.data(), p.h, 0.0f, o.d_hidden.data(), p.h);
  }
  o.d_weight.resize(p.vp * p.h);
  kernels::cpu::Gemm(ctx, true, false, p.vp, p.h, p.n, 1.0f, logits.data(), p.vp,
                     p.hidden.data(), p.h, 0.0f, o.d_weight.data(), p.h);
  return o;
}

Outputs Chunked(const Problem& p, int64_t chunk_rows, bool row_invariant) {
  ChunkedCrossEntropyConfig cfg;
  cfg.hidden = p.h;
  cfg.padded_vocab = p.vp;
  cfg.softmax_vocab = p.v;
  cfg.chunk_rows = chunk_rows;
  cfg.row_invariant_gemm = row_invariant;
  auto ce = ChunkedCrossEntropy::Create(cfg);
  REQUIRE(ce.ok());
  kernels::ExecContext ctx;
  ctx.num_threads = 2;
  Outputs o;
  o.loss.resize(p.n);
  o.lse.resize(p.n);
  REQUIRE((*ce)->Forward(ctx, p.n, p.hidden.data(), p.weight.data(), p.targets.data(),
                         o.loss.data(), o.lse.data())
              .ok());
  o.d_hidden.resize(p.n * p.h);
  o.d_weight.assign(p.vp * p.h, 0.0f);
  REQUIRE((*ce)->Backward(ctx, p.n, p.hidden.data(), p.weight.data(), p.targets.data(),
                          o.lse.data(), p.dloss.data(), o.d_hidden.data(), o.d_weight.data())
              .ok());
  return o;
}

TEST_CASE("chunked cross-entropy: row-invariant GEMM gives the unchunked bits per row",
          "[chunked_cross_entropy]") {
  const Problem p = MakeProblem();
  const Outputs want = Unchunked(p, /*row_invariant=*/true);
  for (int64_t r : {1, 37, 64, 1000}) {
    INFO("chunk_rows " << r);
    const Outputs got = Chunked(p, r, /*row_invariant=*/true);
    CHECK(got.loss == want.loss);
    CHECK(got.lse == want.lse);
    CHECK(got.d_hidden == want.d_hidden);
    // d_weight sums the N tokens in chunks instead of one k = N product: the same terms
    // in another order. fp32 sum of n terms: error <= ~n eps sum|terms| in the worst case,
    // ~sqrt(n) eps typical; N = 300 tokens: norm-wise bound 64 eps (~7.6e-6).
    CHECK(NormRel(got.d_weight, want.d_weight) < 64 * kEps32);
  }
}

TEST_CASE("chunked cross-entropy: plain GEMM agrees to fp32 rounding",
          "[chunked_cross_entropy]") {
  const Problem p = MakeProblem();
  const Outputs want = Unchunked(p, /*row_invariant=*/false);
  for (int64_t r : {1, 37, 1000}) {
    INFO("chunk_rows " << r);
    const Outputs got = Chunked(p, r, /*row_invariant=*/false);
    // A logit is a dot product of h = 64 terms whose blocking may differ with the GEMM's
    // row count: |delta| <= ~2 h eps sum|x w|; through logsumexp and the loss this is a
    // norm-wise relative error of a few tens of eps at most. Bounds: 64 eps for the
    // forward and d_hidden (a VP = 512 term product on top), 64 eps for d_weight (as in
    // the row-invariant case).
    CHECK(NormRel(got.loss, want.loss) < 64 * kEps32);
    CHECK(NormRel(got.lse, want.lse) < 64 * kEps32);
    CHECK(NormRel(got.d_hidden, want.d_hidden) < 64 * kEps32);
    CHECK(NormRel(got.d_weight, want.d_weight) < 64 * kEps32);
  }
}

TEST_CASE("chunked cross-entropy: B and W separately equal the fused backward",
          "[chunked_cross_entropy]") {
  const Problem p = MakeProblem();
  const Outputs fused = Chunked(p, 64, false);
  ChunkedCrossEntropyConfig cfg{p.h, p.vp, p.v, 64, false};
  auto ce = ChunkedCrossEntropy::Create(cfg);
  REQUIRE(ce.ok());
  kernels::ExecContext ctx;
  std::vector<float> dh(p.n * p.h), dw(p.vp * p.h, 0.0f);
  REQUIRE((*ce)->Backward(ctx, p.n, p.hidden.data(), p.weight.data(), p.targets.data(),
                          fused.lse.data(), p.dloss.data(), dh.data(), nullptr)
              .ok());
  REQUIRE((*ce)->Backward(ctx, p.n, p.hidden.data(), p.weight.data(), p.targets.data(),
                          fused.lse.data(), p.dloss.data(), nullptr, dw.data())
              .ok());
  CHECK(dh == fused.d_hidden);
  CHECK(dw == fused.d_weight);
}

TEST_CASE("chunked cross-entropy: clear errors", "[chunked_cross_entropy]") {
  auto bad = ChunkedCrossEntropy::Create({64, 512, 513, 16, false});
  REQUIRE(!bad.ok());
  CHECK(std::string(bad.status().message()).find("softmax_vocab 513") != std::string::npos);
  CHECK(!ChunkedCrossEntropy::Create({64, 512, 500, 0, false}).ok());
  auto ce = ChunkedCrossEntropy::Create({4, 8, 8, 2, false});
  REQUIRE(ce.ok());
  kernels::ExecContext ctx;
  std::vector<float> x(4 * 4, 0.1f), w(8 * 4, 0.2f), l(4), lse(4);
  std::vector<int32_t> t(4, 1);
  CHECK(!(*ce)->Forward(ctx, -1, x.data(), w.data(), t.data(), l.data(), lse.data()).ok());
  CHECK(!(*ce)->Forward(ctx, 4, nullptr, w.data(), t.data(), l.data(), lse.data()).ok());
  CHECK(!(*ce)->Backward(ctx, 4, x.data(), w.data(), t.data(), lse.data(), l.data(), nullptr,
                         nullptr)
             .ok());
  CHECK((*ce)->Forward(ctx, 0, nullptr, nullptr, nullptr, nullptr, nullptr).ok());
}

}  // namespace
}  // namespace mxmaca::layers::cp
