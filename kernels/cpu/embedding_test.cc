// Tests for kernels/cpu/embedding.h.
#include "kernels/cpu/embedding.h"

#include <algorithm>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/cpu/test_util.h"

namespace mxmaca::kernels::cpu {
namespace {

using testing::BitEqual;
using testing::RandomInts;
using testing::RandomVector;

ExecContext Ctx(int threads) {
  ExecContext ctx;
  ctx.num_threads = threads;
  return ctx;
}

TEST_CASE("EmbeddingForward copies or accumulates table rows", "[embedding]") {
  const int64_t vocab = 50, h = 130, n = 700;
  const std::vector<int32_t> ids = RandomInts(n, 1, 0, vocab - 1);
  const std::vector<float> table = RandomVector(vocab * h, 2);
  const std::vector<float> base = RandomVector(n * h, 3);
  std::vector<float> out = base, acc = base;
  EmbeddingForward(Ctx(2), ids.data(), n, table.data(), h, out.data(), false);
  EmbeddingForward(Ctx(2), ids.data(), n, table.data(), h, acc.data(), true);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < h; ++c) {
      REQUIRE(out[i * h + c] == table[ids[i] * h + c]);
      REQUIRE(acc[i * h + c] == base[i * h + c] + table[ids[i] * h + c]);
    }
  }
}

TEST_CASE("EmbeddingBackward adds rows in token order, for any thread count",
          "[embedding][determinism]") {
  // Few distinct ids so rows collect many contributions (order matters for the bits).
  const int64_t vocab = 17, h = 200, n = 3000;
  const std::vector<int32_t> ids = RandomInts(n, 4, 0, vocab - 1);
  const std::vector<float> dout = RandomVector(n * h, 5);
  const std::vector<float> d0 = RandomVector(vocab * h, 6);
  // The contract's order, written as the plain serial loop.
  std::vector<float> want = d0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < h; ++c) want[ids[i] * h + c] += dout[i * h + c];
  }
  for (int threads : {1, 2}) {
    std::vector<float> got = d0;
    EmbeddingBackward(Ctx(threads), ids.data(), n, dout.data(), h, got.data());
    REQUIRE(BitEqual(got, want));
  }
}

TEST_CASE("Vocab-shard embeddings sum to the full embedding; gradients split by shard",
          "[embedding][determinism]") {
  const int64_t vocab = 40, h = 70, n = 500, shard = 15;  // shards [0,15) [15,30) [30,40)
  std::vector<int32_t> ids = RandomInts(n, 7, 0, vocab - 1);
  ids[3] = -5;      // invalid ids: zero rows, no gradient, no out-of-bounds access
  ids[4] = 1000;
  const std::vector<float> table = RandomVector(vocab * h, 8);
  const std::vector<float> dout = RandomVector(n * h, 9);
  std::vector<float> sum(n * h, 0.0f);
  for (int64_t start = 0; start < vocab; start += shard) {
    const int64_t rows = std::min(shard, vocab - start);
    std::vector<float> out(n * h, 5.0f), acc(n * h, 0.0f);
    VocabShardEmbeddingForward(Ctx(2), ids.data(), n, table.data() + start * h, start, rows,
                               h, out.data(), false);
    VocabShardEmbeddingForward(Ctx(2), ids.data(), n, table.data() + start * h, start, rows,
                               h, acc.data(), true);
    REQUIRE(BitEqual(out, acc));  // accumulate onto zeros == overwrite
    for (int64_t i = 0; i < n * h; ++i) sum[i] += out[i];
    for (int threads : {1, 2}) {
      std::vector<float> d(rows * h, 0.25f), want(rows * h, 0.25f);
      VocabShardEmbeddingBackward(Ctx(threads), ids.data(), n, dout.data(), start, rows, h,
                                  d.data());
      for (int64_t i = 0; i < n; ++i) {
        if (ids[i] < start || ids[i] >= start + rows) continue;
        for (int64_t c = 0; c < h; ++c) want[(ids[i] - start) * h + c] += dout[i * h + c];
      }
      REQUIRE(BitEqual(d, want));
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    const bool valid = ids[i] >= 0 && ids[i] < vocab;
    for (int64_t c = 0; c < h; ++c) {
      // Exactly one shard contributes (others add +0.0f): the sum is the row itself.
      REQUIRE(sum[i * h + c] == (valid ? table[ids[i] * h + c] : 0.0f));
    }
  }
}

}  // namespace
}  // namespace mxmaca::kernels::cpu
