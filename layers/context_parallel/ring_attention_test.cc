// layers/context_parallel/ring_attention_test.cc: ring attention simulated in one process
// (CP rank r receives the K/V blocks of ranks r, r-1, r-2, ... in ring order) against the
// unsharded causal attention: a float64 O(s^2) reference written here (seq 256) and the
// fp32 kernel kernels/cpu/attention.h (seq 4096, CP = 4, the check).
#include "layers/context_parallel/ring_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/cpu/attention.h"
#include "layers/context_parallel/cp_layout.h"
#include "layers/context_parallel/ring_test_util.h"

namespace mxmaca::layers::cp {
namespace {

using testing::kEps32;
using testing::MaxRelToMax;
using testing::RandomDocStarts;
using testing::RandomNormal;
using testing::Result;
using testing::RunRing;
using testing::Shape;
using testing::Tol;

// ReferenceRow: float64 out, lse of one query row (b, h, i) of the unsharded attention.
void ReferenceRow(const Shape& sh, const std::vector<float>& q, const std::vector<float>& k,
                  const std::vector<float>& v, const std::vector<int32_t>& doc_start,
                  int64_t bi, int64_t h, int64_t i, std::vector<double>* p_row,
                  double* lse, std::vector<double>* out) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(sh.hn));
  const int64_t g = h / (sh.np / sh.ng);
  const float* qi = q.data() + ((bi * sh.np + h) * sh.s + i) * sh.hn;
  const int64_t lo = doc_start.empty() ? 0 : doc_start[bi * sh.s + i];
  p_row->assign(sh.s, 0.0);
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = lo; j <= i; ++j) {
    const float* kj = k.data() + ((bi * sh.ng + g) * sh.s + j) * sh.hn;
    double d = 0.0;
    for (int64_t e = 0; e < sh.hn; ++e) d += static_cast<double>(qi[e]) * kj[e];
    (*p_row)[j] = d * scale;
    mx = std::max(mx, (*p_row)[j]);
  }
  double sum = 0.0;
  for (int64_t j = lo; j <= i; ++j) sum += std::exp((*p_row)[j] - mx);
  *lse = mx + std::log(sum);
  out->assign(sh.hn, 0.0);
  for (int64_t j = lo; j <= i; ++j) {
    (*p_row)[j] = std::exp((*p_row)[j] - *lse);
    const float* vj = v.data() + ((bi * sh.ng + g) * sh.s + j) * sh.hn;
    for (int64_t e = 0; e < sh.hn; ++e) (*out)[e] += (*p_row)[j] * vj[e];
  }
}

struct RefResult {
  std::vector<double> out, lse, dq, dk, dv;
};

// Reference: float64 unsharded causal (document-masked) attention and its gradients.
RefResult Reference(const Shape& sh, const std::vector<float>& q, const std::vector<float>& k,
                    const std::vector<float>& v, const std::vector<float>& dout,
                    const std::vector<int32_t>& doc_start) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(sh.hn));
  RefResult ref;
  ref.out.assign(q.size(), 0.0);
  ref.dq.assign(q.size(), 0.0);
  ref.lse.assign(sh.b * sh.np * sh.s, 0.0);
  ref.dk.assign(k.size(), 0.0);
  ref.dv.assign(v.size(), 0.0);
  std::vector<double> p, o, dp(sh.s);
  for (int64_t bi = 0; bi < sh.b; ++bi) {
    for (int64_t h = 0; h < sh.np; ++h) {
      const int64_t g = h / (sh.np / sh.ng);
      for (int64_t i = 0; i < sh.s; ++i) {
        double lse;
        ReferenceRow(sh, q, k, v, doc_start, bi, h, i, &p, &lse, &o);
        const int64_t row = (bi * sh.np + h) * sh.s + i;
        ref.lse[row] = lse;
        const float* doi = dout.data() + row * sh.hn;
        double delta = 0.0;
        for (int64_t e = 0; e < sh.hn; ++e) {
          ref.out[row * sh.hn + e] = o[e];
          delta += o[e] * doi[e];
        }
        const int64_t lo = doc_start.empty() ? 0 : doc_start[bi * sh.s + i];
        for (int64_t j = lo; j <= i; ++j) {
          const int64_t kr = ((bi * sh.ng + g) * sh.s + j) * sh.hn;
          double d = 0.0;
          for (int64_t e = 0; e < sh.hn; ++e) {
            d += static_cast<double>(doi[e]) * v[kr + e];
            ref.dv[kr + e] += p[j] * doi[e];
          }
          const double ds = p[j] * (d - delta) * scale;
          for (int64_t e = 0; e < sh.hn; ++e) {
            ref.dq[row * sh.hn + e] += ds * k[kr + e];
            ref.dk[kr + e] += ds * q[row * sh.hn + e];
          }
        }
      }
    }
  }
  return ref;
}

