// data/internal/utf8.h: appends one Unicode code point to a string as UTF-8, for the JSON
// line parser (\u escapes), GPT-2's byte-level spellings and the tokenizer.json
// components.
#ifndef MXMACA_DATA_INTERNAL_UTF8_H_
#define MXMACA_DATA_INTERNAL_UTF8_H_

#include <cstdint>
#include <string>

namespace mxmaca::data::internal {

// AppendUtf8: the 1-4 byte UTF-8 encoding of `cp` (cp <= 0x10FFFF; surrogates are encoded
// as they are, callers that must reject them check before) appended to *out.
inline void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace mxmaca::data::internal

#endif  // MXMACA_DATA_INTERNAL_UTF8_H_
