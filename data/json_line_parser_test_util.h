// data/json_line_parser_test_util.h: random JSONL lines for the JSON parser tests:
// valid objects with a "text" key of every type, nested values, escapes, raw UTF-8,
// optional Python extensions (NaN, Infinity, long numbers), random whitespace, and
// random byte mutations that make many lines invalid.
#ifndef MXMACA_DATA_JSON_LINE_PARSER_TEST_UTIL_H_
#define MXMACA_DATA_JSON_LINE_PARSER_TEST_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

namespace mxmaca::data::testing {

class JsonLineGenerator {
 public:
  // python_extensions: also emit NaN, Infinity, -Infinity, long numbers and big
  // exponents (accepted by json.loads, rejected by nlohmann).
  JsonLineGenerator(uint64_t seed, bool python_extensions)
      : rng_(seed), python_(python_extensions) {}

  // Line: one line (no '\n' inside).
  std::string Line() {
    std::string line;
    if (Chance(0.05)) {
      line = Value(1);  // any top-level value
    } else {
      line = "{";
      const int members = Uniform(0, 4);
      bool text_done = false;
      for (int m = 0; m < members || (!text_done && Chance(0.8)); ++m) {
        if (m > 0) line += Ws() + ",";
        std::string key;
        if (!text_done && Chance(0.5)) {
          key = "\"text\"";
          text_done = !Chance(0.1);  // sometimes a repeated key
        } else {
          key = Chance(0.5) ? "\"title\"" : String();
        }
        line += Ws() + key + Ws() + ":" + Ws() + TextValue() + Ws();
      }
      line += "}";
    }
    line = Ws() + line + Ws();
    if (Chance(0.4)) Mutate(&line);
    for (char& c : line) {
      if (c == '\n') c = ' ';
    }
    return line;
  }

