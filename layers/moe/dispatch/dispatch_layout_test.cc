// layers/moe/dispatch/dispatch_layout_test.cc: offsets of DispatchLayout against a direct
// walk over the chunks, the regroup round trip, and the count-header errors.
#include "layers/moe/dispatch/dispatch_layout.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

namespace mxmaca::layers::moe::dispatch {
namespace {

std::vector<int64_t> Headers(const std::vector<std::vector<int64_t>>& counts, int64_t hidden) {
  std::vector<int64_t> out;
  for (const auto& c : counts) {
    std::vector<int64_t> h = MakeCountHeader(true, hidden, c, static_cast<int>(c.size()));
    out.insert(out.end(), h.begin(), h.end());
  }
  return out;
}

TEST_CASE("DispatchLayout offsets match a walk over the chunks") {
  std::mt19937 gen(1234);
  for (int trial = 0; trial < 40; ++trial) {
    const int P = 1 + trial % 4, L = 1 + (trial / 4) % 3, E = P * L;
    std::vector<std::vector<int64_t>> counts(P, std::vector<int64_t>(E));
    for (auto& row : counts) {
      for (auto& c : row) c = std::uniform_int_distribution<int>(0, 4)(gen) == 0 ? 0 : gen() % 7;
    }
    for (int me = 0; me < P; ++me) {
      auto layout = DispatchLayout::Create(P, E, me, 99, Headers(counts, 3));
      REQUIRE(layout.ok());
      for (int s = 0; s < P; ++s) {
        int64_t in = 0;
        for (int e = 0; e < E; ++e) {
          CHECK(layout->InputOffset(s, e) == in);
          CHECK(layout->Count(s, e) == counts[s][e]);
          in += counts[s][e];
        }
        CHECK(layout->InputRows(s) == in);
      }
      // Output of rank d: local expert major, source minor.
      for (int d = 0; d < P; ++d) {
        int64_t out = 0;
        std::vector<int64_t> per_local(L, 0);
        for (int l = 0; l < L; ++l) {
          for (int s = 0; s < P; ++s) {
            CHECK(layout->OutputOffset(s, d * L + l) == out);
            out += counts[s][d * L + l];
            per_local[l] += counts[s][d * L + l];
          }
        }
        CHECK(layout->OutputRows(d) == out);
        CHECK(layout->TokensPerLocalExpert(d) == per_local);
        for (int s = 0; s < P; ++s) {
          int64_t between = 0;
          for (int l = 0; l < L; ++l) between += counts[s][d * L + l];
          CHECK(layout->RowsBetween(s, d) == between);
        }
      }
    }
  }
}

TEST_CASE("TokensPerExpert and ExpertLoadImbalance") {
  // 2 ranks, 4 experts: per expert 1+3, 0+0, 2+2, 5+3 -> [4, 0, 4, 8]; mean 4, max 8.
  auto layout = DispatchLayout::Create(2, 4, 0, 0, Headers({{1, 0, 2, 5}, {3, 0, 2, 3}}, 2));
  REQUIRE(layout.ok());
  CHECK(layout->TokensPerExpert() == std::vector<int64_t>{4, 0, 4, 8});
  CHECK(layout->ExpertLoadImbalance() == 2.0);
  CHECK(layout->MaxInputRows() == 8);
  auto empty = DispatchLayout::Create(2, 2, 1, 0, Headers({{0, 0}, {0, 0}}, 2));
  REQUIRE(empty.ok());
  CHECK(empty->ExpertLoadImbalance() == 1.0);
}

TEST_CASE("GatherExpertInputs and ScatterExpertOutputs are inverse permutations") {
  std::mt19937 gen(77);
  const int P = 3, L = 2, E = P * L, h = 5;
  std::vector<std::vector<int64_t>> counts(P, std::vector<int64_t>(E));
  for (auto& row : counts) {
    for (auto& c : row) c = gen() % 4;
  }
  counts[1][2] = 0;  // an empty chunk
  auto layout = DispatchLayout::Create(P, E, 1, 0, Headers(counts, h));
  REQUIRE(layout.ok());
  const int d = 1;
  const int64_t n = layout->OutputRows(d) * h;
  std::vector<float> by_source(n), out(n), back(n, -1.0f);
  std::normal_distribution<float> dist;
  for (float& x : by_source) x = dist(gen);
  GatherExpertInputs(*layout, d, by_source.data(), out.data());
  // Direct check of one chunk: source 2's rows for local expert 1 (expert 3) follow source
  // 2's rows for expert 2 in its block, and land after all sources' expert-2 rows plus the
  // expert-3 rows of sources 0 and 1.
  int64_t block2 = layout->RowsBetween(0, d) + layout->RowsBetween(1, d);
  int64_t src_row = block2 + counts[2][2];
  int64_t dst_row = counts[0][2] + counts[1][2] + counts[2][2] + counts[0][3] + counts[1][3];
  for (int64_t r = 0; r < counts[2][3] * h; ++r) {
    CHECK(out[dst_row * h + r] == by_source[src_row * h + r]);
  }
  ScatterExpertOutputs(*layout, d, out.data(), back.data());
  CHECK(std::memcmp(back.data(), by_source.data(), n * sizeof(float)) == 0);
}

TEST_CASE("DispatchLayout::Create reports bad headers") {
  std::vector<std::vector<int64_t>> counts = {{1, 2}, {3, 4}};
  std::vector<int64_t> headers = Headers(counts, 8);
  SECTION("a rank flagged its input invalid") {
    std::vector<int64_t> bad = MakeCountHeader(false, 0, {}, 2);
    std::copy(bad.begin(), bad.end(), headers.begin() + 4);
    auto l = DispatchLayout::Create(2, 2, 0, 0, headers);
    REQUIRE(l.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK(l.status().message().find("EP ranks [1]") != std::string::npos);
  }
  SECTION("hidden sizes differ") {
    headers[4 + 1] = 16;
    auto l = DispatchLayout::Create(2, 2, 0, 0, headers);
    REQUIRE(l.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK(l.status().message().find("rank 1: 16") != std::string::npos);
  }
  SECTION("negative count") {
    headers[4 + 3] = -2;
    auto l = DispatchLayout::Create(2, 2, 1, 0, headers);
    REQUIRE(l.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK(l.status().message().find("tokens_per_expert[1] = -2") != std::string::npos);
  }
  SECTION("experts not divisible by EP") {
    auto l = DispatchLayout::Create(2, 3, 0, 0, headers);
    CHECK(l.status().code() == absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("ValidateLocalInput names the bad field") {
  std::vector<float> rows(6);
  CHECK(ValidateLocalInput(rows.data(), 3, 2, {1, 2}, 2).ok());
  CHECK(ValidateLocalInput(nullptr, 0, 2, {0, 0}, 2).ok());
  auto s = ValidateLocalInput(rows.data(), 3, 2, {1, 1}, 2);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message().find("sums to 2 but num_rows is 3") != std::string::npos);
  s = ValidateLocalInput(rows.data(), 3, 2, {1, 2, 0}, 2);
  CHECK(s.message().find("3 entries, expected 2") != std::string::npos);
  s = ValidateLocalInput(rows.data(), 3, 2, {4, -1}, 2);
  CHECK(s.message().find("tokens_per_expert[1] is -1") != std::string::npos);
  s = ValidateLocalInput(rows.data(), 3, 0, {1, 2}, 2);
  CHECK(s.message().find("hidden size is 0") != std::string::npos);
  s = ValidateLocalInput(nullptr, 3, 2, {1, 2}, 2);
  CHECK(s.message().find("null") != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::layers::moe::dispatch