TEST_CASE("ring attention: chunk pairs follow TransformerEngine's 2-chunk rule",
          "[ring_attention]") {
  // At ring step i, rank r holds rank j = (r - i) mod CP's block. TE
  // (AttnFuncWithCPAndKVP2P): i == 0 causal on both local chunks; j < r: both query chunks
  // against j's first chunk, no mask; j > r: the second query chunk against both of j's
  // chunks, no mask; everything else skipped.
  for (int64_t cp : {1, 2, 4, 8}) {
    auto layout = MakeCpLayout(2 * cp * 4, cp);
    REQUIRE(layout.ok());
    for (int64_t r = 0; r < cp; ++r) {
      for (int64_t j = 0; j < cp; ++j) {
        for (int qh = 0; qh < 2; ++qh) {
          for (int kh = 0; kh < 2; ++kh) {
            ChunkPairMask want;
            if (j == r) {
              want = qh == kh ? ChunkPairMask::kCausal
                              : (qh == 1 ? ChunkPairMask::kFull : ChunkPairMask::kSkip);
            } else if (j < r) {
              want = kh == 0 ? ChunkPairMask::kFull : ChunkPairMask::kSkip;
            } else {
              want = qh == 1 ? ChunkPairMask::kFull : ChunkPairMask::kSkip;
            }
            CHECK(ClassifyChunkPair(layout->ChunkOf(r, qh), layout->ChunkOf(j, kh)) == want);
          }
        }
      }
    }
  }
}


TEST_CASE("ring attention: CP 1, 2, 4 at seq 256 against float64 attention",
          "[ring_attention]") {
  const Shape sh{2, 4, 2, 256, 32};
  const int64_t tile = 32;
  const std::vector<float> q = RandomNormal(sh.b * sh.np * sh.s * sh.hn, 11);
  const std::vector<float> k = RandomNormal(sh.b * sh.ng * sh.s * sh.hn, 12);
  const std::vector<float> v = RandomNormal(sh.b * sh.ng * sh.s * sh.hn, 13);
  const std::vector<float> dout = RandomNormal(q.size(), 14);
  for (bool docs : {false, true}) {
    const std::vector<int32_t> ds =
        docs ? RandomDocStarts(sh.b, sh.s, 70, 15) : std::vector<int32_t>{};
    const RefResult ref = Reference(sh, q, k, v, dout, ds);
    for (int64_t cp : {1, 2, 4}) {
      const Result got = RunRing(sh, cp, tile, q, k, v, dout, ds);
      const double n_tiles = static_cast<double>(sh.s) / tile;
      const double fwd_tol = Tol(8, n_tiles);
      const double bwd_tol = Tol(16, n_tiles);
      const double e_out = MaxRelToMax(got.out, ref.out);
      const double e_lse = MaxRelToMax(got.lse, ref.lse);
      const double e_dq = MaxRelToMax(got.dq, ref.dq);
      const double e_dk = MaxRelToMax(got.dk, ref.dk);
      const double e_dv = MaxRelToMax(got.dv, ref.dv);
      INFO("docs " << docs << " cp " << cp << " out " << e_out << " lse " << e_lse << " dq "
                   << e_dq << " dk " << e_dk << " dv " << e_dv << " (fwd tol " << fwd_tol
                   << ", bwd tol " << bwd_tol << ")");
      WARN("docs " << docs << " cp " << cp << " out " << e_out << " lse " << e_lse << " dq "
                   << e_dq << " dk " << e_dk << " dv " << e_dv);
      CHECK(e_out < fwd_tol);
      CHECK(e_lse < fwd_tol);
      CHECK(e_dq < bwd_tol);
      CHECK(e_dk < bwd_tol);
      CHECK(e_dv < bwd_tol);
    }
  }
}