 private:
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  std::string Ws() {
    static const char kWs[] = {' ', '\t', '\r'};
    std::string ws;
    while (Chance(0.2)) ws += kWs[Uniform(0, 2)];
    return ws;
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xE0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  uint32_t CodePoint() {
    switch (Uniform(0, 3)) {
      case 0: return static_cast<uint32_t>(Uniform(0x80, 0x7FF));
      case 1: {
        uint32_t cp = static_cast<uint32_t>(Uniform(0x800, 0xFFFF));
        return (cp >= 0xD800 && cp <= 0xDFFF) ? 0x4E00 : cp;
      }
      case 2: return static_cast<uint32_t>(Uniform(0x10000, 0x10FFFF));
      default: return static_cast<uint32_t>(Uniform(0x20, 0x7E));
    }
  }

  std::string String() {
    std::string s = "\"";
    const int pieces = Uniform(0, 8);
    for (int p = 0; p < pieces; ++p) {
      const int kind = Uniform(0, 9);
      if (kind <= 3) {  // printable ASCII run, no quote or backslash
        for (int i = Uniform(1, 12); i > 0; --i) {
          char c = static_cast<char>(Uniform(0x20, 0x7E));
          if (c == '"' || c == '\\') c = 'q';
          s += c;
        }
      } else if (kind == 4) {
        static const char* kEscapes[] = {"\\\"", "\\\\", "\\/", "\\b", "\\f",
                                         "\\n",  "\\r",  "\\t"};
        s += kEscapes[Uniform(0, 7)];
      } else if (kind == 5 || kind == 6) {  // \u escapes
        char buf[16];
        const uint32_t cp = CodePoint();
        if (cp >= 0x10000) {
          const uint32_t v = cp - 0x10000;
          std::snprintf(buf, sizeof(buf), "\\u%04X\\u%04x", 0xD800 + (v >> 10),
                        0xDC00 + (v & 0x3FF));
        } else if (Chance(0.03)) {
          std::snprintf(buf, sizeof(buf), "\\u%04x", Uniform(0xD800, 0xDFFF));  // lone
        } else {
          std::snprintf(buf, sizeof(buf), "\\u%04x", Chance(0.2) ? Uniform(0, 0x1F) : cp);
        }
        s += buf;
      } else if (kind <= 8) {
        AppendUtf8(CodePoint(), &s);
      } else if (Chance(0.1)) {
        s += static_cast<char>(Uniform(1, 0x1F));  // raw control character: invalid
      }
    }
    return s + "\"";
  }

  std::string Number() {
    if (python_ && Chance(0.15)) {
      static const char* kSpecial[] = {"NaN", "Infinity", "-Infinity", "1e400", "-2.5E+999",
                                       "123456789012345678901234567890"};
      return kSpecial[Uniform(0, 5)];
    }
    std::string n = Chance(0.3) ? "-" : "";
    if (Chance(0.3)) {
      n += "0";
    } else {
      n += static_cast<char>('1' + Uniform(0, 8));
      for (int i = Uniform(0, 6); i > 0; --i) n += static_cast<char>('0' + Uniform(0, 9));
    }
    if (Chance(0.3)) {
      n += ".";
      for (int i = Uniform(1, 4); i > 0; --i) n += static_cast<char>('0' + Uniform(0, 9));
    }
    if (Chance(0.2)) {
      n += Chance(0.5) ? "e" : "E";
      if (Chance(0.5)) n += Chance(0.5) ? "+" : "-";
      for (int i = Uniform(1, 2); i > 0; --i) n += static_cast<char>('0' + Uniform(0, 9));
    }
    return n;
  }

  std::string Value(int depth) {
    const int kind = depth > 5 ? Uniform(0, 3) : Uniform(0, 5);
    switch (kind) {
      case 0: return String();
      case 1: return Number();
      case 2: {
        static const char* kLiterals[] = {"true", "false", "null"};
        return kLiterals[Uniform(0, 2)];
      }
      case 3: return String();
      case 4: {
        std::string a = "[" + Ws();
        for (int i = Uniform(0, 4); i > 0; --i) {
          a += Value(depth + 1) + Ws() + (i > 1 ? "," + Ws() : "");
        }
        return a + "]";
      }
      default: {
        std::string o = "{" + Ws();
        for (int i = Uniform(0, 3); i > 0; --i) {
          o += String() + Ws() + ":" + Ws() + Value(depth + 1) + Ws() + (i > 1 ? "," : "");
        }
        return o + "}";
      }
    }
  }

  // The value of "text": mostly a string or an array of strings.
  std::string TextValue() {
    const double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (r < 0.55) return String();
    if (r < 0.8) {
      std::string a = "[";
      for (int i = Uniform(0, 4); i > 0; --i) {
        a += (Chance(0.9) ? String() : Value(2)) + (i > 1 ? "," + Ws() : "");
      }
      return a + "]";
    }
    return Value(1);
  }

  void Mutate(std::string* line) {
    static const char kBytes[] = {'"', '\\', '{', '}', '[', ']', ',', ':', '0', 'e', '-',
                                  ' ', '\x01', '\xc3', '\x80', 'u', 'N', '\xed', '\xa0'};
    for (int m = Uniform(1, 3); m > 0; --m) {
      const size_t pos = line->empty() ? 0 : static_cast<size_t>(Uniform(0, line->size() - 1));
      const char byte = kBytes[Uniform(0, sizeof(kBytes) - 1)];
      switch (Uniform(0, 2)) {
        case 0:
          if (!line->empty()) line->erase(pos, 1);
          break;
        case 1:
          line->insert(line->begin() + pos, byte);
          break;
        default:
          if (!line->empty()) (*line)[pos] = byte;
      }
    }
  }

  std::mt19937_64 rng_;
  bool python_;
};

}  // namespace mxmaca::data::testing

#endif  // MXMACA_DATA_JSON_LINE_PARSER_TEST_UTIL_H_
