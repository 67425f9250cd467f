// data/internal/unicode_classes.h: UTF-8 decoding and the three Unicode classes
// (\p{L}, \p{N}, \s) that GPT-2's pre-tokenizer regex distinguishes.
//
// The class table is generated from the Python `regex` module (2022.10.31, whose
// own tables are Unicode 15.0) by generate_unicode_classes.py into
// unicode_classes.inc; `regex` is what openai/gpt-2 src/encoder.py and Megatron-LM's
// gpt2_tokenization.py use, so it is the reference. \s there is Unicode White_Space
// (25 code points, including U+0085 but not U+FEFF).
#ifndef MXMACA_DATA_INTERNAL_UNICODE_CLASSES_H_
#define MXMACA_DATA_INTERNAL_UNICODE_CLASSES_H_

#include <array>
#include <cstddef>
#include <cstdint>

namespace mxmaca::data::internal {

// CharClass: which of GPT-2's regex classes a character is in. The classes are
// disjoint (checked by the generator).
enum class CharClass : uint8_t {
  kOther = 0,       // none of the below (punctuation, symbols, marks, controls, ...)
  kLetter = 1,      // \p{L}
  kNumber = 2,      // \p{N}
  kWhitespace = 3,  // \s (Unicode White_Space)
};

// ClassOfCodePoint: the class of code point `cp` (0 <= cp <= 0x10FFFF; anything
// else, including surrogates, is kOther).
CharClass ClassOfCodePoint(uint32_t cp);

// kAsciiClasses[c]: ClassOfCodePoint(c) for c < 128, as a constant for the
// pre-tokenizer's fast path (a unit test checks the two agree).
inline constexpr std::array<CharClass, 128> kAsciiClasses = [] {
  std::array<CharClass, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      t[c] = CharClass::kLetter;
    } else if (c >= '0' && c <= '9') {
      t[c] = CharClass::kNumber;
    } else if (c == ' ' || (c >= '\t' && c <= '\r')) {
      t[c] = CharClass::kWhitespace;
    } else {
      t[c] = CharClass::kOther;
    }
  }
  return t;
}();

// Utf8Char: one character found by DecodeUtf8Char.
struct Utf8Char {
  uint32_t code_point;  // the scalar value; undefined when !valid
  int length;           // bytes consumed, 1..4
  bool valid;           // false: an ill-formed byte, consumed alone
};

// DecodeUtf8Char: decodes the character starting at `p` (requires p < end).
// Well-formedness follows Unicode Table 3-7 (no overlongs, no surrogates, nothing
// above U+10FFFF, no truncated sequences). A byte that does not begin a
// well-formed sequence is returned alone, with valid = false and length = 1, so
// that every byte string splits into characters and none is lost.
inline Utf8Char DecodeUtf8Char(const unsigned char* p, const unsigned char* end) {
  const unsigned b0 = p[0];
  if (b0 < 0x80) return {b0, 1, true};
  const ptrdiff_t avail = end - p;
  auto cont = [](unsigned b) { return (b & 0xC0u) == 0x80u; };
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (avail >= 2 && cont(p[1])) return {((b0 & 0x1Fu) << 6) | (p[1] & 0x3Fu), 2, true};
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (avail >= 3 && cont(p[1]) && cont(p[2])) {
      const unsigned b1 = p[1];
      const bool ok = (b0 == 0xE0) ? b1 >= 0xA0 : (b0 == 0xED) ? b1 <= 0x9F : true;
      if (ok) {
        return {((b0 & 0x0Fu) << 12) | ((b1 & 0x3Fu) << 6) | (p[2] & 0x3Fu), 3, true};
      }
    }
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (avail >= 4 && cont(p[1]) && cont(p[2]) && cont(p[3])) {
      const unsigned b1 = p[1];
      const bool ok = (b0 == 0xF0) ? b1 >= 0x90 : (b0 == 0xF4) ? b1 <= 0x8F : true;
      if (ok) {
        return {
            ((b0 & 0x07u) << 18) | ((b1 & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu), 4,
            true};
      }
    }
  }
  return {0, 1, false};
}

// IsValidUtf8: whether `size` bytes at `data` are well-formed UTF-8 (Table 3-7).
bool IsValidUtf8(const char* data, size_t size);

}  // namespace mxmaca::data::internal

#endif  // MXMACA_DATA_INTERNAL_UNICODE_CLASSES_H_
