// kernels/philox.h: counter-based random numbers (Philox4x32-10).
//
// Source: J. K. Salmon, M. A. Moraes, R. O. Dror, D. E. Shaw, "Parallel random numbers:
// as easy as 1, 2, 3", SC'11 (Random123's philox4x32, 10 rounds, the standard
// multipliers and Weyl key increments below). The same function is used by
// curand_Philox4x32_10 and torch's CUDA generator, so a CUDA backend can reproduce
// every value bit for bit.
//
// docs/ARCHITECTURE.md, "Randomness is a function, not a stream": the value for element `index` of
// a tensor is UniformAt(key, index), a pure function of (seed, stream, index). Any
// sharding, thread count or schedule that computes the same global element index gets the
// same number.
//
// Header-only; no state, thread-safe.
#ifndef MXMACA_KERNELS_PHILOX_H_
#define MXMACA_KERNELS_PHILOX_H_

#include <array>
#include <cstdint>

#include "kernels/exec_context.h"
#include "kernels/host_device.h"

namespace mxmaca::kernels {

namespace philox_internal {

inline constexpr uint32_t kMul0 = 0xD2511F53u;   // PHILOX_M4x32_0
inline constexpr uint32_t kMul1 = 0xCD9E8D57u;   // PHILOX_M4x32_1
inline constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // PHILOX_W32_0 (golden ratio)
inline constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // PHILOX_W32_1 (sqrt(3) - 1)

// SplitMix64 finaliser (Steele, Lea, Flood, "Fast splittable pseudorandom number
// generators", OOPSLA'14): a bijective 64-bit mixer.
inline constexpr uint64_t SplitMix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace philox_internal

// Philox4x32_10: the Philox4x32 bijection with 10 rounds.
// counter: 4 x uint32 (c0 = least significant), key: 2 x uint32. Returns 4 uniformly
// distributed uint32 words. Matches Random123's philox4x32(ctr, key) (R = 10).
inline std::array<uint32_t, 4> Philox4x32_10(std::array<uint32_t, 4> ctr,
                                             std::array<uint32_t, 2> key) {
  using namespace philox_internal;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * ctr[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32);
    const uint32_t lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32);
    const uint32_t lo1 = static_cast<uint32_t>(p1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  }
  return ctr;
}

// MakeRngStream: mixes four ids (e.g. layer number, dropout site, iteration,
// micro-batch) into one 64-bit stream id for RngKey::stream. Order matters
// (MakeRngStream(1,2,0,0) != MakeRngStream(2,1,0,0)). Built from the SplitMix64
// finaliser applied as a sponge: h = mix(h ^ id) per id, starting from a fixed constant.
// Distinct id tuples collide with probability ~2^-64.
inline uint64_t MakeRngStream(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  using philox_internal::SplitMix64;
  uint64_t h = SplitMix64(0x6D786D616361ull);  // "mxmaca"
  h = SplitMix64(h ^ a);
  h = SplitMix64(h ^ b);
  h = SplitMix64(h ^ c);
  h = SplitMix64(h ^ d);
  return h;
}

// UniformAtWords: UniformAt below on its three 64-bit words, written with plain 32-bit
// integers so that the CUDA kernels call this same function (kernels/cuda/device_util.cuh):
// the GPU's dropout masks are the CPU's by construction. Same rounds as Philox4x32_10.
MXMACA_HOST_DEVICE float UniformAtWords(uint64_t seed, uint64_t stream, uint64_t index) {
  using namespace philox_internal;
  uint32_t c0 = static_cast<uint32_t>(index), c1 = static_cast<uint32_t>(index >> 32);
  uint32_t c2 = static_cast<uint32_t>(stream), c3 = static_cast<uint32_t>(stream >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
  }
  return static_cast<float>(c0 >> 8) * (1.0f / 16777216.0f);
}

// UniformAt: a float uniform in [0, 1) for element `index` of the stream `key`.
// Philox4x32-10 with counter = (lo32(index), hi32(index), lo32(key.stream),
// hi32(key.stream)) and key = (lo32(key.seed), hi32(key.seed)); the first output word
// w0 gives (w0 >> 8) * 2^-24: 24 random bits, exactly representable in fp32, so the
// result is in {0, 2^-24, ..., 1 - 2^-24} and never rounds up to 1.0. (The other three
// words are discarded: one Philox call per element keeps the map element-indexed.)
// philox_test checks it against Philox4x32_10 (Random123's known-answer vectors).
inline float UniformAt(RngKey key, uint64_t index) {
  return UniformAtWords(key.seed, key.stream, index);
}

}  // namespace mxmaca::kernels

#endif  // MXMACA_KERNELS_PHILOX_H_
