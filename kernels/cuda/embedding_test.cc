// kernels/cuda/embedding_test.cc: embedding lookup/gradient against kernels/cpu (needs a
// GPU; skips with the reason otherwise). Bit-exact: the lookup copies, and the gradient
// adds each token's row in token order on both backends.
#include "kernels/cuda/embedding.h"

#include <catch2/catch.hpp>

#include "kernels/cpu/embedding.h"
#include "kernels/cuda/test_util.h"

namespace mxmaca::kernels::cuda {
namespace {

using testing::DeviceVector;
using testing::Normal;

TEST_CASE("embedding forward/backward (full and vocab shard) match the CPU backend bits") {
  if (!testing::GpuOrSkip()) return;
  ExecContext ctx;
  const int64_t v = 97, h = 40, n = 300;
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * 31 + i / 7) % v);
  const auto table = Normal(1, v * h), dout = Normal(2, n * h), out0 = Normal(3, n * h),
             dt0 = Normal(4, v * h);
  DeviceVector<int32_t> dids(ids);
  DeviceVector<float> dtab(table), ddout(dout);
  for (int acc = 0; acc < 2; ++acc) {
    std::vector<float> want = out0;
    cpu::EmbeddingForward(ctx, ids.data(), n, table.data(), h, want.data(), acc);
    DeviceVector<float> out(out0);
    REQUIRE_OK(EmbeddingForward(ctx, dids.get(), n, dtab.get(), h, out.get(), acc));
    CHECK(out.Host() == want);
    want = out0;
    cpu::VocabShardEmbeddingForward(ctx, ids.data(), n, table.data() + 30 * h, 30, 40, h, want.data(), acc);
    DeviceVector<float> out2(out0);
    REQUIRE_OK(VocabShardEmbeddingForward(ctx, dids.get(), n, dtab.get() + 30 * h, 30, 40, h, out2.get(), acc));
    CHECK(out2.Host() == want);
  }
  std::vector<float> want = dt0;
  cpu::EmbeddingBackward(ctx, ids.data(), n, dout.data(), h, want.data());
  DeviceVector<float> dt(dt0);
  REQUIRE_OK(EmbeddingBackward(ctx, dids.get(), n, ddout.get(), h, dt.get()));
  CHECK(dt.Host() == want);
  std::vector<float> shard_want(dt0.begin(), dt0.begin() + 40 * h);
  cpu::VocabShardEmbeddingBackward(ctx, ids.data(), n, dout.data(), 30, 40, h, shard_want.data());
  DeviceVector<float> shard(std::vector<float>(dt0.begin(), dt0.begin() + 40 * h));
  REQUIRE_OK(VocabShardEmbeddingBackward(ctx, dids.get(), n, ddout.get(), 30, 40, h, shard.get()));
  CHECK(shard.Host() == shard_want);
}

}  // namespace
}  // namespace mxmaca::kernels::cuda
