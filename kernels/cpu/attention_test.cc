// Tests for kernels/cpu/attention.h: layout helpers, fp64 reference with finite
// differences (MHA, GQA, document masks, dropout), PyTorch parity, determinism.
#include "kernels/cpu/attention.h"

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/cpu/test_util.h"
#include "kernels/philox.h"

namespace mxmaca::kernels::cpu {
namespace {

using testing::BitEqual;
using testing::NumericalVjp;
using testing::RandomNormal;
using testing::RelError;
using testing::ToDouble;

constexpr double kU32 = 1.0 / (1 << 24);

// Tolerances (norm-wise, u = 2^-24). Independent roundings add like a random walk:
// scores carry a length-D dot product (~sqrt(D) u relative), softmax adds exp's 2 ulp and
// the normalisation, the output GEMM a length-S sum (~sqrt(S) u): a few u in all
// (observed 1-2 u); forward 16 u. Backward chains three more GEMMs and the
// softmax-backward difference dP - rowsum, whose cancellation amplifies by a small
// factor (observed ~3 u): 64 u.
constexpr double kFwdTol = 16 * kU32;
constexpr double kBwdTol = 64 * kU32;

ExecContext Ctx(int threads, Precision p = Precision::kFp32) {
  ExecContext ctx;
  ctx.num_threads = threads;
  ctx.precision = p;
  return ctx;
}

struct Case {
  AttentionShape sh;
  std::vector<int32_t> doc_start;  // empty: plain causal
  float p = 0.0f;
  RngKey key{77, 0};
};

int64_t QSize(const AttentionShape& s) { return s.b * s.heads * s.s * s.head_dim; }
int64_t KvSize(const AttentionShape& s) { return s.b * s.groups * s.s * s.head_dim; }

// Documents of random lengths: doc_start[b, i] = first index of i's document.
std::vector<int32_t> DocStarts(int64_t b, int64_t s, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int32_t> ds(b * s);
  for (int64_t bi = 0; bi < b; ++bi) {
    int32_t start = 0;
    for (int64_t i = 0; i < s; ++i) {
      if (i > 0 && gen() % 5 == 0) start = static_cast<int32_t>(i);
      ds[bi * s + i] = start;
    }
  }
  return ds;
}

// fp64 reference: o = dropout(softmax(scale q k^T + mask)) v with the kernel's Philox
// mask. Returns o; fills probs if given. x = [q | k | v] concatenated.
std::vector<double> AttentionRef(const std::vector<double>& x, const Case& c,
                                 float scale, std::vector<double>* probs = nullptr) {
  const AttentionShape& sh = c.sh;
  const int64_t S = sh.s, D = sh.head_dim, hpg = sh.heads / sh.groups;
  const double* q = x.data();
  const double* k = q + QSize(sh);
  const double* v = k + KvSize(sh);
  std::vector<double> o(QSize(sh), 0.0);
  if (probs) probs->assign(sh.b * sh.heads * S * S, 0.0);
  std::vector<double> row(S);
  for (int64_t b = 0; b < sh.b; ++b)
    for (int64_t h = 0; h < sh.heads; ++h) {
      const int64_t bh = b * sh.heads + h, bg = b * sh.groups + h / hpg;
      for (int64_t i = 0; i < S; ++i) {
        const int64_t lo = c.doc_start.empty() ? 0 : c.doc_start[b * S + i];
        double m = -INFINITY;
        for (int64_t j = lo; j <= i; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += q[(bh * S + i) * D + d] * k[(bg * S + j) * D + d];
          row[j] = scale * s;
          m = std::max(m, row[j]);
        }
        double sum = 0;
        for (int64_t j = lo; j <= i; ++j) sum += (row[j] = std::exp(row[j] - m));
        for (int64_t j = lo; j <= i; ++j) {
          const double pr = row[j] / sum;
          if (probs) (*probs)[(bh * S + i) * S + j] = pr;
          double pd = pr;
          if (c.p > 0) {
            const bool keep = UniformAt(c.key, static_cast<uint64_t>((bh * S + i) * S + j)) >= c.p;
            pd = keep ? pr / (1.0 - c.p) : 0.0;
          }
          for (int64_t d = 0; d < D; ++d) o[(bh * S + i) * D + d] += pd * v[(bg * S + j) * D + d];
        }
      }
    }
  return o;
}

struct Result {
  std::vector<float> probs, o, dq, dk, dv;
};

Result RunKernel(const Case& c, const std::vector<float>& q, const std::vector<float>& k,
                 const std::vector<float>& v, const std::vector<float>& dout, float scale,
                 const ExecContext& ctx) {
  const AttentionShape& sh = c.sh;
  Result r{std::vector<float>(sh.b * sh.heads * sh.s * sh.s, 9.0f),
           std::vector<float>(QSize(sh)), std::vector<float>(QSize(sh)),
           std::vector<float>(KvSize(sh), 9.0f), std::vector<float>(KvSize(sh), 9.0f)};
  const int32_t* ds = c.doc_start.empty() ? nullptr : c.doc_start.data();
  AttentionForward(ctx, sh, q.data(), k.data(), v.data(), ds, scale, c.p, c.key,
                   r.probs.data(), r.o.data());
  AttentionBackward(ctx, sh, q.data(), k.data(), v.data(), r.probs.data(), ds, scale, c.p,
                    c.key, dout.data(), r.dq.data(), r.dk.data(), r.dv.data());
  return r;
}

void CheckAgainstReference(const Case& c, uint32_t seed) {
  const AttentionShape& sh = c.sh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim));
  const std::vector<float> q = RandomNormal(QSize(sh), seed), k = RandomNormal(KvSize(sh), seed + 1),
                           v = RandomNormal(KvSize(sh), seed + 2),
                           dout = RandomNormal(QSize(sh), seed + 3);
  const Result r = RunKernel(c, q, k, v, dout, scale, Ctx(2));
  std::vector<double> x;
  for (const auto* t : {&q, &k, &v}) x.insert(x.end(), t->begin(), t->end());
  std::vector<double> probs_ref;
  CHECK(RelError(r.o, AttentionRef(x, c, scale, &probs_ref)) < kFwdTol);
  CHECK(RelError(r.probs, probs_ref) < kFwdTol);
  // Masked entries of the stash are exactly zero.
  for (size_t i = 0; i < probs_ref.size(); ++i) {
    if (probs_ref[i] == 0.0) REQUIRE(r.probs[i] == 0.0f);
  }
  // Finite differences of the fp64 reference; step 1e-4 on O(1) inputs: truncation
  // ~1e-8, cancellation ~1e-12, both far below kBwdTol ~3.8e-6.
  const auto f = [&](const std::vector<double>& xx) { return AttentionRef(xx, c, scale); };
  const std::vector<double> g = NumericalVjp(f, x, ToDouble(dout), 1e-4);
  const std::vector<double> gq(g.begin(), g.begin() + QSize(sh));
  const std::vector<double> gk(g.begin() + QSize(sh), g.begin() + QSize(sh) + KvSize(sh));
  const std::vector<double> gv(g.begin() + QSize(sh) + KvSize(sh), g.end());
  CHECK(RelError(r.dq, gq) < kBwdTol);
  CHECK(RelError(r.dk, gk) < kBwdTol);
  CHECK(RelError(r.dv, gv) < kBwdTol);
}

