// layers/moe/dispatch/buffer_pool_test.cc: BufferPool hands back the best-fitting buffer,
// keeps within its byte and count limits (the largest buffers), and sizes what it hands out
// exactly.
#include "layers/moe/dispatch/buffer_pool.h"

#include <catch2/catch.hpp>

namespace mxmaca::layers::moe::dispatch {
namespace {

TEST_CASE("BufferPool reuses the smallest buffer that fits") {
  BufferPool pool(/*max_bytes=*/1 << 20, /*max_buffers=*/2);
  std::vector<float> a = pool.Take(100), b = pool.Take(1000);
  CHECK(a.size() == 100);
  CHECK(a[0] == 0.0f);  // new buffers are zero-filled
  const float* b_data = b.data();
  pool.Give(std::move(a));
  pool.Give(std::move(b));
  CHECK(pool.size() == 2);
  std::vector<float> c = pool.Take(500);  // only b's 1000 fits
  CHECK(c.size() == 500);
  CHECK(c.data() == b_data);
  CHECK(pool.size() == 1);
  std::vector<float> d = pool.Take(50);  // a's 100
  CHECK(d.size() == 50);
  CHECK(pool.size() == 0);
  std::vector<float> e = pool.Take(2000);  // nothing fits: new
  CHECK(e.size() == 2000);
}

TEST_CASE("BufferPool keeps the largest buffers up to its limit") {
  BufferPool pool(/*max_bytes=*/1 << 20, /*max_buffers=*/2);
  pool.Give(std::vector<float>(10));
  pool.Give(std::vector<float>(30));
  pool.Give(std::vector<float>(20));  // replaces the 10
  pool.Give(std::vector<float>(5));   // dropped
  pool.Give(std::vector<float>());    // no capacity: dropped
  CHECK(pool.size() == 2);
  CHECK(pool.Take(25).capacity() >= 30);
  CHECK(pool.Take(15).capacity() == 20);
  CHECK(pool.size() == 0);
}

TEST_CASE("BufferPool respects its byte limit") {
  BufferPool pool(/*max_bytes=*/1000 * 4, /*max_buffers=*/10);
  pool.Give(std::vector<float>(400));
  pool.Give(std::vector<float>(500));
  CHECK(pool.held_bytes() == 900 * 4);
  pool.Give(std::vector<float>(300));  // would exceed: both held ones are larger -> dropped
  CHECK(pool.size() == 2);
  pool.Give(std::vector<float>(600));  // evicts the 400 (smallest), then fits with the 500?
  // 500 + 600 = 1100 > 1000: the 500 goes too; the 600 alone fits.
  CHECK(pool.size() == 1);
  CHECK(pool.held_bytes() == 600 * 4);
  pool.Give(std::vector<float>(2000));  // larger than the whole limit: never held
  CHECK(pool.held_bytes() == 600 * 4);
  CHECK(pool.Take(600).capacity() >= 600);
  CHECK(pool.held_bytes() == 0);
}

}  // namespace
}  // namespace mxmaca::layers::moe::dispatch
