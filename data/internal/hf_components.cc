// data/internal/hf_components.cc: tokenizer.json normalizers, pre-tokenizers, decoders.
#include "data/internal/hf_components.h"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "data/internal/byte_level.h"
#include "data/internal/pcre2_regex.h"
#include "data/internal/utf8.h"

namespace mxmaca::data::internal {
namespace {

using json = nlohmann::json;

// GPT-2's pre-tokenizer regex, as huggingface/tokenizers' ByteLevel uses it.
constexpr char kByteLevelPattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

absl::Status Invalid(absl::string_view what, const json& j) {
  std::string dump = j.dump();
  if (dump.size() > 200) dump = dump.substr(0, 200) + "...";
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", dump));
}

std::string TypeOf(const json& j) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) return "";
  return j["type"].get<std::string>();
}

absl::StatusOr<std::string> StringField(const json& j, const char* key, const char* def) {
  if (!j.contains(key) || j[key].is_null()) {
    if (def != nullptr) return std::string(def);
    return Invalid(absl::StrCat("missing string field \"", key, "\""), j);
  }
  if (!j[key].is_string()) return Invalid(absl::StrCat("\"", key, "\" is not a string"), j);
  return j[key].get<std::string>();
}

bool BoolField(const json& j, const char* key, bool def) {
  if (!j.contains(key) || !j[key].is_boolean()) return def;
  return j[key].get<bool>();
}


// NextCodePoint: decodes the UTF-8 character at text[*i] and advances *i; an
// ill-formed byte decodes as itself + 0xDC00 (never a byte-level character).
uint32_t NextCodePoint(std::string_view text, size_t* i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = b(*i);
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || *i + len > text.size()) {
    ++*i;
    return 0xDC00 + c;
  }
  uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < len; ++k) {
    if ((b(*i + k) & 0xC0) != 0x80) {
      ++*i;
      return 0xDC00 + c;
    }
    cp = (cp << 6) | (b(*i + k) & 0x3F);
  }
  *i += len;
  return cp;
}

// Matcher: finds pattern occurrences ({"String": s} literally or {"Regex": r}).
struct Matcher {
  std::string literal;
  std::shared_ptr<Pcre2Regex> regex;

  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view text) const {
    if (regex) return regex->FindAll(text);
    std::vector<std::pair<size_t, size_t>> out;
    if (literal.empty()) return out;
    for (size_t pos = text.find(literal); pos != std::string_view::npos;
         pos = text.find(literal, pos + literal.size())) {
      out.emplace_back(pos, pos + literal.size());
    }
    return out;
  }
};

