// Parity of NumpyRandomState / NumpyDefaultRng with the installed numpy (/usr/bin/python3):
// every value must be bit-identical, so the comparisons are exact.
#include "data/numpy_random_state.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "data/gpt_dataset_test_util.h"

namespace mxmaca::data {
namespace {

using nlohmann::json;

constexpr char kScript[] = "data/tests/gpt_dataset_reference/numpy_rng_reference.py";

template <typename T>
std::vector<int64_t> ShuffleTimes(uint32_t seed, int64_t n, int times) {
  NumpyRandomState rs(seed);
  std::vector<T> x(n);
  std::iota(x.begin(), x.end(), T{0});
  std::vector<int64_t> out;
  for (int t = 0; t < times; ++t) {
    rs.Shuffle(absl::MakeSpan(x));
    out.insert(out.end(), x.begin(), x.end());
  }
  return out;
}

std::vector<int64_t> RunCase(const json& c) {
  const std::string kind = c["kind"];
  const uint32_t seed = c["seed"].get<uint32_t>();
  std::vector<int64_t> out;
  if (kind == "shuffle") {
    const int64_t n = c["n"];
    const int times = c["times"];
    const std::string dtype = c["dtype"];
    if (dtype == "int32") return ShuffleTimes<int32_t>(seed, n, times);
    if (dtype == "uint32") return ShuffleTimes<uint32_t>(seed, n, times);
    return ShuffleTimes<int64_t>(seed, n, times);
  }
  if (kind == "permutation") return ShuffleTimes<int64_t>(seed, c["n"], 1);
  if (kind == "randint") {
    NumpyRandomState rs(seed);
    for (int i = 0; i < c["count"].get<int>(); ++i) {
      out.push_back(rs.RandInt(c["low"].get<int64_t>(), c["high"].get<int64_t>()));
    }
    return out;
  }
  if (kind == "default_rng_integers") {
    NumpyDefaultRng rng(seed);
    for (int i = 0; i < c["count"].get<int>(); ++i) {
      out.push_back(rng.IntegersInt32(c["low"].get<int32_t>(), c["high"].get<int32_t>()));
    }
    return out;
  }
  FAIL("unknown kind " << kind);
  return out;
}

TEST_CASE("NumpyRandomState and NumpyDefaultRng match numpy integer draws") {
  std::mt19937_64 gen(20261130);
  json cases = json::array();
  auto seed = [&] { return static_cast<uint32_t>(gen()); };
  // Sizes 0..3 exercise the edges of the Fisher-Yates loop; the rest random.
  for (int64_t n : {0, 1, 2, 3, 17, 1000, 65537}) {
    for (const char* dtype : {"int32", "uint32", "int64"}) {
      cases.push_back(
          {{"kind", "shuffle"}, {"seed", seed()}, {"n", n}, {"dtype", dtype}, {"times", 2}});
    }
  }
  for (uint32_t s : {0u, 1u, 1234u, 4294967295u}) {
    cases.push_back(
        {{"kind", "shuffle"}, {"seed", s}, {"n", 5000}, {"dtype", "int32"}, {"times", 3}});
  }
  for (int i = 0; i < 5; ++i) {
    cases.push_back(
        {{"kind", "permutation"}, {"seed", seed()}, {"n", static_cast<int64_t>(gen() % 3000)}});
  }
  // randint: small ranges, a range of exactly 2^32, ranges past 2^32 (64-bit draws:
  // checks the high/low order of NextUint64) and negative lows.
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 1},
                                                           {0, 2},
                                                           {-5, 7},
                                                           {0, 1000},
                                                           {3, 4294967299LL},
                                                           {0, 1LL << 40},
                                                           {-(1LL << 50), 1LL << 50},
                                                           {0, (1LL << 62) + 12345}};
  for (const auto& r : ranges) {
    cases.push_back({{"kind", "randint"},
                     {"seed", seed()},
                     {"low", r.first},
                     {"high", r.second},
                     {"count", 200}});
  }
  // default_rng: the MockGPTLowLevelDataset call (seed 0, [1, 4096)) and others.
  cases.push_back({{"kind", "default_rng_integers"},
                   {"seed", 0},
                   {"low", 1},
                   {"high", 4096},
                   {"count", 20000}});
  const std::vector<std::pair<int32_t, int32_t>> ranges32 = {
      {0, 1}, {0, 2}, {-100, 100}, {1, 2147483647}, {-2147483647 - 1, 2147483647}};
  for (const auto& r : ranges32) {
    cases.push_back({{"kind", "default_rng_integers"},
                     {"seed", seed()},
                     {"low", r.first},
                     {"high", r.second},
                     {"count", 301}});
  }

  auto expected = testing::RunPythonJson(kScript, cases);
  REQUIRE(expected.ok());
  REQUIRE(expected->size() == cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << cases[i].dump());
    const std::vector<int64_t> want = (*expected)[i].get<std::vector<int64_t>>();
    const std::vector<int64_t> got = RunCase(cases[i]);
    REQUIRE(got == want);
  }
}

TEST_CASE("NumpyRandomState.RandomSample and PCG64 raw outputs match numpy") {
  std::mt19937 gen(77);
  json cases = json::array();
  std::vector<uint32_t> seeds = {0u, 1u, static_cast<uint32_t>(gen()), static_cast<uint32_t>(gen()),
                                 4294967295u};
  for (uint32_t s : seeds) {
    cases.push_back({{"kind", "random_sample"}, {"seed", s}, {"count", 500}});
    cases.push_back({{"kind", "default_rng_raw"}, {"seed", s}, {"count", 500}});
  }
  auto expected = testing::RunPythonJson(kScript, cases);
  REQUIRE(expected.ok());
  for (size_t k = 0; k < seeds.size(); ++k) {
    NumpyRandomState rs(seeds[k]);
    NumpyDefaultRng rng(seeds[k]);
    const json& samples = (*expected)[2 * k];
    const json& raw = (*expected)[2 * k + 1];
    for (size_t i = 0; i < samples.size(); ++i) {
      const double want = std::strtod(samples[i].get<std::string>().c_str(), nullptr);
      REQUIRE(rs.RandomSample() == want);
    }
    for (size_t i = 0; i < raw.size(); ++i) {
      REQUIRE(rng.NextUint64() == raw[i].get<uint64_t>());
    }
  }
}

// RandomInterval's 64-bit path (shuffles of more than 2^32 elements, too big to run
// against numpy here) is numpy's random_interval: the same mask-and-reject loop on
// next_uint64 as legacy randint's bounded_masked_uint64, whose 64-bit draws the parity
// test above checks. So on equal seeds the two must agree draw for draw.
TEST_CASE("RandomInterval's 64-bit path agrees with the numpy-checked RandInt") {
  std::mt19937_64 gen(64);
  for (int trial = 0; trial < 20; ++trial) {
    const uint32_t seed = static_cast<uint32_t>(gen());
    const uint64_t max = (1ULL << 32) + gen() % (1ULL << 40);
    NumpyRandomState a(seed), b(seed);
    for (int i = 0; i < 50; ++i) {
      REQUIRE(static_cast<int64_t>(a.RandomInterval(max)) ==
              b.RandInt(0, static_cast<int64_t>(max) + 1));
    }
  }
}

}  // namespace
}  // namespace mxmaca::data