TEST_CASE("Attention MHA matches fp64 and finite differences", "[attention]") {
  CheckAgainstReference(Case{{2, 13, 3, 3, 8}, {}, 0.0f}, 1);
}

TEST_CASE("Attention GQA with document masks matches fp64", "[attention]") {
  Case c{{2, 16, 4, 2, 8}, DocStarts(2, 16, 5), 0.0f};
  CheckAgainstReference(c, 2);
}

TEST_CASE("Attention dropout matches fp64 with the Philox mask", "[attention]") {
  Case c{{1, 16, 4, 1, 8}, DocStarts(1, 16, 6), 0.2f, RngKey{99, MakeRngStream(1, 2, 3, 4)}};
  CheckAgainstReference(c, 3);
}

TEST_CASE("Attention over several 64-row blocks matches fp64", "[attention]") {
  // S = 130: three query/key blocks, the last one partial; GQA, documents and dropout.
  Case c{{1, 130, 2, 1, 4}, DocStarts(1, 130, 9), 0.1f, RngKey{11, 12}};
  CheckAgainstReference(c, 4);
}

TEST_CASE("Attention matches PyTorch (causal, GQA, doc masks, dropout)",
          "[attention][parity]") {
  for (int variant = 0; variant < 3; ++variant) {
    Case c{{2, 100, 8, variant == 0 ? 8 : 2, 16}, {}, 0.0f, RngKey{5, 6}};
    if (variant >= 1) c.doc_start = DocStarts(2, 100, 7);
    if (variant == 2) c.p = 0.1f;
    const AttentionShape& sh = c.sh;
    const float scale = 1.0f / std::sqrt(16.0f);
    const std::vector<float> q = RandomNormal(QSize(sh), 10 + variant),
                             k = RandomNormal(KvSize(sh), 20 + variant),
                             v = RandomNormal(KvSize(sh), 30 + variant),
                             dout = RandomNormal(QSize(sh), 40 + variant);
    const Result r = RunKernel(c, q, k, v, dout, scale, Ctx(2));
    testing::TorchRef ref("attention");
    ref.Param("b", sh.b);
    ref.Param("s", sh.s);
    ref.Param("nh", sh.heads);
    ref.Param("ng", sh.groups);
    ref.Param("d", sh.head_dim);
    ref.Param("scale", scale);
    ref.Input("q", q);
    ref.Input("k", k);
    ref.Input("v", v);
    ref.Input("dout", dout);
    if (!c.doc_start.empty()) ref.Input("doc_start", c.doc_start);
    if (c.p > 0) {
      // The keep mask from Philox, handed to torch so it applies the same dropout.
      std::vector<float> keep(sh.b * sh.heads * sh.s * sh.s);
      for (size_t i = 0; i < keep.size(); ++i) keep[i] = UniformAt(c.key, i) >= c.p ? 1.0f : 0.0f;
      ref.Input("keep", keep);
      ref.Param("dropout_p", c.p);
    }
    auto out = ref.Run();
    INFO("variant " << variant);
    CHECK(RelError(r.o, out["o"]) < kFwdTol);
    CHECK(RelError(r.probs, out["probs"]) < kFwdTol);
    CHECK(RelError(r.dq, out["dq"]) < kBwdTol);
    CHECK(RelError(r.dk, out["dk"]) < kBwdTol);
    CHECK(RelError(r.dv, out["dv"]) < kBwdTol);
  }
}

