// actors/checkpoint/test_util.h: helpers for the checkpoint tests and benchmark: fresh
// temp directories, seeded random tensors and a reference region extractor.
#ifndef MXMACA_ACTORS_CHECKPOINT_TEST_UTIL_H_
#define MXMACA_ACTORS_CHECKPOINT_TEST_UTIL_H_

#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace mxmaca::actors::checkpoint::testing {

// MakeTempDir: a new empty directory under $TEST_TMPDIR (Bazel) or /tmp.
inline std::string MakeTempDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string templ = std::string(base != nullptr ? base : "/tmp") + "/ckpt_XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + templ);
  return templ;
}

// RandomFloats: n values uniform in [-2, 2), seeded.
inline std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// RandomBits: n floats with uniformly random bit patterns (NaNs with payloads, infinities,
// denormals, -0 all occur), so only a bit-exact copy compares equal under BitEqual.
inline std::vector<float> RandomBits(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> v(n);
  for (float& x : v) {
    uint32_t bits = gen();
    std::memcpy(&x, &bits, 4);
  }
  return v;
}

// BitEqual: a and b hold the same bytes.
inline bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  return a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// NumElementsOf: product of dims.
inline int64_t NumElementsOf(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ExtractRegion: the region [offsets, offsets + shape) of `full` (C order over
// `full_shape`), C order. Element-by-element with div/mod: deliberately the simplest
// possible code, as the reference for the reader's run-merging copy.
inline std::vector<float> ExtractRegion(const std::vector<float>& full,
                                        const std::vector<int64_t>& full_shape,
                                        const std::vector<int64_t>& offsets,
                                        const std::vector<int64_t>& shape) {
  const int64_t n = NumElementsOf(shape);
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, src = 0, stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      const int64_t coord = rem % shape[d] + offsets[d];
      rem /= shape[d];
      src += coord * stride;
      stride *= full_shape[d];
    }
    out[i] = full[src];
  }
  return out;
}

}  // namespace mxmaca::actors::checkpoint::testing

#endif  // MXMACA_ACTORS_CHECKPOINT_TEST_UTIL_H_
