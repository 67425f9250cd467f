// data/json_line_parser.cc: one-pass JSON validation + extraction of top-level keys,
// with Python json.loads's grammar (Lib/json/scanner.py, Modules/_json.c).
#include "data/json_line_parser.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "data/internal/utf8.h"

namespace mxmaca::data {
namespace {

using internal::AppendUtf8;

bool IsWhitespace(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsDigit(unsigned char c) { return c >= '0' && c <= '9'; }

int HexValue(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}


class Parser {
 public:
  explicit Parser(std::string_view text)
      : s_(reinterpret_cast<const unsigned char*>(text.data())), n_(text.size()) {}

  absl::Status Run(const std::vector<std::string>& keys, std::vector<JsonField>* fields) {
    fields->assign(keys.size(), JsonField());
    SkipWhitespace();
    bool ok;
    const char* type = "object";
    if (pos_ < n_ && s_[pos_] == '{') {
      ok = ParseTopObject(keys, fields);
    } else {
      ok = SkipValue(0, &type);
    }
    if (ok) {
      SkipWhitespace();
      if (pos_ != n_) ok = Fail("extra data after the JSON value");
    }
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid JSON at byte ", error_pos_, ": ", error_));
    }
    if (std::strcmp(type, "object") != 0) {
      return absl::InvalidArgumentError(absl::StrCat("expected a JSON object, got ", type));
    }
    return absl::OkStatus();
  }

 private:
  bool Fail(const char* what) {
    if (error_ == nullptr) {
      error_ = what;
      error_pos_ = pos_;
    }
    return false;
  }

  void SkipWhitespace() {
    while (pos_ < n_ && IsWhitespace(s_[pos_])) ++pos_;
  }

  bool Expect(unsigned char c, const char* what) {
    if (pos_ < n_ && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return Fail(what);
  }

  bool Literal(const char* word) {
    const size_t len = std::strlen(word);
    if (n_ - pos_ >= len && std::memcmp(s_ + pos_, word, len) == 0) {
      pos_ += len;
      return true;
    }
    return Fail("invalid literal");
  }

  // Length of the well-formed UTF-8 sequence at pos_ (RFC 3629, as Python's strict
  // decoder: no overlongs, no surrogates, nothing above U+10FFFF), or 0.
  size_t Utf8Length() const {
    const unsigned char c = s_[pos_];
    auto cont = [this](size_t i, unsigned char lo, unsigned char hi) {
      return pos_ + i < n_ && s_[pos_ + i] >= lo && s_[pos_ + i] <= hi;
    };
    if (c >= 0xC2 && c <= 0xDF) return cont(1, 0x80, 0xBF) ? 2 : 0;
    if (c == 0xE0) return cont(1, 0xA0, 0xBF) && cont(2, 0x80, 0xBF) ? 3 : 0;
    if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
      return cont(1, 0x80, 0xBF) && cont(2, 0x80, 0xBF) ? 3 : 0;
    }
    if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2, 0x80, 0xBF) ? 3 : 0;
    if (c == 0xF0) {
      return cont(1, 0x90, 0xBF) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) ? 4 : 0;
    }
    if (c >= 0xF1 && c <= 0xF3) {
      return cont(1, 0x80, 0xBF) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) ? 4 : 0;
    }
    if (c == 0xF4) {
      return cont(1, 0x80, 0x8F) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) ? 4 : 0;
    }
    return 0;
  }

  bool Hex4(uint32_t* value) {
    if (n_ - pos_ < 4) return Fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const int h = HexValue(s_[pos_ + i]);
      if (h < 0) return Fail("invalid \\u escape");
      v = v * 16 + static_cast<uint32_t>(h);
    }
    pos_ += 4;
    *value = v;
    return true;
  }

  // A string at pos_ (the opening quote); decoded into *out unless out is nullptr.
  bool ParseString(std::string* out) {
    ++pos_;
    while (true) {
      const size_t start = pos_;
      while (pos_ < n_) {
        const unsigned char c = s_[pos_];
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
        ++pos_;
      }
      if (out != nullptr) out->append(reinterpret_cast<const char*>(s_ + start), pos_ - start);
      if (pos_ >= n_) return Fail("unterminated string");
      const unsigned char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20) return Fail("control character in string");
      if (c >= 0x80) {
        const size_t len = Utf8Length();
        if (len == 0) return Fail("invalid UTF-8 in string");
        if (out != nullptr) out->append(reinterpret_cast<const char*>(s_ + pos_), len);
        pos_ += len;
        continue;
      }
      ++pos_;  // backslash
      if (pos_ >= n_) return Fail("unterminated string");
      const unsigned char e = s_[pos_++];
      char simple = 0;
      switch (e) {
        case '"': simple = '"'; break;
        case '\\': simple = '\\'; break;
        case '/': simple = '/'; break;
        case 'b': simple = '\b'; break;
        case 'f': simple = '\f'; break;
        case 'n': simple = '\n'; break;
        case 'r': simple = '\r'; break;
        case 't': simple = '\t'; break;
        case 'u': break;
        default:
          --pos_;
          return Fail("invalid escape");
      }
      if (e != 'u') {
        if (out != nullptr) out->push_back(simple);
        continue;
      }
      uint32_t cp;
      if (!Hex4(&cp)) return false;
      if (cp >= 0xDC00 && cp <= 0xDFFF) return Fail("lone low surrogate in \\u escape");
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        uint32_t low;
        if (n_ - pos_ < 2 || s_[pos_] != '\\' || s_[pos_ + 1] != 'u') {
          return Fail("lone high surrogate in \\u escape");
        }
        pos_ += 2;
        if (!Hex4(&low)) return false;
        if (low < 0xDC00 || low > 0xDFFF) return Fail("lone high surrogate in \\u escape");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
      }
      if (out != nullptr) AppendUtf8(cp, out);
    }
  }

  // Python's NUMBER_RE: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?, or -Infinity.
  bool SkipNumber() {
    if (s_[pos_] == '-') {
      ++pos_;
      if (pos_ < n_ && s_[pos_] == 'I') return Literal("Infinity");
    }
    if (pos_ >= n_ || !IsDigit(s_[pos_])) return Fail("invalid number");
    if (s_[pos_] == '0') {
      ++pos_;
    } else {
      while (pos_ < n_ && IsDigit(s_[pos_])) ++pos_;
    }
    if (pos_ < n_ && s_[pos_] == '.') {
      ++pos_;
      if (pos_ >= n_ || !IsDigit(s_[pos_])) return Fail("invalid number");
      while (pos_ < n_ && IsDigit(s_[pos_])) ++pos_;
    }
    if (pos_ < n_ && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < n_ && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (pos_ >= n_ || !IsDigit(s_[pos_])) return Fail("invalid number");
      while (pos_ < n_ && IsDigit(s_[pos_])) ++pos_;
    }
    return true;
  }

  // Validates one value at pos_ (after whitespace) at nesting `depth`; sets *type.
  bool SkipValue(int depth, const char** type) {
    if (pos_ >= n_) return Fail("expected a value");
    switch (s_[pos_]) {
      case '"':
        *type = "string";
        return ParseString(nullptr);
      case '{':
        *type = "object";
        return SkipContainer(depth + 1, '}');
      case '[':
        *type = "array";
        return SkipContainer(depth + 1, ']');
      case 't':
        *type = "boolean";
        return Literal("true");
      case 'f':
        *type = "boolean";
        return Literal("false");
      case 'n':
        *type = "null";
        return Literal("null");
      case 'N':
        *type = "number";
        return Literal("NaN");
      case 'I':
        *type = "number";
        return Literal("Infinity");
      default:
        *type = "number";
        if (s_[pos_] == '-' || IsDigit(s_[pos_])) return SkipNumber();
        return Fail("expected a value");
    }
  }

  // An object ('}') or array (']') at pos_, validated and skipped.
  bool SkipContainer(int depth, unsigned char close) {
    if (depth > kMaxJsonDepth) return Fail("nesting too deep");
    ++pos_;
    SkipWhitespace();
    if (pos_ < n_ && s_[pos_] == close) {
      ++pos_;
      return true;
    }
    while (true) {
      if (close == '}') {
        if (pos_ >= n_ || s_[pos_] != '"') return Fail("expected a string key");
        if (!ParseString(nullptr)) return false;
        SkipWhitespace();
        if (!Expect(':', "expected ':'")) return false;
        SkipWhitespace();
      }
      const char* type;
      if (!SkipValue(depth, &type)) return false;
      SkipWhitespace();
      if (pos_ < n_ && s_[pos_] == ',') {
        ++pos_;
        SkipWhitespace();
        continue;
      }
      return Expect(close, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
    }
  }

  // The value of a requested key: strings decoded, arrays' string elements decoded.
  bool ParseField(JsonField* field) {
    *field = JsonField();
    field->present = true;
    if (pos_ >= n_) return Fail("expected a value");
    if (s_[pos_] == '"') {
      field->type = "string";
      field->strings.emplace_back();
      return ParseString(&field->strings.back());
    }
    if (s_[pos_] != '[') return SkipValue(1, &field->type);
    field->type = "array";
    if (2 > kMaxJsonDepth) return Fail("nesting too deep");
    ++pos_;
    SkipWhitespace();
    if (pos_ < n_ && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    for (int64_t index = 0;; ++index) {
      if (pos_ < n_ && s_[pos_] == '"') {
        field->strings.emplace_back();
        if (!ParseString(&field->strings.back())) return false;
      } else {
        const char* type;
        if (!SkipValue(2, &type)) return false;
        if (field->first_non_string < 0) {
          field->first_non_string = index;
          field->non_string_type = type;
        }
      }
      SkipWhitespace();
      if (pos_ < n_ && s_[pos_] == ',') {
        ++pos_;
        SkipWhitespace();
        continue;
      }
      return Expect(']', "expected ',' or ']'");
    }
  }

  bool ParseTopObject(const std::vector<std::string>& keys, std::vector<JsonField>* fields) {
    ++pos_;
    SkipWhitespace();
    if (pos_ < n_ && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    std::string key;
    while (true) {
      if (pos_ >= n_ || s_[pos_] != '"') return Fail("expected a string key");
      key.clear();
      if (!ParseString(&key)) return false;
      SkipWhitespace();
      if (!Expect(':', "expected ':'")) return false;
      SkipWhitespace();
      size_t k = 0;
      while (k < keys.size() && keys[k] != key) ++k;
      if (k < keys.size()) {
        if (!ParseField(&(*fields)[k])) return false;
      } else {
        const char* type;
        if (!SkipValue(1, &type)) return false;
      }
      SkipWhitespace();
      if (pos_ < n_ && s_[pos_] == ',') {
        ++pos_;
        SkipWhitespace();
        continue;
      }
      return Expect('}', "expected ',' or '}'");
    }
  }

  const unsigned char* s_;
  size_t n_;
  size_t pos_ = 0;
  const char* error_ = nullptr;
  size_t error_pos_ = 0;
};

}  // namespace

absl::Status ParseJsonObjectFields(std::string_view text, const std::vector<std::string>& keys,
                                   std::vector<JsonField>* fields) {
  return Parser(text).Run(keys, fields);
}

}  // namespace mxmaca::data
