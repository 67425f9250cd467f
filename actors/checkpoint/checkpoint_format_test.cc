// actors/checkpoint/checkpoint_format_test.cc: names, safetensors header encode/parse,
// tensor index validation and JSON round trip.
#include "actors/checkpoint/checkpoint_format.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace mxmaca::actors::checkpoint {
namespace {

using Catch::Matchers::Contains;

TEST_CASE("names follow Megatron's iter_{:07d} and our shard file convention",
          "[checkpoint]") {
  CHECK(IterDirName(0) == "iter_0000000");
  CHECK(IterDirName(1234) == "iter_0001234");
  CHECK(IterDirName(123456789) == "iter_123456789");
  CHECK(ShardFileName("pp1_tp0") == "shard_pp1_tp0.safetensors");
  CHECK(ValidateWriterName("pp01_tp3.dp0-ep2").ok());
  CHECK_FALSE(ValidateWriterName("").ok());
  CHECK_FALSE(ValidateWriterName("a/b").ok());
  CHECK_FALSE(ValidateWriterName("..").ok());
  CHECK(ValidateTensorName("optimizer/exp_avg/decoder.layers.3.mlp.linear_fc1.weight").ok());
  CHECK_FALSE(ValidateTensorName("w#1").ok());
  CHECK_FALSE(ValidateTensorName("w x").ok());
  CHECK(*NumElements({}, "s") == 1);
  CHECK(*NumElements({3, 0, 5}, "z") == 0);
  CHECK_FALSE(NumElements({-1}, "neg").ok());
  CHECK_FALSE(NumElements({int64_t{1} << 31, int64_t{1} << 31}, "big").ok());
}

// Encodes random headers, checks the byte layout the spec prescribes, parses them back.
TEST_CASE("safetensors header encodes per the spec and parses back", "[checkpoint]") {
  std::mt19937 gen(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<SafetensorsEntry> entries;
    uint64_t offset = 0;
    const int n = 1 + gen() % 5;
    for (int i = 0; i < n; ++i) {
      SafetensorsEntry e;
      e.key = "t" + std::to_string(trial) + "/" + std::to_string(i);
      for (int d = gen() % 4; d > 0; --d) e.shape.push_back(gen() % 5);
      int64_t numel = 1;
      for (int64_t d : e.shape) numel *= d;
      e.begin = offset;
      offset += numel * 4;
      e.end = offset;
      entries.push_back(e);
    }
    const std::string header = EncodeSafetensorsHeader(entries, {{"format", "pt"}});
    uint64_t len = 0;
    std::memcpy(&len, header.data(), 8);
    REQUIRE(len == header.size() - 8);
    CHECK(len % 8 == 0);
    CHECK(header[8] == '{');
    const std::string file = header + std::string(offset, '\x5a');
    auto parsed = ParseSafetensorsHeader(file, file.size(), "mem");
    INFO(parsed.status().ToString());
    REQUIRE(parsed.ok());
    CHECK(parsed->data_start == header.size());
    CHECK(parsed->metadata.at("format") == "pt");
    REQUIRE(parsed->entries.size() == entries.size());
    for (const SafetensorsEntry& e : entries) {
      const SafetensorsEntry& p = parsed->entries.at(e.key);
      CHECK(p.shape == e.shape);
      CHECK(p.begin == e.begin);
      CHECK(p.end == e.end);
    }
  }
}

// Hand-written headers (independent of the encoder) that violate the spec.
TEST_CASE("safetensors parser rejects malformed headers", "[checkpoint]") {
  auto make = [](const std::string& json_text, size_t data_bytes) {
    std::string out(8, '\0');
    const uint64_t n = json_text.size();
    std::memcpy(out.data(), &n, 8);
    return out + json_text + std::string(data_bytes, '\0');
  };
  auto error = [](const std::string& file) {
    auto parsed = ParseSafetensorsHeader(file, file.size(), "f.safetensors");
    REQUIRE_FALSE(parsed.ok());
    CHECK(absl::IsDataLoss(parsed.status()));
    CHECK_THAT(std::string(parsed.status().message()), Contains("f.safetensors"));
    return std::string(parsed.status().message());
  };
  // A valid one first, so the failures below are about the one thing changed.
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  REQUIRE(ParseSafetensorsHeader(make(ok, 8), make(ok, 8).size(), "f").ok());
  CHECK_THAT(error(make(ok, 4)), Contains("truncated"));
  CHECK_THAT(error(make(ok, 12)), Contains("corrupt"));
  CHECK_THAT(error(make(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})", 12)),
             Contains("do not hold 2 F32 values"));
  CHECK_THAT(error(make(R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})", 4)),
             Contains("only \"F32\""));
  CHECK_THAT(error(make(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12)),
             Contains("without holes"));
  CHECK_THAT(error(make(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                        4)),
             Contains("without holes or overlap"));
  CHECK_THAT(error(make(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", 0)),
             Contains("negative"));
  CHECK_THAT(error(make(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4)),
             Contains("data_offsets"));
  CHECK_THAT(error(make(R"([1,2])", 0)), Contains("JSON object"));
  CHECK_THAT(error(make(R"({"a":)", 0)), Contains("not valid JSON"));
  CHECK_THAT(error(make(R"({"__metadata__":{"x":1}})", 0)), Contains("strings"));
  CHECK_THAT(error(std::string("\x10\0\0\0", 4)), Contains("truncated"));
}

TensorIndex TwoShardIndex(std::vector<int64_t> off1, std::vector<int64_t> shape1) {
  TensorIndex index;
  index["w"] = {{6, 4},
                {{"shard_a.safetensors", "w", {0, 0}, {3, 4}},
                 {"shard_b.safetensors", "w", std::move(off1), std::move(shape1)}}};
  return index;
}

TEST_CASE("tensor index validation: exact coverage", "[checkpoint]") {
  CHECK(ValidateTensorIndex(TwoShardIndex({3, 0}, {3, 4})).ok());
  absl::Status st = ValidateTensorIndex(TwoShardIndex({2, 0}, {3, 4}));
  CHECK(absl::IsFailedPrecondition(st));
  CHECK_THAT(std::string(st.message()), Contains("overlaps"));
  st = ValidateTensorIndex(TwoShardIndex({3, 1}, {3, 3}));
  CHECK_THAT(std::string(st.message()), Contains("cover 21 of 24"));
  CHECK_THAT(std::string(st.message()), Contains("element [3, 0] is in no shard"));
  st = ValidateTensorIndex(TwoShardIndex({4, 0}, {3, 4}));
  CHECK_THAT(std::string(st.message()), Contains("not inside the full shape"));
  st = ValidateTensorIndex(TwoShardIndex({3}, {3}));
  CHECK_THAT(std::string(st.message()), Contains("rank"));
  TensorIndex dup = TwoShardIndex({3, 0}, {3, 4});
  dup["w"].shards[1].file = "shard_a.safetensors";
  CHECK_THAT(std::string(ValidateTensorIndex(dup).message()), Contains("twice"));
  TensorIndex none;
  none["w"] = {{2}, {}};
  CHECK_THAT(std::string(ValidateTensorIndex(none).message()), Contains("no shards"));
  TensorIndex scalar;
  scalar["s"] = {{}, {{"shard_a.safetensors", "s", {}, {}}}};
  CHECK(ValidateTensorIndex(scalar).ok());
  scalar["s"].shards.push_back({"shard_b.safetensors", "s", {}, {}});
  CHECK_THAT(std::string(ValidateTensorIndex(scalar).message()), Contains("overlaps"));
  // Many shards (a 64 x 64 grid of 1 x 1 boxes) validate quickly and correctly.
  TensorIndex grid;
  for (int64_t i = 0; i < 64; ++i) {
    for (int64_t j = 0; j < 64; ++j) {
      grid["g"].shards.push_back(
          {"shard_a.safetensors", "g#" + std::to_string(i * 64 + j), {i, j}, {1, 1}});
    }
  }
  grid["g"].full_shape = {64, 64};
  CHECK(ValidateTensorIndex(grid).ok());
  grid["g"].shards.erase(grid["g"].shards.begin() + 64 * 17 + 5);
  CHECK_THAT(std::string(ValidateTensorIndex(grid).message()), Contains("[17, 5]"));
}

TEST_CASE("tensor index validation: overlapping shards of a huge tensor", "[checkpoint]") {
  // Regression (found while writing checkpoint_format_fuzz; its UBSan build reports it on
  // the unfixed code): eight full-size boxes of a 2^60-element tensor made the
  // stored-element sum overflow int64 before the overlap check ran. Now the overlap is
  // reported and nothing is summed past the tensor's size. The overflow itself shows only
  // under -fsanitize=undefined (run_checkpoint_format_fuzz.sh seeds with
  // fuzz_corpus/regress_stored_overflow).
  const int64_t n = int64_t{1} << 60;
  TensorIndex index;
  index["w"].full_shape = {n};
  for (int i = 0; i < 8; ++i) {
    index["w"].shards.push_back({"shard_" + std::to_string(i) + ".safetensors", "w", {0}, {n}});
  }
  absl::Status st = ValidateTensorIndex(index);
  CHECK(absl::IsFailedPrecondition(st));
  CHECK_THAT(std::string(st.message()), Contains("overlaps"));
  // Disjoint boxes that cover only part of it still report the coverage.
  index["w"].shards.resize(1);
  index["w"].shards[0].shape = {n / 2};
  st = ValidateTensorIndex(index);
  CHECK_THAT(std::string(st.message()),
             Contains("cover " + std::to_string(n / 2) + " of " + std::to_string(n)));
}

TEST_CASE("tensor index survives JSON and rejects malformed JSON", "[checkpoint]") {
  const TensorIndex index = TwoShardIndex({3, 0}, {3, 4});
  const nlohmann::json j = TensorIndexToJson(index);
  CHECK(j["w"]["dtype"] == "F32");
  auto back = TensorIndexFromJson(nlohmann::json::parse(j.dump()), "m.json");
  REQUIRE(back.ok());
  REQUIRE(back->size() == 1);
  const TensorEntry& e = back->at("w");
  CHECK(e.full_shape == std::vector<int64_t>{6, 4});
  REQUIRE(e.shards.size() == 2);
  CHECK(e.shards[1].file == "shard_b.safetensors");
  CHECK(e.shards[1].offsets == std::vector<int64_t>{3, 0});
  CHECK(e.shards[1].shape == std::vector<int64_t>{3, 4});

  nlohmann::json bad = j;
  bad["w"]["shape"] = "6x4";
  auto st = TensorIndexFromJson(bad, "m.json").status();
  CHECK(absl::IsDataLoss(st));
  CHECK_THAT(std::string(st.message()), Contains("m.json"));
  CHECK_THAT(std::string(st.message()), Contains("tensors[\"w\"].shape"));
  bad = j;
  bad["w"]["shards"][1].erase("key");
  CHECK_THAT(std::string(TensorIndexFromJson(bad, "m.json").status().message()),
             Contains("shards[1].key"));
  bad = j;
  bad["w"]["dtype"] = "F16";
  CHECK_THAT(std::string(TensorIndexFromJson(bad, "m.json").status().message()),
             Contains("only F32"));
}

TEST_CASE("the JSON index lists each tensor's shards in one order, whatever order they came in",
          "[checkpoint]") {
  // Ranks of a multi-process job report their shards as they finish: the same checkpoint
  // must give the same metadata.json bytes (found by tests/bench/fault_soak.py).
  TensorIndex forward = TwoShardIndex({3, 0}, {3, 4});
  TensorIndex reversed = forward;
  std::swap(reversed.at("w").shards[0], reversed.at("w").shards[1]);
  REQUIRE(reversed.at("w").shards[0].offsets != forward.at("w").shards[0].offsets);
  CHECK(TensorIndexToJson(forward).dump() == TensorIndexToJson(reversed).dump());
  CHECK(TensorIndexToJson(reversed)["w"]["shards"][0]["offsets"] ==
        nlohmann::json::array({0, 0}));
}


// Random byte flips, truncations and insertions of a valid file: the parser must return
// (OK or DataLoss) without crashing or reading out of bounds (the latter checked by running
// under ASan: bazel test --copt=-fsanitize=address --linkopt=-fsanitize=address).
TEST_CASE("safetensors parser survives mutated input", "[checkpoint]") {
  std::vector<SafetensorsEntry> entries = {{"a", {3, 2}, 0, 24}, {"b/c", {}, 24, 28},
                                           {"d", {0, 5}, 28, 28}};
  const std::string header = EncodeSafetensorsHeader(entries, {{"format", "pt"}});
  const std::string good = header + std::string(28, '\x11');
  std::mt19937 gen(99);
  int parsed_ok = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = good;
    const int edits = 1 + gen() % 4;
    for (int e = 0; e < edits; ++e) {
      const size_t pos = gen() % bytes.size();
      switch (gen() % 4) {
        case 0: bytes[pos] = static_cast<char>(gen()); break;
        case 1: bytes.resize(pos); break;
        case 2: bytes.insert(pos, 1, static_cast<char>(gen())); break;
        default: bytes[pos] = "{}[],:\"0123456789 "[gen() % 18]; break;
      }
      if (bytes.empty()) bytes = "x";
    }
    // Parse from an exactly-sized heap copy so ASan sees any overread.
    std::vector<char> copy(bytes.begin(), bytes.end());
    auto parsed = ParseSafetensorsHeader(absl::string_view(copy.data(), copy.size()),
                                         copy.size(), "fuzz");
    if (parsed.ok()) {
      ++parsed_ok;
      for (const auto& [key, e] : parsed->entries) {
        REQUIRE(parsed->data_start + e.end <= copy.size());
      }
    } else {
      REQUIRE(absl::IsDataLoss(parsed.status()));
    }
  }
  CHECK(parsed_ok < 3000);  // the mutations did break files
}

}  // namespace
}  // namespace mxmaca::actors::checkpoint
