// layers/context_parallel/cp_layout_test.cc: the 2 x CP chunk layout against its
// definition (Megatron's get_batch_on_this_cp_rank), slicing/gathering round trips and
// the divisibility errors.
#include "layers/context_parallel/cp_layout.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace mxmaca::layers::cp {
namespace {

TEST_CASE("cp_layout: rank r holds chunks r and 2CP-1-r", "[cp_layout]") {
  for (int64_t cp : {1, 2, 4, 8}) {
    const int64_t s = 2 * cp * 3;  // c = 3
    auto layout = MakeCpLayout(s, cp);
    REQUIRE(layout.ok());
    REQUIRE(layout->chunk == 3);
    REQUIRE(layout->LocalSeq() == 6);
    std::vector<int> seen(s, 0);
    for (int64_t r = 0; r < cp; ++r) {
      auto pos = LocalPositions(*layout, r);
      REQUIRE(pos.ok());
      // Megatron: view [2CP, c], index_select chunks [r, 2CP-1-r], flatten.
      std::vector<int32_t> want;
      for (int64_t chunk : {r, 2 * cp - 1 - r}) {
        for (int64_t i = 0; i < 3; ++i) want.push_back(static_cast<int32_t>(chunk * 3 + i));
      }
      CHECK(*pos == want);
      for (int32_t p : *pos) ++seen[p];
    }
    // Every position is held by exactly one rank.
    CHECK(std::all_of(seen.begin(), seen.end(), [](int x) { return x == 1; }));
  }
}

TEST_CASE("cp_layout: slice and gather round trip on [outer, s, inner]", "[cp_layout]") {
  std::mt19937 gen(1234);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t cp = 4, s = 32, outer = 3, inner = 5;
  auto layout = MakeCpLayout(s, cp);
  REQUIRE(layout.ok());
  std::vector<float> full(outer * s * inner);
  for (float& x : full) x = u(gen);
  std::vector<float> rebuilt(full.size(), 0.0f);
  for (int64_t r = 0; r < cp; ++r) {
    std::vector<float> local(outer * layout->LocalSeq() * inner);
    REQUIRE(SliceSequence(*layout, r, outer, inner, full.data(), local.data()).ok());
    // Element (o, t, i) of the slice is element (o, GlobalPosition(r, t), i) of full.
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t t = 0; t < layout->LocalSeq(); ++t) {
        for (int64_t i = 0; i < inner; ++i) {
          REQUIRE(local[(o * layout->LocalSeq() + t) * inner + i] ==
                  full[(o * s + layout->GlobalPosition(r, t)) * inner + i]);
        }
      }
    }
    REQUIRE(GatherSequence(*layout, r, outer, inner, local.data(), rebuilt.data()).ok());
  }
  CHECK(rebuilt == full);
}

TEST_CASE("cp_layout: batch slicing keeps original positions and doc starts",
          "[cp_layout]") {
  const int64_t b = 2, s = 16, cp = 2;
  auto layout = MakeCpLayout(s, cp);
  REQUIRE(layout.ok());
  std::vector<int32_t> tokens(b * s), labels(b * s), pos(b * s), doc(b * s);
  std::vector<float> mask(b * s);
  for (int64_t i = 0; i < b * s; ++i) {
    tokens[i] = static_cast<int32_t>(100 + i);
    labels[i] = static_cast<int32_t>(101 + i);
    mask[i] = (i % 3 == 0) ? 0.0f : 1.0f;
    pos[i] = static_cast<int32_t>((i % s) % 7);  // --reset-position-ids style values
    doc[i] = static_cast<int32_t>((i % s) / 7 * 7);
  }
  for (int64_t r = 0; r < cp; ++r) {
    auto with_pos = SliceBatchForCpRank(*layout, r, b, tokens.data(), labels.data(),
                                        mask.data(), pos.data(), doc.data());
    REQUIRE(with_pos.ok());
    auto plain = SliceBatchForCpRank(*layout, r, b, tokens.data(), labels.data(),
                                     mask.data(), nullptr, nullptr);
    REQUIRE(plain.ok());
    CHECK(plain->doc_start.empty());
    for (int64_t bi = 0; bi < b; ++bi) {
      for (int64_t t = 0; t < layout->LocalSeq(); ++t) {
        const int64_t g = bi * s + layout->GlobalPosition(r, t);
        const int64_t l = bi * layout->LocalSeq() + t;
        CHECK(with_pos->tokens[l] == tokens[g]);
        CHECK(with_pos->labels[l] == labels[g]);
        CHECK(with_pos->loss_mask[l] == mask[g]);
        CHECK(with_pos->position_ids[l] == pos[g]);
        CHECK(with_pos->doc_start[l] == doc[g]);
        CHECK(plain->position_ids[l] == layout->GlobalPosition(r, t));
      }
    }
  }
}

TEST_CASE("cp_layout: clear errors", "[cp_layout]") {
  auto bad = MakeCpLayout(100, 8);
  REQUIRE(!bad.ok());
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string msg(bad.status().message());
  CHECK(msg.find("100") != std::string::npos);
  CHECK(msg.find("2 x 8 = 16") != std::string::npos);

  // 40 = 2 x 4 x 5: divisible by 2 x CP (8) but not by 2 x CP x TP (16) under SP.
  CHECK(MakeCpLayout(40, 4, 2, false).ok());
  auto sp = MakeCpLayout(40, 4, 2, true);
  REQUIRE(!sp.ok());
  CHECK(std::string(sp.status().message()).find("2 x 4 x 2 = 16") != std::string::npos);
  CHECK(MakeCpLayout(64, 4, 2, true).ok());

  CHECK(!MakeCpLayout(0, 1).ok());
  CHECK(!MakeCpLayout(16, 0).ok());
  CHECK(!MakeCpLayout(16, 1, 0).ok());
  auto layout = MakeCpLayout(16, 2);
  REQUIRE(layout.ok());
  CHECK(!LocalPositions(*layout, 2).ok());
  CHECK(!LocalPositions(*layout, -1).ok());
  std::vector<float> a(16), c(8);
  CHECK(!SliceSequence(*layout, 5, 1, 1, a.data(), c.data()).ok());
}

}  // namespace
}  // namespace mxmaca::layers::cp