// The check: one layer's attention at seq 4096 with CP = 4 (b = 1, 4 query heads
// in 2 groups, hn = 64) against the unsharded fp32 kernel (kernels/cpu/attention.h, which
// materialises [s, s] probabilities), plain causal and document-masked. Both sides are
// fp32 with different summation orders (the kernel's row softmax vs our online merge over
// s / tile = 32 key tiles, oneDNN's blocked dot products, and different exp
// implementations, Cephes vs libm): Tol(16) = 96 eps relative to the reference's max for
// out and the gradients. lse (which the kernel does not return) and out are also checked
// on a sample of rows against the float64 row reference with Tol(8).
TEST_CASE("ring attention: seq 4096, CP 4 against the unsharded fp32 kernel",
          "[ring_attention]") {
  const Shape sh{1, 4, 2, 4096, 64};
  const int64_t cp = 4, tile = 128;
  const std::vector<float> q = RandomNormal(sh.b * sh.np * sh.s * sh.hn, 21);
  const std::vector<float> k = RandomNormal(sh.b * sh.ng * sh.s * sh.hn, 22);
  const std::vector<float> v = RandomNormal(sh.b * sh.ng * sh.s * sh.hn, 23);
  const std::vector<float> dout = RandomNormal(q.size(), 24);
  kernels::ExecContext ctx;
  ctx.num_threads = 2;
  const kernels::cpu::AttentionShape ash{sh.b, sh.s, sh.np, sh.ng, sh.hn};
  const float scale = 1.0f / std::sqrt(static_cast<float>(sh.hn));
  for (bool docs : {false, true}) {
    const std::vector<int32_t> ds =
        docs ? RandomDocStarts(sh.b, sh.s, 1500, 25) : std::vector<int32_t>{};
    std::vector<float> probs(sh.b * sh.np * sh.s * sh.s), out(q.size()), dq(q.size()),
        dk(k.size()), dv(v.size());
    kernels::cpu::AttentionForward(ctx, ash, q.data(), k.data(), v.data(),
                                   docs ? ds.data() : nullptr, scale, 0.0f, {}, probs.data(),
                                   out.data());
    kernels::cpu::AttentionBackward(ctx, ash, q.data(), k.data(), v.data(), probs.data(),
                                    docs ? ds.data() : nullptr, scale, 0.0f, {}, dout.data(),
                                    dq.data(), dk.data(), dv.data());
    probs = std::vector<float>();
    const Result got = RunRing(sh, cp, tile, q, k, v, dout, ds);
    const double n_tiles = static_cast<double>(sh.s) / tile;
    const double tol = Tol(16, n_tiles);
    const double e_out = MaxRelToMax(got.out, out);
    const double e_dq = MaxRelToMax(got.dq, dq);
    const double e_dk = MaxRelToMax(got.dk, dk);
    const double e_dv = MaxRelToMax(got.dv, dv);
    WARN("seq 4096 docs " << docs << " out " << e_out << " dq " << e_dq << " dk " << e_dk
                          << " dv " << e_dv << " (tol " << tol << ")");
    CHECK(e_out < tol);
    CHECK(e_dq < tol);
    CHECK(e_dk < tol);
    CHECK(e_dv < tol);
    // Sampled rows against float64.
    double e_lse = 0.0, e_row = 0.0, max_out = 0.0;
    std::vector<double> p, o;
    for (int64_t h = 0; h < sh.np; ++h) {
      for (int64_t i = h; i < sh.s; i += 61) {
        double lse;
        ReferenceRow(sh, q, k, v, ds, 0, h, i, &p, &lse, &o);
        const int64_t row = h * sh.s + i;
        e_lse = std::max(e_lse, std::abs(got.lse[row] - lse) / std::max(1.0, std::abs(lse)));
        for (int64_t e = 0; e < sh.hn; ++e) {
          e_row = std::max(e_row, std::abs(got.out[row * sh.hn + e] - o[e]));
          max_out = std::max(max_out, std::abs(o[e]));
        }
      }
    }
    const double row_tol = Tol(8, n_tiles);
    WARN("seq 4096 docs " << docs << " sampled rows: lse " << e_lse << " out "
                          << e_row / max_out << " (tol " << row_tol << ")");
    CHECK(e_lse < row_tol);
    CHECK(e_row / max_out < row_tol);
  }
}

