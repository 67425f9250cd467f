// kernels/cuda/attention_test.cc: causal attention against kernels/cpu (needs a GPU;
// skips with the reason otherwise). fp32: 1e-5 norm-wise (fp32 GEMMs over S = 48 and
// D = 16 terms, softmax in fp32). bf16: both backends round the same GEMM operands to
// bf16, but a probability or gradient computed slightly differently in fp32 can round to
// a neighbouring bf16 value (2^-8 relative), so 2e-3.
#include "kernels/cuda/attention.h"

#include <catch2/catch.hpp>

#include <memory>

#include "kernels/cpu/attention.h"
#include "kernels/cuda/test_util.h"
#include "kernels/philox.h"

namespace mxmaca::kernels::cuda {
namespace {

using testing::DeviceVector;
using testing::Normal;
using testing::RelErr;

TEST_CASE("attention forward/backward match the CPU backend (GQA, documents, dropout)") {
  if (!testing::GpuOrSkip()) return;
  std::unique_ptr<GemmHandle> handle;
  REQUIRE_OK(GemmHandle::Create(32 << 20, &handle));
  const AttentionShape sh{2, 48, 4, 2, 16};
  const cpu::AttentionShape csh{2, 48, 4, 2, 16};
  const int64_t nq = 2 * 4 * 48 * 16, nkv = 2 * 2 * 48 * 16, np = 2 * 4 * 48 * 48;
  const auto q = Normal(1, nq), k = Normal(2, nkv), v = Normal(3, nkv), dout = Normal(4, nq);
  std::vector<int32_t> doc(2 * 48);
  for (int64_t i = 0; i < 2 * 48; ++i) doc[i] = (i % 48) < 20 ? 0 : 20;
  DeviceVector<float> dq(q), dk(k), dv(v), ddout(dout), probs(np), o(nq), scratch(np), gq(nq),
      gk(nkv), gv(nkv);
  DeviceVector<int32_t> ddoc(doc);
  const RngKey key{7, MakeRngStream(5, 1, 0, 0)};
  for (int bf = 0; bf < 2; ++bf) {
    ExecContext ctx;
    ctx.precision = bf ? Precision::kBf16 : Precision::kFp32;
    const double tol = bf ? 2e-3 : 1e-5;
    std::vector<float> wp(np), wo(nq), wdq(nq), wdk(nkv), wdv(nkv);
    cpu::AttentionForward(ctx, csh, q.data(), k.data(), v.data(), doc.data(), 0.25f, 0.1f, key, wp.data(), wo.data());
    REQUIRE_OK(AttentionForward(ctx, *handle, sh, dq.get(), dk.get(), dv.get(), ddoc.get(), 0.25f, 0.1f, key,
                                probs.get(), o.get(), scratch.get()));
    CHECK(RelErr(probs.Host(), wp) < tol);
    CHECK(RelErr(o.Host(), wo) < tol);
    // Both backwards read the CPU's probabilities (the GPU's differ in the last bits).
    DeviceVector<float> cp(wp);
    cpu::AttentionBackward(ctx, csh, q.data(), k.data(), v.data(), wp.data(), doc.data(), 0.25f, 0.1f, key,
                           dout.data(), wdq.data(), wdk.data(), wdv.data());
    REQUIRE_OK(AttentionBackward(ctx, *handle, sh, dq.get(), dk.get(), dv.get(), cp.get(), ddoc.get(), 0.25f, 0.1f,
                                 key, ddout.get(), gq.get(), gk.get(), gv.get(), scratch.get()));
    CHECK(RelErr(gq.Host(), wdq) < tol);
    CHECK(RelErr(gk.Host(), wdk) < tol);
    CHECK(RelErr(gv.Host(), wdv) < tol);
  }
}

TEST_CASE("attention layout changes match the CPU backend bits") {
  if (!testing::GpuOrSkip()) return;
  ExecContext ctx;
  const AttentionShape sh{2, 5, 6, 3, 4};
  const cpu::AttentionShape csh{2, 5, 6, 3, 4};
  const int64_t width = 3 * (2 + 2) * 4, nq = 2 * 6 * 5 * 4, nkv = 2 * 3 * 5 * 4;
  const auto qkv = Normal(1, 2 * 5 * width);
  std::vector<float> q(nq), k(nkv), v(nkv), tok(nq);
  cpu::SplitQkv(ctx, csh, qkv.data(), q.data(), k.data(), v.data());
  cpu::HeadsToTokens(ctx, csh, q.data(), tok.data());
  DeviceVector<float> dqkv(qkv), dq(nq), dk(nkv), dv(nkv), dtok(nq), back(qkv.size()), heads(nq);
  REQUIRE_OK(SplitQkv(ctx, sh, dqkv.get(), dq.get(), dk.get(), dv.get()));
  CHECK(dq.Host() == q);
  CHECK(dk.Host() == k);
  CHECK(dv.Host() == v);
  REQUIRE_OK(MergeQkvGrad(ctx, sh, dq.get(), dk.get(), dv.get(), back.get()));
  CHECK(back.Host() == qkv);
  REQUIRE_OK(HeadsToTokens(ctx, sh, dq.get(), dtok.get()));
  CHECK(dtok.Host() == tok);
  REQUIRE_OK(TokensToHeads(ctx, sh, dtok.get(), heads.get()));
  CHECK(heads.Host() == q);
}

}  // namespace
}  // namespace mxmaca::kernels::cuda
