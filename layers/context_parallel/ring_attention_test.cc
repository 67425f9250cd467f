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

namespace mxmaca::layers::cp {
namespace {

constexpr double kEps32 = 1.1920928955078125e-07;  // fp32 machine epsilon (2^-23)

std::vector<float> RandomNormal(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(gen);
  return x;
}

// RandomDocStarts: [b, s] document-start ids of documents with random lengths in
// [1, max_len] (doc_start[i] = first position of i's document).
std::vector<int32_t> RandomDocStarts(int64_t b, int64_t s, int64_t max_len, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> len(1, max_len);
  std::vector<int32_t> ds(b * s);
  for (int64_t bi = 0; bi < b; ++bi) {
    int64_t start = 0;
    while (start < s) {
      const int64_t end = std::min(s, start + len(gen));
      for (int64_t i = start; i < end; ++i) ds[bi * s + i] = static_cast<int32_t>(start);
      start = end;
    }
  }
  return ds;
}

struct Shape {
  int64_t b, np, ng, s, hn;
};

struct Result {
  std::vector<float> out, lse, dq, dk, dv;
};

// RunRing: every CP rank's forward then backward over the simulated ring. q, k, v, dout
// are the full [b, heads, s, hn] tensors; doc_start the full [b, s] (or empty).
// order(r, i) gives the source rank of rank r's i-th block (ring order by default).
// The dk/dv contributions of each block are summed by the block's owner in arrival
// order of the ranks 0..CP-1, or, with travel = true, accumulated into one buffer that
// follows the block around the ring (Step's accumulate mode).
Result RunRing(const Shape& sh, int64_t cp, int64_t tile, const std::vector<float>& q,
               const std::vector<float>& k, const std::vector<float>& v,
               const std::vector<float>& dout, const std::vector<int32_t>& doc_start,
               int num_threads = 2,
               std::function<int64_t(int64_t, int64_t)> order = nullptr,
               bool travel = false) {
  if (!order) order = [cp](int64_t r, int64_t i) { return ((r - i) % cp + cp) % cp; };
  auto layout = MakeCpLayout(sh.s, cp);
  REQUIRE(layout.ok());
  const int64_t sl = layout->LocalSeq();
  RingAttentionConfig cfg;
  cfg.b = sh.b;
  cfg.heads = sh.np;
  cfg.groups = sh.ng;
  cfg.head_dim = sh.hn;
  cfg.layout = *layout;
  cfg.q_tile = tile;
  cfg.kv_tile = tile;
  kernels::ExecContext ctx;
  ctx.num_threads = num_threads;

  // Per-rank local tensors.
  std::vector<std::vector<float>> ql(cp), kl(cp), vl(cp), dol(cp), outl(cp), lsel(cp),
      dql(cp);
  std::vector<std::vector<int32_t>> dsl(cp);
  for (int64_t r = 0; r < cp; ++r) {
    ql[r].resize(sh.b * sh.np * sl * sh.hn);
    dol[r].resize(ql[r].size());
    kl[r].resize(sh.b * sh.ng * sl * sh.hn);
    vl[r].resize(kl[r].size());
    REQUIRE(SliceSequence(*layout, r, sh.b * sh.np, sh.hn, q.data(), ql[r].data()).ok());
    REQUIRE(SliceSequence(*layout, r, sh.b * sh.np, sh.hn, dout.data(), dol[r].data()).ok());
    REQUIRE(SliceSequence(*layout, r, sh.b * sh.ng, sh.hn, k.data(), kl[r].data()).ok());
    REQUIRE(SliceSequence(*layout, r, sh.b * sh.ng, sh.hn, v.data(), vl[r].data()).ok());
    if (!doc_start.empty()) {
      dsl[r].resize(sh.b * sl);
      REQUIRE(SliceSequence(*layout, r, sh.b, 1, doc_start.data(), dsl[r].data()).ok());
    }
  }

  auto fwd = RingAttentionForward::Create(cfg);
  REQUIRE(fwd.ok());
  auto bwd = RingAttentionBackward::Create(cfg);
  REQUIRE(bwd.ok());
  for (int64_t r = 0; r < cp; ++r) {
    const int32_t* ds = doc_start.empty() ? nullptr : dsl[r].data();
    REQUIRE((*fwd)->Begin(ctx, r, ql[r].data(), ds).ok());
    for (int64_t i = 0; i < cp; ++i) {
      const int64_t src = order(r, i);
      REQUIRE((*fwd)->Step(ctx, src, kl[src].data(), vl[src].data()).ok());
    }
    outl[r].resize(ql[r].size());
    lsel[r].resize(sh.b * sh.np * sl);
    REQUIRE((*fwd)->Finish(ctx, outl[r].data(), lsel[r].data()).ok());
  }

  // Backward: contributions to block j's dk/dv, either kept per (rank, block) and summed
  // by the owner in rank order, or accumulated in a travelling buffer in ring order.
  std::vector<std::vector<float>> dk_sum(cp, std::vector<float>(kl[0].size(), 0.0f));
  std::vector<std::vector<float>> dv_sum(cp, std::vector<float>(kl[0].size(), 0.0f));
  std::vector<float> dk_part(kl[0].size()), dv_part(kl[0].size());
  for (int64_t r = 0; r < cp; ++r) {
    const int32_t* ds = doc_start.empty() ? nullptr : dsl[r].data();
    REQUIRE((*bwd)->Begin(ctx, r, ql[r].data(), ds, outl[r].data(), dol[r].data(),
                          lsel[r].data())
                .ok());
    for (int64_t i = 0; i < cp; ++i) {
      const int64_t src = order(r, i);
      if (travel) {
        REQUIRE((*bwd)->Step(ctx, src, kl[src].data(), vl[src].data(), dk_sum[src].data(),
                             dv_sum[src].data(), /*accumulate=*/true)
                    .ok());
      } else {
        REQUIRE((*bwd)->Step(ctx, src, kl[src].data(), vl[src].data(), dk_part.data(),
                             dv_part.data())
                    .ok());
        for (size_t e = 0; e < dk_part.size(); ++e) {
          dk_sum[src][e] += dk_part[e];
          dv_sum[src][e] += dv_part[e];
        }
      }
    }
    dql[r].resize(ql[r].size());
    REQUIRE((*bwd)->Finish(ctx, dql[r].data()).ok());
  }

  Result res;
  res.out.resize(q.size());
  res.dq.resize(q.size());
  res.lse.resize(sh.b * sh.np * sh.s);
  res.dk.resize(k.size());
  res.dv.resize(v.size());
  for (int64_t r = 0; r < cp; ++r) {
    REQUIRE(GatherSequence(*layout, r, sh.b * sh.np, sh.hn, outl[r].data(), res.out.data())
                .ok());
    REQUIRE(GatherSequence(*layout, r, sh.b * sh.np, sh.hn, dql[r].data(), res.dq.data())
                .ok());
    REQUIRE(GatherSequence(*layout, r, sh.b * sh.np, 1, lsel[r].data(), res.lse.data()).ok());
    REQUIRE(GatherSequence(*layout, r, sh.b * sh.ng, sh.hn, dk_sum[r].data(), res.dk.data())
                .ok());
    REQUIRE(GatherSequence(*layout, r, sh.b * sh.ng, sh.hn, dv_sum[r].data(), res.dv.data())
                .ok());
  }
  return res;
}

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

// MaxRelToMax: max_i |got_i - want_i| / max_i |want_i|.
template <typename W>
double MaxRelToMax(const std::vector<float>& got, const std::vector<W>& want) {
  REQUIRE(got.size() == want.size());
  double err = 0.0, mx = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
    mx = std::max(mx, std::abs(static_cast<double>(want[i])));
  }
  return err / std::max(mx, 1e-30);
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

// Tolerances. Every compared quantity is built from fp32 dot products (hn terms, oneDNN's
// blocked order), exps (1-2 ulp), row sums, and the online merge: a row's softmax is
// merged from n_tiles = s / tile key tiles (each merge rescales by e^(m - m'), a few
// roundings), and a block's dk/dv from the CP ranks' contributions. With random-sign
// inputs these errors grow like a few ulps per summation level, i.e. with
// log2(n_tiles), not with s, so we bound the error relative to the reference's max by
//   Tol(C) = C eps (1 + log2(n_tiles))
// with C = 8 for the forward against float64 (one-sided error), 16 for the gradients
// (two more products per tile) and for any fp32-vs-fp32 comparison (both sides err).
// Measured (printed as warnings): 1-4 eps at seq 256, 2-8 eps at seq 4096, i.e. 6-20x
// below the bounds; a masking or merge bug gives errors of order 1e-2.
double Tol(double c, double n_tiles) { return c * kEps32 * (1.0 + std::log2(n_tiles)); }

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

}  // namespace
}  // namespace mxmaca::layers::cp