TEST_CASE("ring attention: any arrival order, travelling dK/dV, thread-count invariance",
          "[ring_attention]") {
  const Shape sh{1, 4, 1, 128, 16};  // MQA: one K/V group for all heads
  const int64_t cp = 4, tile = 8;
  const std::vector<float> q = RandomNormal(sh.b * sh.np * sh.s * sh.hn, 31);
  const std::vector<float> k = RandomNormal(sh.b * sh.ng * sh.s * sh.hn, 32);
  const std::vector<float> v = RandomNormal(sh.b * sh.ng * sh.s * sh.hn, 33);
  const std::vector<float> dout = RandomNormal(q.size(), 34);
  const std::vector<int32_t> ds = RandomDocStarts(sh.b, sh.s, 40, 35);
  const RefResult ref = Reference(sh, q, k, v, dout, ds);
  const double n_tiles = static_cast<double>(sh.s) / tile;

  const Result ring = RunRing(sh, cp, tile, q, k, v, dout, ds, 1);
  // Reverse ring direction (r, r+1, r+2, ...) with the dK/dV buffer travelling along.
  const Result reversed = RunRing(
      sh, cp, tile, q, k, v, dout, ds, 2, [cp](int64_t r, int64_t i) { return (r + i) % cp; },
      /*travel=*/true);
  for (const Result* got : {&ring, &reversed}) {
    CHECK(MaxRelToMax(got->out, ref.out) < Tol(8, n_tiles));
    CHECK(MaxRelToMax(got->lse, ref.lse) < Tol(8, n_tiles));
    CHECK(MaxRelToMax(got->dq, ref.dq) < Tol(16, n_tiles));
    CHECK(MaxRelToMax(got->dk, ref.dk) < Tol(16, n_tiles));
    CHECK(MaxRelToMax(got->dv, ref.dv) < Tol(16, n_tiles));
  }
  // The same order on 1 or 3 threads: the same bits (work items are independent).
  const Result three = RunRing(sh, cp, tile, q, k, v, dout, ds, 3);
  CHECK(three.out == ring.out);
  CHECK(three.lse == ring.lse);
  CHECK(three.dq == ring.dq);
  CHECK(three.dk == ring.dk);
  CHECK(three.dv == ring.dv);
}

