// data/numpy_random_state.cc: see numpy_random_state.h for the numpy sources ported.
#include "data/numpy_random_state.h"

#include <cstdint>

namespace mxmaca::data {
namespace {

// Smallest all-ones mask >= max (numpy random_interval).
uint64_t MaskFor(uint64_t max) {
  uint64_t mask = max;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  return mask;
}

// numpy bit_generator.pyx SeedSequence constants (32-bit words, pool of 4).
constexpr uint32_t kInitA = 0x43b0d7e5u;
constexpr uint32_t kMultA = 0x931e8875u;
constexpr uint32_t kInitB = 0x8b51f9ddu;
constexpr uint32_t kMultB = 0x58f38dedu;
constexpr uint32_t kMixMultL = 0xca01f9ddu;
constexpr uint32_t kMixMultR = 0x4973f715u;
constexpr int kXShift = 16;
constexpr int kPoolSize = 4;

uint32_t HashMix(uint32_t value, uint32_t* hash_const) {
  value ^= *hash_const;
  *hash_const *= kMultA;
  value *= *hash_const;
  value ^= value >> kXShift;
  return value;
}

uint32_t Mix(uint32_t x, uint32_t y) {
  uint32_t result = kMixMultL * x - kMixMultR * y;
  result ^= result >> kXShift;
  return result;
}

// PCG_DEFAULT_MULTIPLIER_128 (numpy pcg64.h).
constexpr unsigned __int128 kPcgMultiplier =
    (static_cast<unsigned __int128>(2549297995355413924ULL) << 64) + 4865540595714422341ULL;

}  // namespace

uint64_t NumpyRandomState::NextUint64() {
  const uint64_t high = NextUint32();
  const uint64_t low = NextUint32();
  return (high << 32) | low;
}

uint64_t NumpyRandomState::RandomInterval(uint64_t max) {
  if (max == 0) return 0;
  const uint64_t mask = MaskFor(max);
  uint64_t value;
  if (max <= 0xffffffffULL) {
    while ((value = (NextUint32() & mask)) > max) {
    }
  } else {
    while ((value = (NextUint64() & mask)) > max) {
    }
  }
  return value;
}

int64_t NumpyRandomState::RandInt(int64_t low, int64_t high) {
  // _rand_int64 with use_masked=True: rng = (high - 1) - low.
  const uint64_t rng = static_cast<uint64_t>(high - 1) - static_cast<uint64_t>(low);
  if (rng == 0) return low;
  const uint64_t mask = MaskFor(rng);
  uint64_t value;
  if (rng <= 0xffffffffULL) {
    if (rng == 0xffffffffULL) return low + static_cast<int64_t>(NextUint32());
    while ((value = (NextUint32() & mask)) > rng) {
    }
  } else {
    if (rng == 0xffffffffffffffffULL) return low + static_cast<int64_t>(NextUint64());
    while ((value = (NextUint64() & mask)) > rng) {
    }
  }
  return static_cast<int64_t>(static_cast<uint64_t>(low) + value);
}

double NumpyRandomState::RandomSample() {
  const int32_t a = static_cast<int32_t>(NextUint32() >> 5);
  const int32_t b = static_cast<int32_t>(NextUint32() >> 6);
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

NumpyDefaultRng::NumpyDefaultRng(uint32_t seed) {
  // SeedSequence(seed): entropy words of the integer (one word for seed < 2^32; the
  // word 0 for seed 0), mixed into a pool of 4.
  uint32_t pool[kPoolSize];
  uint32_t hash_const = kInitA;
  for (int i = 0; i < kPoolSize; ++i) {
    pool[i] = HashMix(i == 0 ? seed : 0u, &hash_const);
  }
  for (int src = 0; src < kPoolSize; ++src) {
    for (int dst = 0; dst < kPoolSize; ++dst) {
      if (src != dst) pool[dst] = Mix(pool[dst], HashMix(pool[src], &hash_const));
    }
  }
  // generate_state(4, uint64): 8 uint32 words cycling over the pool, viewed as 4
  // little-endian uint64 words.
  uint32_t words[8];
  uint32_t hash_b = kInitB;
  for (int i = 0; i < 8; ++i) {
    uint32_t value = pool[i % kPoolSize];
    value ^= hash_b;
    hash_b *= kMultB;
    value *= hash_b;
    value ^= value >> kXShift;
    words[i] = value;
  }
  uint64_t val[4];
  for (int i = 0; i < 4; ++i) {
    val[i] = static_cast<uint64_t>(words[2 * i]) | (static_cast<uint64_t>(words[2 * i + 1]) << 32);
  }
  // pcg64_set_seed: PCG_128BIT_CONSTANT(high, low); pcg_setseq_128_srandom_r.
  const unsigned __int128 init_state = (static_cast<unsigned __int128>(val[0]) << 64) | val[1];
  const unsigned __int128 init_seq = (static_cast<unsigned __int128>(val[2]) << 64) | val[3];
  state_ = 0;
  increment_ = (init_seq << 1) | 1;
  state_ = state_ * kPcgMultiplier + increment_;
  state_ += init_state;
  state_ = state_ * kPcgMultiplier + increment_;
}

uint64_t NumpyDefaultRng::NextUint64() {
  state_ = state_ * kPcgMultiplier + increment_;
  const uint64_t xored = static_cast<uint64_t>(state_ >> 64) ^ static_cast<uint64_t>(state_);
  const unsigned rot = static_cast<unsigned>(state_ >> 122);
  return (xored >> rot) | (xored << ((64 - rot) & 63));
}

uint32_t NumpyDefaultRng::NextUint32() {
  if (has_uint32_) {
    has_uint32_ = false;
    return uinteger_;
  }
  const uint64_t next = NextUint64();
  has_uint32_ = true;
  uinteger_ = static_cast<uint32_t>(next >> 32);
  return static_cast<uint32_t>(next & 0xffffffffu);
}

int32_t NumpyDefaultRng::IntegersInt32(int32_t low, int32_t high) {
  const uint32_t rng = static_cast<uint32_t>(static_cast<int64_t>(high) - 1 - low);
  if (rng == 0) return low;
  if (rng == 0xffffffffu) {
    return static_cast<int32_t>(static_cast<uint32_t>(low) + NextUint32());
  }
  const uint32_t rng_excl = rng + 1;
  uint64_t m = static_cast<uint64_t>(NextUint32()) * rng_excl;
  uint32_t leftover = static_cast<uint32_t>(m & 0xffffffffu);
  if (leftover < rng_excl) {
    const uint32_t threshold = (UINT32_MAX - rng) % rng_excl;
    while (leftover < threshold) {
      m = static_cast<uint64_t>(NextUint32()) * rng_excl;
      leftover = static_cast<uint32_t>(m & 0xffffffffu);
    }
  }
  return static_cast<int32_t>(static_cast<uint32_t>(low) + static_cast<uint32_t>(m >> 32));
}

}  // namespace mxmaca::data