absl::StatusOr<Matcher> ParsePattern(const json& j) {
  if (!j.contains("pattern") || !j["pattern"].is_object()) return Invalid("no \"pattern\"", j);
  const json& p = j["pattern"];
  Matcher m;
  if (p.contains("String") && p["String"].is_string()) {
    m.literal = p["String"].get<std::string>();
  } else if (p.contains("Regex") && p["Regex"].is_string()) {
    MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<Pcre2Regex> r,
                            Pcre2Regex::Compile(p["Regex"].get<std::string>()));
    m.regex = std::move(r);
  } else {
    return Invalid("\"pattern\" is neither {\"String\": ...} nor {\"Regex\": ...}", j);
  }
  return m;
}

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// SplitPiece: HF's NormalizedString::split(pattern, behavior) on one piece.
void SplitPiece(const Piece& piece, const std::vector<std::pair<size_t, size_t>>& found,
                bool invert, Behavior behavior, std::vector<Piece>* out) {
  // Parts of the piece, each flagged as a match (after inversion) or not.
  std::vector<std::pair<std::string_view, bool>> parts;
  const std::string_view s = piece.text;
  size_t prev = 0;
  for (const auto& [b, e] : found) {
    if (b > prev) parts.emplace_back(s.substr(prev, b - prev), invert);
    parts.emplace_back(s.substr(b, e - b), !invert);
    prev = e;
  }
  if (prev < s.size()) parts.emplace_back(s.substr(prev), invert);
  if (invert) {  // merge adjacent parts of the same kind produced by inversion
    std::vector<std::pair<std::string_view, bool>> merged;
    for (const auto& p : parts) {
      if (!merged.empty() && merged.back().second == p.second && !p.second) {
        merged.back().first = std::string_view(merged.back().first.data(),
                                               merged.back().first.size() + p.first.size());
      } else {
        merged.push_back(p);
      }
    }
    parts = std::move(merged);
  }
  std::vector<std::string> texts;
  switch (behavior) {
    case Behavior::kRemoved:
      for (const auto& [t, m] : parts)
        if (!m) texts.emplace_back(t);
      break;
    case Behavior::kIsolated:
      for (const auto& [t, m] : parts) texts.emplace_back(t);
      break;
    case Behavior::kContiguous: {
      bool last_match = false;
      for (const auto& [t, m] : parts) {
        if (m && last_match && !texts.empty()) {
          texts.back().append(t);
        } else {
          texts.emplace_back(t);
        }
        last_match = m;
      }
      break;
    }
    case Behavior::kMergedWithPrevious: {
      bool last_match = false;
      for (const auto& [t, m] : parts) {
        if (m && !last_match && !texts.empty()) {
          texts.back().append(t);
        } else {
          texts.emplace_back(t);
        }
        last_match = m;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool last_match = false;
      for (const auto& [t, m] : parts) {
        if (last_match && !m && !texts.empty()) {
          texts.back().append(t);
        } else {
          texts.emplace_back(t);
        }
        last_match = m;
      }
      break;
    }
  }
  bool first = piece.at_start;
  for (std::string& t : texts) {
    if (t.empty()) continue;
    out->push_back(Piece{std::move(t), first});
    first = false;
  }
}

absl::StatusOr<Behavior> ParseBehavior(const json& j) {
  MXMACA_ASSIGN_OR_RETURN(std::string b, StringField(j, "behavior", "Isolated"));
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  return Invalid(absl::StrCat("unknown split behavior \"", b, "\""), j);
}

PreTokenizeFn ForEachPiece(std::function<void(const Piece&, std::vector<Piece>*)> fn) {
  return [fn = std::move(fn)](std::vector<Piece>* pieces) {
    std::vector<Piece> out;
    out.reserve(pieces->size());
    for (const Piece& p : *pieces) fn(p, &out);
    *pieces = std::move(out);
  };
}

absl::StatusOr<std::string> MetaspaceReplacement(const json& j) {
  MXMACA_ASSIGN_OR_RETURN(std::string r, StringField(j, "replacement", "\xE2\x96\x81"));
  return r;
}

// MetaspacePrependScheme: "always" | "first" | "never" (older files: add_prefix_space).
absl::StatusOr<std::string> MetaspacePrependScheme(const json& j) {
  if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
    std::string s = j["prepend_scheme"].get<std::string>();
    if (s != "always" && s != "first" && s != "never") {
      return Invalid(absl::StrCat("unknown Metaspace prepend_scheme \"", s, "\""), j);
    }
    return s;
  }
  return std::string(BoolField(j, "add_prefix_space", true) ? "always" : "never");
}

}  // namespace

std::string ByteLevelEncode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) AppendUtf8(kByteToCodePoint[c], &out);
  return out;
}

absl::StatusOr<NormalizeFn> ParseNormalizer(const json& j) {
  if (j.is_null()) return NormalizeFn([](std::string*) {});
  const std::string type = TypeOf(j);
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array())
      return Invalid("normalizer Sequence without \"normalizers\"", j);
    std::vector<NormalizeFn> parts;
    for (const json& n : j["normalizers"]) {
      MXMACA_ASSIGN_OR_RETURN(NormalizeFn f, ParseNormalizer(n));
      parts.push_back(std::move(f));
    }
    return NormalizeFn([parts](std::string* t) {
      for (const auto& f : parts) f(t);
    });
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* n = type == "NFC"    ? icu::Normalizer2::getNFCInstance(status)
                                : type == "NFD"  ? icu::Normalizer2::getNFDInstance(status)
                                : type == "NFKC" ? icu::Normalizer2::getNFKCInstance(status)
                                                 : icu::Normalizer2::getNFKDInstance(status);
    if (U_FAILURE(status) || n == nullptr) return Invalid("ICU has no normalizer for", j);
    return NormalizeFn([n](std::string* t) {
      UErrorCode st = U_ZERO_ERROR;
      icu::UnicodeString u = icu::UnicodeString::fromUTF8(*t);
      icu::UnicodeString out = n->normalize(u, st);
      if (U_FAILURE(st)) return;  // leave the text as it is
      t->clear();
      out.toUTF8String(*t);
    });
  }
  if (type == "Lowercase") {
    return NormalizeFn([](std::string* t) {
      icu::UnicodeString u = icu::UnicodeString::fromUTF8(*t);
      u.toLower();
      t->clear();
      u.toUTF8String(*t);
    });
  }
  if (type == "Prepend") {
    MXMACA_ASSIGN_OR_RETURN(std::string prefix, StringField(j, "prepend", nullptr));
    return NormalizeFn([prefix](std::string* t) {
      if (!t->empty()) t->insert(0, prefix);
    });
  }
  if (type == "Replace") {
    MXMACA_ASSIGN_OR_RETURN(Matcher m, ParsePattern(j));
    MXMACA_ASSIGN_OR_RETURN(std::string content, StringField(j, "content", nullptr));
    return NormalizeFn([m, content](std::string* t) {
      const auto found = m.FindAll(*t);
      if (found.empty()) return;
      std::string out;
      size_t prev = 0;
      for (const auto& [b, e] : found) {
        out.append(*t, prev, b - prev);
        out.append(content);
        prev = e;
      }
      out.append(*t, prev, std::string::npos);
      *t = std::move(out);
    });
  }
  return Invalid(absl::StrCat("unsupported normalizer \"", type, "\""), j);
}