TEST_CASE("ring attention: clear errors", "[ring_attention]") {
  auto layout = MakeCpLayout(64, 2);
  REQUIRE(layout.ok());
  RingAttentionConfig cfg;
  cfg.b = 1;
  cfg.heads = 4;
  cfg.groups = 2;
  cfg.head_dim = 8;
  cfg.layout = *layout;
  kernels::ExecContext ctx;

  RingAttentionConfig bad = cfg;
  bad.groups = 3;
  auto st = RingAttentionForward::Create(bad);
  REQUIRE(!st.ok());
  CHECK(std::string(st.status().message()).find("groups (3)") != std::string::npos);
  bad = cfg;
  bad.layout.chunk = 5;
  CHECK(!RingAttentionBackward::Create(bad).ok());
  bad = cfg;
  bad.head_dim = 0;
  CHECK(!RingAttentionForward::Create(bad).ok());

  auto fwd = RingAttentionForward::Create(cfg);
  REQUIRE(fwd.ok());
  const std::vector<float> q(1 * 4 * 32 * 8, 0.5f), kv(1 * 2 * 32 * 8, 0.25f);
  std::vector<float> out(q.size()), lse(4 * 32);
  CHECK((*fwd)->Step(ctx, 0, kv.data(), kv.data()).code() ==
        absl::StatusCode::kFailedPrecondition);
  CHECK((*fwd)->Begin(ctx, 2, q.data(), nullptr).code() == absl::StatusCode::kInvalidArgument);
  // Rank 1 holds positions 16..31 and 32..47; a doc start after the token is invalid.
  std::vector<int32_t> ds(32, 0);
  ds[3] = 20;  // token 3 of rank 1 is position 19
  auto begin = (*fwd)->Begin(ctx, 1, q.data(), ds.data());
  REQUIRE(!begin.ok());
  CHECK(std::string(begin.message()).find("doc_start[0, 3] = 20") != std::string::npos);
  ds[3] = 16;
  REQUIRE((*fwd)->Begin(ctx, 1, q.data(), ds.data()).ok());
  REQUIRE((*fwd)->Step(ctx, 1, kv.data(), kv.data()).ok());
  CHECK((*fwd)->Step(ctx, 1, kv.data(), kv.data()).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK((*fwd)->Step(ctx, 7, kv.data(), kv.data()).code() ==
        absl::StatusCode::kInvalidArgument);
  auto fin = (*fwd)->Finish(ctx, out.data(), lse.data());
  CHECK(fin.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(fin.message()).find("source rank 0") != std::string::npos);
  REQUIRE((*fwd)->Step(ctx, 0, kv.data(), kv.data()).ok());
  CHECK((*fwd)->Finish(ctx, out.data(), lse.data()).ok());
  for (float x : out) REQUIRE(std::isfinite(x));

  auto bwd = RingAttentionBackward::Create(cfg);
  REQUIRE(bwd.ok());
  std::vector<float> dk(kv.size()), dv(kv.size()), dq(q.size());
  CHECK((*bwd)->Begin(ctx, 0, q.data(), nullptr, out.data(), nullptr, lse.data()).code() ==
        absl::StatusCode::kInvalidArgument);
  REQUIRE((*bwd)->Begin(ctx, 0, q.data(), nullptr, out.data(), q.data(), lse.data()).ok());
  CHECK((*bwd)->Finish(ctx, dq.data()).code() == absl::StatusCode::kFailedPrecondition);
  CHECK((*bwd)->Step(ctx, 0, kv.data(), kv.data(), nullptr, dv.data()).code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("ring attention: state memory falls as 1/CP and has no s^2 term",
          "[ring_attention]") {
  // 128K tokens, 4 heads of 64 (the benchmark layer): per-rank state must be
  // O(s/CP * np * hn) + O(tile^2) per thread, never O(s^2) (64 GiB at 128K).
  const int64_t s = 131072;
  int64_t prev_fwd = 0, prev_bwd = 0;
  for (int64_t cp : {1, 2, 4, 8}) {
    auto layout = MakeCpLayout(s, cp);
    REQUIRE(layout.ok());
    RingAttentionConfig cfg;
    cfg.heads = 4;
    cfg.groups = 4;
    cfg.head_dim = 64;
    cfg.layout = *layout;
    const int64_t fwd = RingAttentionForward::StateBytes(cfg, 2);
    const int64_t bwd = RingAttentionBackward::StateBytes(cfg, 2);
    const int64_t rows = 4 * s / cp;
    CHECK(fwd == 4 * (rows * 66 + 2 * 128 * 128));
    CHECK(bwd == 4 * (rows * 193 + 4 * 128 * 128));
    if (prev_fwd > 0) {
      // Halving the tokens per rank halves the state up to the fixed tile scratch.
      CHECK(std::abs(2 * fwd - prev_fwd) <= 4 * 2 * 128 * 128 * 2);
      CHECK(std::abs(2 * bwd - prev_bwd) <= 4 * 4 * 128 * 128 * 2);
    }
    prev_fwd = fwd;
    prev_bwd = bwd;
  }
}

}  // namespace
}  // namespace mxmaca::layers::cp
