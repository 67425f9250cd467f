// kernels/cuda/gemm_test.cc: cuBLASLt GEMMs against kernels/cpu/gemm (needs a GPU;
// skips with the reason otherwise).
#include "kernels/cuda/gemm.h"

#include <catch2/catch.hpp>

#include <memory>

#include "kernels/cpu/gemm.h"
#include "kernels/cuda/test_util.h"

namespace mxmaca::kernels::cuda {
namespace {

using testing::DeviceVector;
using testing::Normal;
using testing::RelErr;

TEST_CASE("Gemm fp32 and bf16 match the CPU backend for every transpose") {
  if (!testing::GpuOrSkip()) return;
  std::unique_ptr<GemmHandle> handle;
  REQUIRE_OK(GemmHandle::Create(32 << 20, &handle));
  const int64_t m = 70, n = 45, k = 130;
  for (int tr = 0; tr < 4; ++tr) {
    const bool ta = tr & 1, tb = tr & 2;
    const int64_t lda = ta ? m : k, ldb = tb ? k : n;
    const auto a = Normal(10 + tr, m * k), b = Normal(20 + tr, k * n), c0 = Normal(30 + tr, m * n);
    for (int bf = 0; bf < 2; ++bf) {
      ExecContext ctx;
      ctx.precision = bf ? Precision::kBf16 : Precision::kFp32;
      auto want = c0;
      cpu::Gemm(ctx, ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 0.25f, want.data(), n);
      DeviceVector<float> da(a), db(b), dc(c0);
      REQUIRE_OK(Gemm(ctx, *handle, ta, tb, m, n, k, 0.5f, da.get(), lda, db.get(), ldb, 0.25f,
                      dc.get(), n));
      // fp32: both accumulate in fp32 over k = 130 terms (~1e-7 apart). bf16: the same
      // bf16-rounded operands when cuBLASLt's down-conversion rounds to nearest even;
      // 5e-3 also admits a truncating conversion (2^-8 relative per operand), which the
      // GPU check binary would then report against its bf16 bound.
      CHECK(RelErr(dc.Host(), want) < (bf ? 5e-3 : 1e-5));
      if (bf) {  // explicit RNE conversion + bf16 operands: same operands as the CPU.
        DeviceVector<__nv_bfloat16> ha(std::vector<__nv_bfloat16>(a.size())),
            hb(std::vector<__nv_bfloat16>(b.size()));
        REQUIRE_OK(ConvertToBf16(ctx, da.get(), ha.get(), a.size()));
        REQUIRE_OK(ConvertToBf16(ctx, db.get(), hb.get(), b.size()));
        DeviceVector<float> dc2(c0);
        REQUIRE_OK(GemmBf16(ctx, *handle, ta, tb, m, n, k, 0.5f, ha.get(), lda, hb.get(), ldb,
                            0.25f, dc2.get(), n));
        CHECK(RelErr(dc2.Host(), want) < 1e-5);
      }
    }
  }
}

TEST_CASE("GemmStridedBatched matches per-batch CPU products") {
  if (!testing::GpuOrSkip()) return;
  std::unique_ptr<GemmHandle> handle;
  REQUIRE_OK(GemmHandle::Create(32 << 20, &handle));
  const int64_t batch = 3, m = 33, n = 17, k = 40;
  const auto a = Normal(1, batch * m * k), b = Normal(2, batch * n * k);
  std::vector<float> want(batch * m * n);
  ExecContext ctx;
  cpu::GemmStridedBatched(ctx, false, true, m, n, k, 1.0f, a.data(), k, m * k, b.data(), k,
                          n * k, 0.0f, want.data(), n, m * n, batch);
  DeviceVector<float> da(a), db(b), dc(batch * m * n);
  REQUIRE_OK(GemmStridedBatched(ctx, *handle, false, true, m, n, k, 1.0f, da.get(), k, m * k,
                                db.get(), k, n * k, 0.0f, dc.get(), n, m * n, batch));
  CHECK(RelErr(dc.Host(), want) < 1e-5);
}

TEST_CASE("Gemm on views at odd offsets with padded leading dimensions") {
  if (!testing::GpuOrSkip()) return;
  std::unique_ptr<GemmHandle> handle;
  REQUIRE_OK(GemmHandle::Create(32 << 20, &handle));
  const int64_t m = 21, n = 34, k = 19, lda = k + 3, ldb = n + 1, ldc = n + 2;
  const auto a = Normal(5, m * lda + 1), b = Normal(6, k * ldb + 1);
  std::vector<float> want(m * ldc + 1, 0.0f);
  ExecContext ctx;
  cpu::Gemm(ctx, false, false, m, n, k, 1.0f, a.data() + 1, lda, b.data() + 1, ldb, 0.0f,
            want.data() + 1, ldc);
  DeviceVector<float> da(a), db(b), dc(m * ldc + 1);
  REQUIRE_OK(Gemm(ctx, *handle, false, false, m, n, k, 1.0f, da.get() + 1, lda, db.get() + 1,
                  ldb, 0.0f, dc.get() + 1, ldc));
  CHECK(RelErr(dc.Host(), want) < 1e-5);
}

}  // namespace
}  // namespace mxmaca::kernels::cuda
