// Tests for kernels/philox.h: Random123 known-answer vectors and UniformAt's range and
// distribution.
#include "kernels/philox.h"

#include <array>
#include <cmath>
#include <random>
#include <set>

#include <catch2/catch.hpp>

namespace mxmaca::kernels {
namespace {

// Random123 1.14 tests/kat_vectors, the three "philox4x32 10" lines:
// counter (4 words), key (2 words) -> output (4 words).
TEST_CASE("Philox4x32_10 reproduces the Random123 known-answer vectors", "[philox]") {
  struct Kat {
    std::array<uint32_t, 4> ctr;
    std::array<uint32_t, 2> key;
    std::array<uint32_t, 4> want;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) REQUIRE(Philox4x32_10(k.ctr, k.key) == k.want);
}

TEST_CASE("UniformAt uses counter (index, stream) and key seed", "[philox]") {
  const RngKey key{0x299f31d0a4093822ull, 0x0370734413198a2eull};
  const uint64_t index = 0x85a308d3243f6a88ull;
  // Same words as the third known-answer vector: first output word 0xd16cfe09.
  REQUIRE(UniformAt(key, index) == static_cast<float>(0xd16cfe09u >> 8) / 16777216.0f);
}

TEST_CASE("UniformAt is in [0, 1) and roughly uniform", "[philox]") {
  const RngKey key{42, MakeRngStream(1, 2, 3, 4)};
  const int n = 200000;
  int bins[10] = {0};
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const float u = UniformAt(key, i);
    REQUIRE(u >= 0.0f);
    REQUIRE(u < 1.0f);
    bins[static_cast<int>(u * 10)]++;
    sum += u;
  }
  // Each bin ~ Binomial(n, 0.1): sd = sqrt(n * 0.09) ~ 134; 6 sd.
  for (int b : bins) REQUIRE(std::fabs(b - n / 10.0) < 6 * std::sqrt(n * 0.09));
  // Mean: sd = sqrt(1/12 / n) ~ 6.5e-4; 6 sd.
  REQUIRE(std::fabs(sum / n - 0.5) < 6 * std::sqrt(1.0 / 12 / n));
}

TEST_CASE("MakeRngStream separates ids and their order", "[philox]") {
  std::set<uint64_t> seen;
  for (uint64_t a = 0; a < 8; ++a)
    for (uint64_t b = 0; b < 8; ++b)
      for (uint64_t c = 0; c < 8; ++c)
        for (uint64_t d = 0; d < 8; ++d) seen.insert(MakeRngStream(a, b, c, d));
  REQUIRE(seen.size() == 8 * 8 * 8 * 8);
  REQUIRE(MakeRngStream(1, 2, 0, 0) != MakeRngStream(2, 1, 0, 0));
}

TEST_CASE("UniformAtWords equals the first word of Philox4x32_10 on random inputs", "[philox]") {
  // UniformAtWords is the function both backends run (plain 32-bit arithmetic, usable in
  // CUDA kernels); Philox4x32_10 is the Random123-vector-checked reference above.
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 20000; ++i) {
    const uint64_t seed = rng(), stream = rng(), index = rng();
    const std::array<uint32_t, 4> w = Philox4x32_10(
        {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
         static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
        {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
    REQUIRE(UniformAtWords(seed, stream, index) ==
            static_cast<float>(w[0] >> 8) * (1.0f / 16777216.0f));
  }
}

}  // namespace
}  // namespace mxmaca::kernels
