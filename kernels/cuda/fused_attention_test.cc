// kernels/cuda/fused_attention_test.cc: the fused (online-softmax) attention against the
// CPU backend's materialised attention (needs a GPU; skips with the reason otherwise).
// fp32 both sides: 1e-5 norm-wise (S = 100 keys, D = 32; the online rescaling adds a few
// roundings per tile). S = 100 is not a multiple of the 64-row tile (tails), and the case
// has GQA, documents and dropout.
#include "kernels/cuda/fused_attention.h"

#include <catch2/catch.hpp>

#include "kernels/cpu/attention.h"
#include "kernels/cuda/test_util.h"
#include "kernels/philox.h"

namespace mxmaca::kernels::cuda {
namespace {

using testing::DeviceVector;
using testing::Normal;
using testing::RelErr;

TEST_CASE("fused attention forward/backward match the CPU backend") {
  if (!testing::GpuOrSkip()) return;
  const int64_t B = 2, S = 100, NH = 4, NG = 2, D = 32;
  const AttentionShape sh{B, S, NH, NG, D};
  const cpu::AttentionShape csh{B, S, NH, NG, D};
  const int64_t nq = B * NH * S * D, nkv = B * NG * S * D;
  const auto q = Normal(1, nq), k = Normal(2, nkv), v = Normal(3, nkv), dout = Normal(4, nq);
  std::vector<int32_t> doc(B * S);
  for (int64_t i = 0; i < B * S; ++i) doc[i] = (i % S) < 30 ? 0 : ((i % S) < 77 ? 30 : 77);
  DeviceVector<float> dq(q), dk(k), dv(v), ddout(dout), o(nq), lse(B * NH * S), gq(nq), gk(nkv),
      gv(nkv), delta(B * NH * S);
  DeviceVector<int32_t> ddoc(doc);
  ExecContext ctx;
  for (int cfg = 0; cfg < 2; ++cfg) {
    const float p = cfg ? 0.1f : 0.0f;
    const int32_t* hdoc = cfg ? doc.data() : nullptr;
    const int32_t* gdoc = cfg ? ddoc.get() : nullptr;
    const RngKey key{3, MakeRngStream(9, 9, 1, 1)};
    std::vector<float> wp(B * NH * S * S), wo(nq), wdq(nq), wdk(nkv), wdv(nkv);
    cpu::AttentionForward(ctx, csh, q.data(), k.data(), v.data(), hdoc, 0.17f, p, key, wp.data(), wo.data());
    REQUIRE_OK(FusedAttentionForward(ctx, sh, dq.get(), dk.get(), dv.get(), gdoc, 0.17f, p, key, o.get(), lse.get()));
    CHECK(RelErr(o.Host(), wo) < 1e-5);
    cpu::AttentionBackward(ctx, csh, q.data(), k.data(), v.data(), wp.data(), hdoc, 0.17f, p, key, dout.data(),
                           wdq.data(), wdk.data(), wdv.data());
    REQUIRE_OK(FusedAttentionBackward(ctx, sh, dq.get(), dk.get(), dv.get(), o.get(), lse.get(), gdoc, 0.17f, p, key,
                                      ddout.get(), gq.get(), gk.get(), gv.get(), delta.get()));
    CHECK(RelErr(gq.Host(), wdq) < 1e-5);
    CHECK(RelErr(gk.Host(), wdk) < 1e-5);
    CHECK(RelErr(gv.Host(), wdv) < 1e-5);
  }
}

TEST_CASE("fused attention refuses unsupported head dims") {
  ExecContext ctx;
  const CudaStatus s = FusedAttentionForward(ctx, AttentionShape{1, 8, 2, 2, 48}, nullptr, nullptr,
                                             nullptr, nullptr, 0.1f, 0.0f, RngKey{}, nullptr, nullptr);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("head_dim must be 32, 64 or 128") != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::kernels::cuda
