// layers/context_parallel/ring_test_util.h: the simulated CP ring shared by the ring
// attention tests (testonly): random inputs, per-rank slicing, the ring of Begin/Step/
// Finish calls for every rank, gathering, and the error measure and tolerance model.
#ifndef MXMACA_LAYERS_CONTEXT_PARALLEL_RING_TEST_UTIL_H_
#define MXMACA_LAYERS_CONTEXT_PARALLEL_RING_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include <catch2/catch.hpp>

namespace mxmaca::layers::cp::testing {

inline constexpr double kEps32 = 1.1920928955078125e-07;  // fp32 machine epsilon (2^-23)

// RandomNormal: n floats ~ N(0, 1) from a seeded mt19937.
std::vector<float> RandomNormal(int64_t n, uint32_t seed);

// RandomDocStarts: [b, s] document-start ids of documents with random lengths in
// [1, max_len] (doc_start[i] = first position of i's document).
std::vector<int32_t> RandomDocStarts(int64_t b, int64_t s, int64_t max_len, uint32_t seed);

// Shape: b, np query heads, ng groups, full sequence s, head dim hn.
struct Shape {
  int64_t b, np, ng, s, hn;
};

// Result: the gathered full-sequence outputs of a simulated ring: out, dq [b, np, s, hn],
// lse [b, np, s], dk, dv [b, ng, s, hn].
struct Result {
  std::vector<float> out, lse, dq, dk, dv;
};

// RunRing: every CP rank's forward then backward over the simulated ring. q, k, v, dout
// are the full [b, heads, s, hn] tensors; doc_start the full [b, s] (or empty).
// order(r, i) gives the source rank of rank r's i-th block (ring order (r - i) mod CP by
// default). The dk/dv contributions of each block are summed by the block's owner in
// rank order 0..CP-1, or, with travel = true, accumulated into one buffer that follows
// the block (Step's accumulate mode). Fails the current test on any error.
Result RunRing(const Shape& sh, int64_t cp, int64_t tile, const std::vector<float>& q,
               const std::vector<float>& k, const std::vector<float>& v,
               const std::vector<float>& dout, const std::vector<int32_t>& doc_start,
               int num_threads = 2,
               std::function<int64_t(int64_t, int64_t)> order = nullptr,
               bool travel = false);

// MaxRelToMax: max_i |got_i - want_i| / max_i |want_i|.
template <typename W>
inline double MaxRelToMax(const std::vector<float>& got, const std::vector<W>& want) {
  REQUIRE(got.size() == want.size());
  double err = 0.0, mx = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
    mx = std::max(mx, std::abs(static_cast<double>(want[i])));
  }
  return err / std::max(mx, 1e-30);
}

// Tolerances. Every compared quantity is built from fp32 dot products (hn terms, oneDNN's
// blocked order), exps (1-2 ulp), row sums, and the online merge: a row's softmax is
// merged from n_tiles = s / tile key tiles (each merge rescales by e^(m - m'), a few
// roundings), and a block's dk/dv from the CP ranks' contributions. With random-sign
// inputs these errors grow like a few ulps per summation level, i.e. with
// log2(n_tiles), not with s, so we bound the error relative to the reference's max by
//   Tol(C) = C eps (1 + log2(n_tiles))
// with C = 8 for the forward against float64 (one-sided error), 16 for the gradients
// (two more products per tile) and for any fp32-vs-fp32 comparison (both sides err).
// Measured (printed as warnings): 1-4 eps at seq 256, 2-8 eps at seq 4096, i.e. 6-20x
// below the bounds; a masking or merge bug gives errors of order 1e-2.
inline double Tol(double c, double n_tiles) { return c * kEps32 * (1.0 + std::log2(n_tiles)); }

}  // namespace mxmaca::layers::cp::testing

#endif  // MXMACA_LAYERS_CONTEXT_PARALLEL_RING_TEST_UTIL_H_
