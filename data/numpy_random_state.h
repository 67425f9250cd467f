// data/numpy_random_state.h: bit-exact ports of the two numpy random generators that
// Megatron-Core's GPT dataset code uses.
//
//   NumpyRandomState   numpy.random.RandomState(seed) (legacy MT19937): shuffle,
//                      permutation, randint, random_sample. GPTDataset shuffles its
//                      document and sample indices with it (gpt_dataset.py).
//   NumpyDefaultRng    numpy.random.default_rng(seed) (SeedSequence + PCG64) with
//                      Generator.integers; MockGPTLowLevelDataset draws its sequence
//                      lengths with it (gpt_dataset.py, core_v0.15.0).
//
// Sources (numpy 1.17+, unchanged through 2.x): numpy/random/mtrand.pyx (shuffle,
// _shuffle_raw), numpy/random/src/distributions/distributions.c (random_interval,
// bounded masked / Lemire draws), numpy/random/src/mt19937 (init_genrand),
// numpy/random/bit_generator.pyx (SeedSequence), numpy/random/src/pcg64 (PCG64 XSL-RR).
// Parity with the installed numpy is tested in numpy_random_state_test.cc.
#ifndef MXMACA_DATA_NUMPY_RANDOM_STATE_H_
#define MXMACA_DATA_NUMPY_RANDOM_STATE_H_

#include <cstdint>
#include <random>
#include <utility>

#include "absl/types/span.h"

namespace mxmaca::data {

// NumpyRandomState: numpy.random.RandomState(seed) for an integer seed in
// [0, 2^32 - 1] (legacy seeding: MT19937 init_genrand(seed), which std::mt19937 also
// implements). Every draw below consumes the MT19937 stream exactly as numpy does, so a
// sequence of calls made in Megatron's order gives Megatron's results. Not thread-safe.
class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}

  // NextUint32: the next raw 32-bit output (numpy next_uint32 / random_raw).
  uint32_t NextUint32() { return static_cast<uint32_t>(mt_()); }

  // NextUint64: two 32-bit outputs, the first one in the high half (numpy
  // mt19937_next64: `(uint64_t)next32 << 32 | next32`, evaluated left to right by the
  // compilers numpy is built with).
  uint64_t NextUint64();

  // RandomInterval: uniform integer in [0, max] by masked rejection (numpy
  // random_interval): 32-bit draws when max <= 2^32 - 1, else 64-bit draws. Draws
  // nothing when max == 0.
  uint64_t RandomInterval(uint64_t max);

  // Shuffle: in-place Fisher-Yates of a 1-D array exactly as RandomState.shuffle(x)
  // does for a 1-D ndarray: for i = n-1 .. 1, j = RandomInterval(i), swap x[i], x[j].
  template <typename T>
  void Shuffle(absl::Span<T> x) {
    for (int64_t i = static_cast<int64_t>(x.size()) - 1; i >= 1; --i) {
      const uint64_t j = RandomInterval(static_cast<uint64_t>(i));
      std::swap(x[i], x[j]);
    }
  }

  // RandInt: one draw of RandomState.randint(low, high) (int64 result, high exclusive;
  // legacy masked rejection on 32-bit draws when high - low - 1 < 2^32, else 64-bit
  // draws). Precondition: low < high.
  int64_t RandInt(int64_t low, int64_t high);

  // RandomSample: one double in [0, 1) (RandomState.random_sample: 53 bits from two
  // 32-bit draws, (a >> 5) * 2^26 + (b >> 6), divided by 2^53).
  double RandomSample();

 private:
  std::mt19937 mt_;
};

// NumpyDefaultRng: numpy.random.default_rng(seed) for an integer seed in
// [0, 2^32 - 1]: SeedSequence(seed).generate_state(4, uint64) seeds PCG64
// (state = words 0,1; increment = words 2,3). Not thread-safe.
class NumpyDefaultRng {
 public:
  explicit NumpyDefaultRng(uint32_t seed);

  // NextUint64: the next PCG64 (XSL-RR 128/64) output; step first, then output.
  uint64_t NextUint64();
  // NextUint32: the low half of a fresh 64-bit output, then its high half from the
  // buffer (numpy pcg64_next32).
  uint32_t NextUint32();

  // IntegersInt32: one draw of Generator.integers(low, high, dtype=numpy.int32) (high
  // exclusive): Lemire's nearly-divisionless method on 32-bit draws
  // (buffered_bounded_lemire_uint32). Draws nothing when high - low == 1.
  // Precondition: low < high.
  int32_t IntegersInt32(int32_t low, int32_t high);

 private:
  unsigned __int128 state_ = 0;
  unsigned __int128 increment_ = 0;
  bool has_uint32_ = false;
  uint32_t uinteger_ = 0;
};

}  // namespace mxmaca::data

#endif  // MXMACA_DATA_NUMPY_RANDOM_STATE_H_
