// Tests for kernels/cpu/rope.h: fp64 reference, adjointness of the backward, finite
// differences, PyTorch parity, determinism.
#include "kernels/cpu/rope.h"

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/cpu/test_util.h"

namespace mxmaca::kernels::cpu {
namespace {

using testing::BitEqual;
using testing::NumericalVjp;
using testing::RandomInts;
using testing::RandomNormal;
using testing::RelError;
using testing::ToDouble;

constexpr double kU32 = 1.0 / (1 << 24);

ExecContext Ctx(int threads) {
  ExecContext ctx;
  ctx.num_threads = threads;
  return ctx;
}

struct Shape {
  int64_t b, s, heads, d, rd;
  float base;
};

// fp64 rotation with Megatron's fp32 angles (see rope.h).
std::vector<double> RopeRef(const std::vector<double>& x, const std::vector<int32_t>& pos,
                            const Shape& sh) {
  std::vector<double> y = x;
  const int64_t half = sh.rd / 2;
  for (int64_t b = 0; b < sh.b; ++b)
    for (int64_t h = 0; h < sh.heads; ++h)
      for (int64_t s = 0; s < sh.s; ++s) {
        const int64_t row = ((b * sh.heads + h) * sh.s + s) * sh.d;
        for (int64_t j = 0; j < half; ++j) {
          const float inv = 1.0f / std::pow(sh.base, float(2 * j) / float(sh.rd));
          const double a = static_cast<float>(static_cast<float>(pos[b * sh.s + s]) * inv);
          const double x1 = x[row + j], x2 = x[row + j + half];
          y[row + j] = x1 * std::cos(a) - x2 * std::sin(a);
          y[row + j + half] = x2 * std::cos(a) + x1 * std::sin(a);
        }
      }
  return y;
}

TEST_CASE("RoPE forward matches fp64; backward is its adjoint", "[rope]") {
  // Partial rotary (rd < d): the tail of each row passes through unchanged.
  const Shape sh{2, 37, 3, 24, 16, 10000.0f};
  const int64_t total = sh.b * sh.heads * sh.s * sh.d;
  // Positions restart inside the sequence (--reset-position-ids) and go up to ~500.
  std::vector<int32_t> pos = RandomInts(sh.b * sh.s, 1, 0, 500);
  pos[0] = 0;
  const std::vector<float> x = RandomNormal(total, 2);
  const std::vector<float> dy = RandomNormal(total, 3);
  std::vector<float> y = x, dx = dy;
  RopeForward(Ctx(2), y.data(), pos.data(), sh.b, sh.s, sh.heads, sh.d, sh.rd, sh.base);
  RopeBackward(Ctx(2), dx.data(), pos.data(), sh.b, sh.s, sh.heads, sh.d, sh.rd, sh.base);
  // Two products and a sum per element, cos/sin rounded to fp32: 8 u.
  CHECK(RelError(y, RopeRef(ToDouble(x), pos, sh)) < 8 * kU32);
  // Linear map: the finite difference is exact up to fp64 rounding (step 1e-3).
  const auto f = [&](const std::vector<double>& xx) { return RopeRef(xx, pos, sh); };
  CHECK(RelError(dx, NumericalVjp(f, ToDouble(x), ToDouble(dy), 1e-3)) < 8 * kU32);
  for (int64_t r = 0; r < total / sh.d; ++r)
    for (int64_t c = sh.rd; c < sh.d; ++c) REQUIRE(y[r * sh.d + c] == x[r * sh.d + c]);
  // Rotation: backward undoes forward up to rounding.
  std::vector<float> back = y;
  RopeBackward(Ctx(1), back.data(), pos.data(), sh.b, sh.s, sh.heads, sh.d, sh.rd, sh.base);
  CHECK(RelError(back, x) < 8 * kU32);
}

// fp64 interleaved rotation (rope_utils.py _rotate_half with rotary_interleaved: the last
// dim becomes [-x1, x0, -x3, x2, ...]; emb repeats each frequency twice in place).
std::vector<double> RopeInterleavedRef(const std::vector<double>& x,
                                       const std::vector<int32_t>& pos, const Shape& sh) {
  std::vector<double> y = x;
  for (int64_t r = 0; r < sh.b * sh.heads * sh.s; ++r) {
    const int64_t b = r / (sh.heads * sh.s), s = r % sh.s, row = r * sh.d;
    for (int64_t c = 0; c < sh.rd; ++c) {
      const int64_t j = c / 2;
      const float inv = 1.0f / std::pow(sh.base, float(2 * j) / float(sh.rd));
      const double a = static_cast<float>(static_cast<float>(pos[b * sh.s + s]) * inv);
      const double rotated = c % 2 == 0 ? -x[row + c + 1] : x[row + c - 1];
      y[row + c] = x[row + c] * std::cos(a) + rotated * std::sin(a);
    }
  }
  return y;
}

TEST_CASE("Interleaved RoPE (--rotary-interleaved) matches fp64; backward is its adjoint",
          "[rope]") {
  const Shape sh{2, 19, 3, 24, 16, 10000.0f};
  const int64_t total = sh.b * sh.heads * sh.s * sh.d;
  std::vector<int32_t> pos = RandomInts(sh.b * sh.s, 11, 0, 300);
  const std::vector<float> x = RandomNormal(total, 12), dy = RandomNormal(total, 13);
  RopeFrequencies f;
  f.base = sh.base;
  f.interleaved = true;
  std::vector<float> y = x, dx = dy;
  RopeForward(Ctx(2), y.data(), pos.data(), sh.b, sh.s, sh.heads, sh.d, sh.rd, f);
  RopeBackward(Ctx(2), dx.data(), pos.data(), sh.b, sh.s, sh.heads, sh.d, sh.rd, f);
  CHECK(RelError(y, RopeInterleavedRef(ToDouble(x), pos, sh)) < 8 * kU32);
  const auto fn = [&](const std::vector<double>& xx) { return RopeInterleavedRef(xx, pos, sh); };
  CHECK(RelError(dx, NumericalVjp(fn, ToDouble(x), ToDouble(dy), 1e-3)) < 8 * kU32);
  for (int64_t r = 0; r < total / sh.d; ++r)
    for (int64_t c = sh.rd; c < sh.d; ++c) REQUIRE(y[r * sh.d + c] == x[r * sh.d + c]);
  // Not the half-split rotation.
  CHECK(RelError(y, RopeRef(ToDouble(x), pos, sh)) > 1e-2);
}

TEST_CASE("RoPE matches PyTorch (Megatron formula)", "[rope][parity]") {
  const Shape sh{2, 64, 4, 32, 32, 10000.0f};
  const int64_t total = sh.b * sh.heads * sh.s * sh.d;
  std::vector<int32_t> pos(sh.b * sh.s);
  for (int64_t b = 0; b < sh.b; ++b)
    for (int64_t s = 0; s < sh.s; ++s) pos[b * sh.s + s] = b == 0 ? s : s % 23;  // resets
  const std::vector<float> x = RandomNormal(total, 4), dy = RandomNormal(total, 5);
  std::vector<float> y = x, dx = dy;
  RopeForward(Ctx(2), y.data(), pos.data(), sh.b, sh.s, sh.heads, sh.d, sh.rd, sh.base);
  RopeBackward(Ctx(2), dx.data(), pos.data(), sh.b, sh.s, sh.heads, sh.d, sh.rd, sh.base);
  testing::TorchRef ref("rope");
  ref.Param("b", sh.b);
  ref.Param("s", sh.s);
  ref.Param("nh", sh.heads);
  ref.Param("d", sh.d);
  ref.Param("rotary_dim", sh.rd);
  ref.Param("base", sh.base);
  ref.Input("x", x);
  ref.Input("dy", dy);
  ref.Input("positions", pos);
  auto out = ref.Run();
  // torch's fp32 pow may differ from ours by an ulp in inv_freq, moving an angle by up to
  // pos * 2^-24 relative (~64 u at pos 64): 128 u.
  CHECK(RelError(y, out["y"]) < 128 * kU32);
  CHECK(RelError(dx, out["dx"]) < 128 * kU32);
}

TEST_CASE("RoPE is bit-identical for 1 and 2 threads", "[rope][determinism]") {
  const Shape sh{4, 128, 8, 32, 32, 10000.0f};
  const int64_t total = sh.b * sh.heads * sh.s * sh.d;
  const std::vector<int32_t> pos = RandomInts(sh.b * sh.s, 6, 0, 4000);
  const std::vector<float> x = RandomNormal(total, 7);
  auto run = [&](int t) {
    std::vector<float> y = x, d = x;
    RopeForward(Ctx(t), y.data(), pos.data(), sh.b, sh.s, sh.heads, sh.d, sh.rd, sh.base);
    RopeBackward(Ctx(t), d.data(), pos.data(), sh.b, sh.s, sh.heads, sh.d, sh.rd, sh.base);
    y.insert(y.end(), d.begin(), d.end());
    return y;
  };
  REQUIRE(BitEqual(run(1), run(2)));
}

}  // namespace
}  // namespace mxmaca::kernels::cpu
