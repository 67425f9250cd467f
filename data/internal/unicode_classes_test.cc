// Tests for the UTF-8 decoder and the generated \p{L} / \p{N} / \s table. The whole
// table is compared with Python `regex` in //data:gpt2_bpe_tokenizer_parity_test.
#include "data/internal/unicode_classes.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>

namespace mxmaca::data::internal {
namespace {

// EncodeUtf8: the textbook encoder, written independently of the decoder.
std::string EncodeUtf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

Utf8Char Decode(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  return DecodeUtf8Char(p, p + s.size());
}

TEST_CASE("DecodeUtf8Char decodes every scalar value") {
  for (uint32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const std::string s = EncodeUtf8(cp);
    const Utf8Char c = Decode(s);
    REQUIRE(c.valid);
    REQUIRE(c.code_point == cp);
    REQUIRE(c.length == static_cast<int>(s.size()));
  }
}

TEST_CASE("DecodeUtf8Char rejects ill-formed sequences one byte at a time") {
  const std::string bad[] = {
      "\x80",              // lone continuation
      "\xc0\x80",          // overlong NUL
      "\xc1\xbf",          // overlong
      "\xe0\x9f\xbf",      // overlong 3-byte
      "\xed\xa0\x80",      // surrogate U+D800
      "\xed\xbf\xbf",      // surrogate U+DFFF
      "\xf0\x8f\xbf\xbf",  // overlong 4-byte
      "\xf4\x90\x80\x80",  // above U+10FFFF
      "\xf5\x80\x80\x80",  // invalid lead
      "\xff",
      "\xc3",      // truncated
      "\xe4\xb8",  // truncated
      "\xc3\x41",  // bad continuation
  };
  for (const std::string& s : bad) {
    INFO("bytes " << s.size());
    const Utf8Char c = Decode(s);
    CHECK(!c.valid);
    CHECK(c.length == 1);
    CHECK(!IsValidUtf8(s.data(), s.size()));
  }
  const std::string good = "a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x8e\x89";
  CHECK(IsValidUtf8(good.data(), good.size()));
}

TEST_CASE("IsValidUtf8 agrees with a scalar-value walk on random bytes") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 20000; ++trial) {
    // Half the trials: valid text built from random scalar values, one byte flipped
    // with probability 1/2.
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < n; ++i) {
      uint32_t cp;
      do {
        cp = static_cast<uint32_t>(rng() % 0x110000);
      } while (cp >= 0xD800 && cp <= 0xDFFF);
      s += EncodeUtf8(cp);
    }
    if (rng() % 2 == 0) {
      CHECK(IsValidUtf8(s.data(), s.size()));
    } else {
      s[rng() % s.size()] = static_cast<char>(rng() % 256);
      // Re-derive validity independently of DecodeUtf8Char: the bytes are valid
      // iff they split into pieces that are the textbook encodings of scalar values.
      size_t pos = 0;
      bool ok = true;
      while (pos < s.size() && ok) {
        ok = false;
        for (size_t len = 1; len <= 4 && pos + len <= s.size() && !ok; ++len) {
          const std::string piece = s.substr(pos, len);
          const auto* b = reinterpret_cast<const unsigned char*>(piece.data());
          static constexpr unsigned kLeadMask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
          uint32_t cp = b[0] & kLeadMask[len];
          for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (b[k] & 0x3F);
          const bool scalar = cp < 0x110000 && !(cp >= 0xD800 && cp <= 0xDFFF);
          if (scalar && EncodeUtf8(cp) == piece) {
            ok = true;
            pos += len;
          }
        }
      }
      CHECK(IsValidUtf8(s.data(), s.size()) == ok);
    }
  }
}

TEST_CASE("kAsciiClasses agrees with the generated table") {
  for (uint32_t c = 0; c < 128; ++c) {
    INFO("byte " << c);
    CHECK(kAsciiClasses[c] == ClassOfCodePoint(c));
  }
}

// Expected classes are Unicode facts as Python `regex` (Unicode 15.0) reports them.
TEST_CASE("ClassOfCodePoint spot checks") {
  CHECK(ClassOfCodePoint('a') == CharClass::kLetter);
  CHECK(ClassOfCodePoint('Z') == CharClass::kLetter);
  CHECK(ClassOfCodePoint('7') == CharClass::kNumber);
  CHECK(ClassOfCodePoint('\'') == CharClass::kOther);
  CHECK(ClassOfCodePoint(' ') == CharClass::kWhitespace);
  CHECK(ClassOfCodePoint(0x1C) == CharClass::kOther);         // FS: isspace() but not White_Space
  CHECK(ClassOfCodePoint(0x85) == CharClass::kWhitespace);    // NEL
  CHECK(ClassOfCodePoint(0xA0) == CharClass::kWhitespace);    // NBSP
  CHECK(ClassOfCodePoint(0xFEFF) == CharClass::kOther);       // BOM: not White_Space
  CHECK(ClassOfCodePoint(0x3000) == CharClass::kWhitespace);  // ideographic space
  CHECK(ClassOfCodePoint(0xE9) == CharClass::kLetter);        // é
  CHECK(ClassOfCodePoint(0x301) == CharClass::kOther);        // combining acute (Mn)
  CHECK(ClassOfCodePoint(0x663) == CharClass::kNumber);       // Arabic-Indic three
  CHECK(ClassOfCodePoint(0x216B) == CharClass::kNumber);      // Roman numeral twelve (Nl)
  CHECK(ClassOfCodePoint(0xBD) == CharClass::kNumber);        // ½ (No)
  CHECK(ClassOfCodePoint(0x4E2D) == CharClass::kLetter);      // 中
  CHECK(ClassOfCodePoint(0x1F389) == CharClass::kOther);      // 🎉
  CHECK(ClassOfCodePoint(0x31350) == CharClass::kLetter);     // CJK Ext. H (Unicode 15.0)
  CHECK(ClassOfCodePoint(0x2EBF0) == CharClass::kOther);      // CJK Ext. I (15.1): unassigned here
  CHECK(ClassOfCodePoint(0xD800) == CharClass::kOther);
  CHECK(ClassOfCodePoint(0x110000) == CharClass::kOther);
}

}  // namespace
}  // namespace mxmaca::data::internal