TEST_CASE("Attention is bit-identical for 1 and 2 threads", "[attention][determinism]") {
  for (Precision prec : {Precision::kFp32, Precision::kBf16}) {
    Case c{{2, 150, 4, 2, 16}, DocStarts(2, 150, 8), 0.1f, RngKey{3, 4}};
    const AttentionShape& sh = c.sh;
    const std::vector<float> q = RandomNormal(QSize(sh), 50), k = RandomNormal(KvSize(sh), 51),
                             v = RandomNormal(KvSize(sh), 52),
                             dout = RandomNormal(QSize(sh), 53);
    const Result a = RunKernel(c, q, k, v, dout, 0.25f, Ctx(1, prec));
    const Result b = RunKernel(c, q, k, v, dout, 0.25f, Ctx(2, prec));
    REQUIRE(BitEqual(a.probs, b.probs));
    REQUIRE(BitEqual(a.o, b.o));
    REQUIRE(BitEqual(a.dq, b.dq));
    REQUIRE(BitEqual(a.dk, b.dk));
    REQUIRE(BitEqual(a.dv, b.dv));
  }
}

TEST_CASE("SplitQkv follows Megatron's [NG, HPG+2, D] layout; MergeQkvGrad inverts it",
          "[attention]") {
  const AttentionShape sh{2, 5, 6, 2, 4};  // HPG = 3
  const int64_t hpg = 3, D = 4, width = sh.groups * (hpg + 2) * D;
  const std::vector<float> qkv = RandomNormal(sh.b * sh.s * width, 60);
  std::vector<float> q(QSize(sh)), k(KvSize(sh)), v(KvSize(sh)), back(qkv.size());
  SplitQkv(Ctx(2), sh, qkv.data(), q.data(), k.data(), v.data());
  for (int64_t b = 0; b < sh.b; ++b)
    for (int64_t s = 0; s < sh.s; ++s)
      for (int64_t g = 0; g < sh.groups; ++g)
        for (int64_t d = 0; d < D; ++d) {
          const float* grp = qkv.data() + (b * sh.s + s) * width + g * (hpg + 2) * D;
          for (int64_t j = 0; j < hpg; ++j) {
            REQUIRE(q[((b * sh.heads + g * hpg + j) * sh.s + s) * D + d] == grp[j * D + d]);
          }
          REQUIRE(k[((b * sh.groups + g) * sh.s + s) * D + d] == grp[hpg * D + d]);
          REQUIRE(v[((b * sh.groups + g) * sh.s + s) * D + d] == grp[(hpg + 1) * D + d]);
        }
  MergeQkvGrad(Ctx(2), sh, q.data(), k.data(), v.data(), back.data());
  REQUIRE(BitEqual(back, qkv));
}

TEST_CASE("HeadsToTokens and TokensToHeads are inverse transposes", "[attention]") {
  const AttentionShape sh{3, 7, 4, 4, 5};
  const std::vector<float> o = RandomNormal(QSize(sh), 70);
  std::vector<float> tokens(o.size()), heads(o.size());
  HeadsToTokens(Ctx(2), sh, o.data(), tokens.data());
  for (int64_t b = 0; b < sh.b; ++b)
    for (int64_t h = 0; h < sh.heads; ++h)
      for (int64_t s = 0; s < sh.s; ++s)
        for (int64_t d = 0; d < sh.head_dim; ++d) {
          REQUIRE(tokens[((b * sh.s + s) * sh.heads + h) * sh.head_dim + d] ==
                  o[((b * sh.heads + h) * sh.s + s) * sh.head_dim + d]);
        }
  TokensToHeads(Ctx(2), sh, tokens.data(), heads.data());
  REQUIRE(BitEqual(heads, o));
}

}  // namespace
}  // namespace mxmaca::kernels::cpu