absl::StatusOr<PreTokenizeFn> ParsePreTokenizer(const json& j) {
  if (j.is_null()) return PreTokenizeFn([](std::vector<Piece>*) {});
  const std::string type = TypeOf(j);
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      return Invalid("pre_tokenizer Sequence without \"pretokenizers\"", j);
    std::vector<PreTokenizeFn> parts;
    for (const json& p : j["pretokenizers"]) {
      MXMACA_ASSIGN_OR_RETURN(PreTokenizeFn f, ParsePreTokenizer(p));
      parts.push_back(std::move(f));
    }
    return PreTokenizeFn([parts](std::vector<Piece>* pieces) {
      for (const auto& f : parts) f(pieces);
    });
  }
  if (type == "ByteLevel") {
    const bool add_prefix_space = BoolField(j, "add_prefix_space", true);
    std::shared_ptr<Pcre2Regex> regex;
    if (BoolField(j, "use_regex", true)) {
      MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<Pcre2Regex> r, Pcre2Regex::Compile(kByteLevelPattern));
      regex = std::move(r);
    }
    return ForEachPiece([add_prefix_space, regex](const Piece& p, std::vector<Piece>* out) {
      Piece q = p;
      if (add_prefix_space && (q.text.empty() || q.text[0] != ' ')) q.text.insert(0, " ");
      std::vector<Piece> split;
      if (regex) {
        SplitPiece(q, regex->FindAll(q.text), false, Behavior::kIsolated, &split);
      } else if (!q.text.empty()) {
        split.push_back(std::move(q));
      }
      for (Piece& s : split) out->push_back(Piece{ByteLevelEncode(s.text), s.at_start});
    });
  }
  if (type == "Split") {
    MXMACA_ASSIGN_OR_RETURN(Matcher m, ParsePattern(j));
    MXMACA_ASSIGN_OR_RETURN(Behavior behavior, ParseBehavior(j));
    const bool invert = BoolField(j, "invert", false);
    return ForEachPiece([m, behavior, invert](const Piece& p, std::vector<Piece>* out) {
      SplitPiece(p, m.FindAll(p.text), invert, behavior, out);
    });
  }
  if (type == "Metaspace") {
    MXMACA_ASSIGN_OR_RETURN(std::string replacement, MetaspaceReplacement(j));
    MXMACA_ASSIGN_OR_RETURN(std::string scheme, MetaspacePrependScheme(j));
    const bool split = BoolField(j, "split", true);
    Matcher m;
    m.literal = replacement;
    return ForEachPiece([=](const Piece& p, std::vector<Piece>* out) {
      Piece q{absl::StrReplaceAll(p.text, {{" ", replacement}}), p.at_start};
      const bool prepend = scheme == "always" || (scheme == "first" && q.at_start);
      if (prepend && q.text.compare(0, replacement.size(), replacement) != 0) {
        q.text.insert(0, replacement);
      }
      if (split) {
        SplitPiece(q, m.FindAll(q.text), false, Behavior::kMergedWithNext, out);
      } else if (!q.text.empty()) {
        out->push_back(std::move(q));
      }
    });
  }
  if (type == "Digits") {
    const bool individual = BoolField(j, "individual_digits", false);
    MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<Pcre2Regex> r,
                            Pcre2Regex::Compile(individual ? "\\p{Nd}" : "\\p{Nd}+"));
    std::shared_ptr<Pcre2Regex> regex = std::move(r);
    return ForEachPiece([regex](const Piece& p, std::vector<Piece>* out) {
      SplitPiece(p, regex->FindAll(p.text), false, Behavior::kIsolated, out);
    });
  }
  return Invalid(absl::StrCat("unsupported pre_tokenizer \"", type, "\""), j);
}

