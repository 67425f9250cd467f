// Tests for Gpt2WordSplitter (GPT-2's pre-tokenizer regex by hand). Full parity with
// Python `regex` over the KJV corpus and random strings is in
// //data:gpt2_bpe_tokenizer_parity_test; these are the cases worth reading.
#include "data/internal/pretokenizer.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace mxmaca::data::internal {
namespace {

std::vector<std::string> Split(std::string_view text) {
  std::vector<std::string> words;
  Gpt2WordSplitter splitter(text);
  for (std::string_view word; splitter.Next(&word);) words.emplace_back(word);
  return words;
}

using Words = std::vector<std::string>;

// Expected splits were produced once by Python `regex.findall` with GPT-2's pattern
// (the reference), not by this code.
TEST_CASE("Gpt2WordSplitter matches regex.findall on tricky strings") {
  CHECK(Split("Hello  world") == Words{"Hello", " ", " world"});
  CHECK(Split("it's") == Words{"it", "'s"});
  CHECK(Split("'S'll") == Words{"'", "S", "'ll"});
  CHECK(Split("a\n\n b") == Words{"a", "\n\n", " b"});
  CHECK(Split(" \t x") == Words{" \t", " x"});
  CHECK(Split("12ab3 !?x") == Words{"12", "ab", "3", " !?", "x"});
  CHECK(Split("   ") == Words{"   "});
  CHECK(Split(" \u00a0x") == Words{" ", "\u00a0", "x"});
  CHECK(Split("x\u0085 y") == Words{"x", "\u0085", " y"});
  CHECK(Split("\u00bd\u00bc \u216b") == Words{"\u00bd\u00bc", " \u216b"});
  CHECK(Split("e\u0301t") == Words{"e", "\u0301", "t"});
  CHECK(Split("\u3000\u3000x") == Words{"\u3000", "\u3000", "x"});
  CHECK(Split("x''s") == Words{"x", "''", "s"});
}

TEST_CASE("Gpt2WordSplitter handles the ends of the text") {
  CHECK(Split("").empty());
  CHECK(Split(" ") == Words{" "});
  CHECK(Split("'") == Words{"'"});
  CHECK(Split("'r") == Words{"'", "r"});  // 're needs both letters
  CHECK(Split("x ") == Words{"x", " "});
  CHECK(Split("x  \n") == Words{"x", "  \n"});  // trailing run taken whole
}

// Ill-formed UTF-8 bytes are single characters of class kOther (documented in the
// header): they join punctuation runs and take a leading space like punctuation.
TEST_CASE("Gpt2WordSplitter treats ill-formed UTF-8 bytes as punctuation") {
  CHECK(Split("a\xff"
              "b") == Words{"a", "\xff", "b"});
  CHECK(Split(" \xff\xfe!x") == Words{" \xff\xfe!", "x"});
  CHECK(Split("\xc3") == Words{"\xc3"});                        // truncated sequence
  CHECK(Split("\xc3\xa9\xc3") == Words{"\xc3\xa9", "\xc3"});    // é then a stray lead byte
  CHECK(Split("\xed\xa0\x80x") == Words{"\xed\xa0\x80", "x"});  // encoded surrogate
  CHECK(Split("\xc0\xaf") == Words{"\xc0\xaf"});                // overlong '/'
}

TEST_CASE("Gpt2WordSplitter words tile random byte strings") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  // Bytes biased towards the interesting ones: spaces, apostrophes, letters, UTF-8
  // lead and continuation bytes.
  const std::string alphabet = std::string(" \t\n'sretvlmd0aZ!.") + "\xc3\xa9\xe4\xb8\xad\x80\xff";
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const int len = static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) {
      text.push_back(rng() % 4 == 0 ? static_cast<char>(rng() % 256)
                                    : alphabet[rng() % alphabet.size()]);
    }
    std::string joined;
    Gpt2WordSplitter splitter(text);
    for (std::string_view word; splitter.Next(&word);) {
      REQUIRE(!word.empty());
      joined.append(word);
    }
    REQUIRE(joined == text);
  }
}

}  // namespace
}  // namespace mxmaca::data::internal
