// layers/moe/dispatch/buffer_pool_test.cc: BufferPool hands back the best-fitting buffer,
// keeps at most its limit (the largest ones), and sizes what it hands out exactly.
#include "layers/moe/dispatch/internal/buffer_pool.h"

#include <catch2/catch.hpp>

namespace mxmaca::layers::moe::dispatch::internal {
namespace {

TEST_CASE("BufferPool reuses the smallest buffer that fits") {
  BufferPool pool(2);
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
  BufferPool pool(2);
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

}  // namespace
}  // namespace mxmaca::layers::moe::dispatch::internal
