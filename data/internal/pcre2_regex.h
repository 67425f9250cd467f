// data/internal/pcre2_regex.h: a compiled Unicode regex (PCRE2) that lists all
// non-overlapping matches, for the regex pre-tokenizers of HF tokenizer.json (Split,
// ByteLevel) and tiktoken.
//
// Source: PCRE2 10.42 (Debian libpcre2-dev), compiled with PCRE2_UTF | PCRE2_UCP (so
// \p{L}, \s, \w follow Unicode properties, as in Oniguruma, Rust's fancy-regex and
// Python's `regex`) and PCRE2_MATCH_INVALID_UTF (ill-formed UTF-8 bytes never match
// and never raise an error); JIT-compiled when the platform allows. Matching is
// leftmost, first-alternative, like those engines; possessive quantifiers (`?+`, `++`)
// and lookahead (`(?!\S)`) are supported.
#ifndef MXMACA_DATA_INTERNAL_PCRE2_REGEX_H_
#define MXMACA_DATA_INTERNAL_PCRE2_REGEX_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace mxmaca::data::internal {

// Pcre2Regex: immutable after Compile; FindAll is safe from many threads at once.
class Pcre2Regex {
 public:
  // Compile: compiles `pattern` (UTF-8). Error: InvalidArgument with PCRE2's message
  // and the offset in the pattern.
  static absl::StatusOr<std::unique_ptr<Pcre2Regex>> Compile(const std::string& pattern);

  ~Pcre2Regex();
  Pcre2Regex(const Pcre2Regex&) = delete;
  Pcre2Regex& operator=(const Pcre2Regex&) = delete;

  // FindAll: the [begin, end) byte ranges of all non-overlapping matches of the
  // pattern in `text`, left to right (an empty match advances by one character and
  // is not reported).
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view text) const;

 private:
  Pcre2Regex() = default;
  void* code_ = nullptr;  // pcre2_code_8*
};

}  // namespace mxmaca::data::internal

#endif  // MXMACA_DATA_INTERNAL_PCRE2_REGEX_H_
