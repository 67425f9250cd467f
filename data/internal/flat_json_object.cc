// data/internal/flat_json_object.cc: the encoder.json fast path (see the header).
#include "data/internal/flat_json_object.h"

#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "data/internal/utf8.h"

namespace mxmaca::data::internal {
namespace {

bool IsWs(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Length of the well-formed UTF-8 sequence at p (Unicode table 3-7), 0 if ill-formed.
size_t Utf8Length(const unsigned char* p, const unsigned char* end) {
  const unsigned char c = p[0];
  auto cont = [&](size_t i, unsigned char lo, unsigned char hi) {
    return p + i < end && p[i] >= lo && p[i] <= hi;
  };
  if (c >= 0xC2 && c <= 0xDF) return cont(1, 0x80, 0xBF) ? 2 : 0;
  if (c == 0xE0) return cont(1, 0xA0, 0xBF) && cont(2, 0x80, 0xBF) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
    return cont(1, 0x80, 0xBF) && cont(2, 0x80, 0xBF) ? 3 : 0;
  }
  if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2, 0x80, 0xBF) ? 3 : 0;
  if (c == 0xF0) return cont(1, 0x90, 0xBF) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) {
    return cont(1, 0x80, 0xBF) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) ? 4 : 0;
  }
  if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF) ? 4 : 0;
  return 0;
}

class Parser {
 public:
  explicit Parser(std::string_view text)
      : p_(reinterpret_cast<const unsigned char*>(text.data())), end_(p_ + text.size()) {}

  void SkipWs() {
    while (p_ < end_ && IsWs(static_cast<char>(*p_))) ++p_;
  }
  bool Consume(char c) {
    SkipWs();
    if (p_ < end_ && *p_ == static_cast<unsigned char>(c)) {
      ++p_;
      return true;
    }
    return false;
  }
  bool AtEnd() {
    SkipWs();
    return p_ == end_;
  }

  // A JSON string (the opening quote already consumed) into *out.
  bool String(std::string* out) {
    out->clear();
    while (true) {
      const unsigned char* run = p_;
      while (p_ < end_ && *p_ != '"' && *p_ != '\\' && *p_ >= 0x20 && *p_ < 0x80) ++p_;
      out->append(reinterpret_cast<const char*>(run), p_ - run);
      if (p_ == end_ || *p_ < 0x20) return false;
      if (*p_ == '"') {
        ++p_;
        return true;
      }
      if (*p_ >= 0x80) {
        const size_t n = Utf8Length(p_, end_);
        if (n == 0) return false;
        out->append(reinterpret_cast<const char*>(p_), n);
        p_ += n;
        continue;
      }
      ++p_;  // backslash
      if (p_ == end_) return false;
      const char e = static_cast<char>(*p_++);
      if (e != 'u') {
        static constexpr char kFrom[] = "\"\\/bfnrt";
        static constexpr char kTo[] = "\"\\/\b\f\n\r\t";
        const char* hit = std::strchr(kFrom, e);
        if (e == '\0' || hit == nullptr) return false;
        out->push_back(kTo[hit - kFrom]);
        continue;
      }
      int32_t cp = Hex4();  // \uXXXX, or a surrogate pair of them
      if (cp < 0) return false;
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
        p_ += 2;
        const int32_t low = Hex4();
        if (low < 0xDC00 || low > 0xDFFF) return false;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
      } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
        return false;
      }
      AppendUtf8(static_cast<uint32_t>(cp), out);
    }
  }

  // A JSON integer of at most 18 digits.
  bool Integer(int64_t* value) {
    SkipWs();
    bool negative = false;
    if (p_ < end_ && *p_ == '-') {
      negative = true;
      ++p_;
    }
    const unsigned char* start = p_;
    int64_t v = 0;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') v = v * 10 + (*p_++ - '0');
    const ptrdiff_t digits = p_ - start;
    if (digits == 0 || digits > 18 || (digits > 1 && *start == '0')) return false;
    if (p_ < end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) return false;
    *value = negative ? -v : v;
    return true;
  }

 private:
  int32_t Hex4() {
    if (end_ - p_ < 4) return -1;
    int32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const int h = HexValue(static_cast<char>(p_[i]));
      if (h < 0) return -1;
      v = v * 16 + h;
    }
    p_ += 4;
    return v;
  }

  const unsigned char* p_;
  const unsigned char* end_;
};

}  // namespace

std::optional<std::vector<std::pair<std::string, int64_t>>> ParseFlatStringIntObject(
    std::string_view text) {
  Parser parser(text);
  if (!parser.Consume('{')) return std::nullopt;
  std::vector<std::pair<std::string, int64_t>> entries;
  entries.reserve(text.size() / 16);
  absl::flat_hash_set<std::string_view> keys;
  std::string key;
  do {
    if (!parser.Consume('"') || !parser.String(&key) || !parser.Consume(':')) return std::nullopt;
    int64_t value;
    if (!parser.Integer(&value)) return std::nullopt;
    entries.emplace_back(std::move(key), value);
  } while (parser.Consume(','));
  if (!parser.Consume('}') || !parser.AtEnd()) return std::nullopt;
  keys.reserve(entries.size());
  for (const auto& entry : entries) {
    if (!keys.insert(entry.first).second) return std::nullopt;  // nlohmann: last one wins
  }
  return entries;
}

}  // namespace mxmaca::data::internal