absl::StatusOr<DecodeFn> ParseDecoder(const json& j) {
  if (j.is_null()) return DecodeFn([](std::vector<std::string>*) {});
  const std::string type = TypeOf(j);
  if (type == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array())
      return Invalid("decoder Sequence without \"decoders\"", j);
    std::vector<DecodeFn> parts;
    for (const json& d : j["decoders"]) {
      MXMACA_ASSIGN_OR_RETURN(DecodeFn f, ParseDecoder(d));
      parts.push_back(std::move(f));
    }
    return DecodeFn([parts](std::vector<std::string>* tokens) {
      for (const auto& f : parts) f(tokens);
    });
  }
  if (type == "ByteLevel") {
    // All tokens joined, each byte character mapped back to its byte; characters
    // outside the 256 keep their own UTF-8 (as the Rust decoder does).
    return DecodeFn([](std::vector<std::string>* tokens) {
      std::string out;
      for (const std::string& t : *tokens) {
        size_t i = 0;
        while (i < t.size()) {
          const size_t start = i;
          const uint32_t cp = NextCodePoint(t, &i);
          if (cp < static_cast<uint32_t>(kNumByteCodePoints) && kCodePointToByte[cp] >= 0) {
            out.push_back(static_cast<char>(kCodePointToByte[cp]));
          } else {
            out.append(t, start, i - start);
          }
        }
      }
      tokens->assign(1, std::move(out));
    });
  }
  if (type == "Replace") {
    MXMACA_ASSIGN_OR_RETURN(Matcher m, ParsePattern(j));
    MXMACA_ASSIGN_OR_RETURN(std::string content, StringField(j, "content", nullptr));
    if (m.regex) return Invalid("decoder Replace with a Regex pattern is not supported", j);
    const std::string literal = m.literal;
    return DecodeFn([literal, content](std::vector<std::string>* tokens) {
      for (std::string& t : *tokens) t = absl::StrReplaceAll(t, {{literal, content}});
    });
  }
  if (type == "ByteFallback") {
    // Runs of "<0xXX>" tokens become their bytes if those are valid UTF-8, else one
    // U+FFFD per byte.
    return DecodeFn([](std::vector<std::string>* tokens) {
      std::vector<std::string> out;
      std::string bytes;
      int run = 0;
      auto flush = [&] {
        if (run == 0) return;
        // NextCodePoint returns 0xDC80..0xDCFF for ill-formed bytes; encoded
        // surrogates are not valid UTF-8 either.
        bool valid = true;
        size_t i = 0;
        while (i < bytes.size()) {
          const uint32_t cp = NextCodePoint(bytes, &i);
          if (cp >= 0xD800 && cp <= 0xDFFF) valid = false;
        }
        if (valid) {
          out.push_back(bytes);
        } else {
          for (int k = 0; k < run; ++k) out.push_back("\xEF\xBF\xBD");
        }
        bytes.clear();
        run = 0;
      };
      for (std::string& t : *tokens) {
        auto hex = [](char c) {
          return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        };
        if (t.size() == 6 && t[0] == '<' && t[1] == '0' && t[2] == 'x' && t[5] == '>' &&
            hex(t[3]) >= 0 && hex(t[4]) >= 0) {
          bytes.push_back(static_cast<char>(hex(t[3]) * 16 + hex(t[4])));
          ++run;
        } else {
          flush();
          out.push_back(std::move(t));
        }
      }
      flush();
      *tokens = std::move(out);
    });
  }
  if (type == "Fuse") {
    return DecodeFn([](std::vector<std::string>* tokens) {
      std::string all;
      for (const std::string& t : *tokens) all += t;
      tokens->assign(1, std::move(all));
    });
  }
  if (type == "Strip") {
    MXMACA_ASSIGN_OR_RETURN(std::string content, StringField(j, "content", " "));
    const int start = j.value("start", 0);
    const int stop = j.value("stop", 0);
    return DecodeFn([content, start, stop](std::vector<std::string>* tokens) {
      for (std::string& t : *tokens) {
        size_t b = 0, e = t.size();
        for (int k = 0; k < start && e - b >= content.size() &&
                        t.compare(b, content.size(), content) == 0;
             ++k) {
          b += content.size();
        }
        for (int k = 0; k < stop && e - b >= content.size() &&
                        t.compare(e - content.size(), content.size(), content) == 0;
             ++k) {
          e -= content.size();
        }
        t = t.substr(b, e - b);
      }
    });
  }
  if (type == "Metaspace") {
    MXMACA_ASSIGN_OR_RETURN(std::string replacement, MetaspaceReplacement(j));
    MXMACA_ASSIGN_OR_RETURN(std::string scheme, MetaspacePrependScheme(j));
    return DecodeFn([replacement, scheme](std::vector<std::string>* tokens) {
      for (size_t i = 0; i < tokens->size(); ++i) {
        std::string& t = (*tokens)[i];
        t = absl::StrReplaceAll(t, {{replacement, " "}});
        if (i == 0 && scheme != "never" && !t.empty() && t[0] == ' ') t.erase(0, 1);
      }
    });
  }
  return Invalid(absl::StrCat("unsupported decoder \"", type, "\""), j);
}

}  // namespace mxmaca::data::internal
