// data/internal/pcre2_regex.cc: Pcre2Regex on PCRE2's 8-bit API.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/internal/pcre2_regex.h"

#include <pcre2.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mxmaca::data::internal {

absl::StatusOr<std::unique_ptr<Pcre2Regex>> Pcre2Regex::Compile(const std::string& pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code,
                                   &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return absl::InvalidArgumentError(absl::StrCat("regex /", pattern, "/ does not compile (PCRE2: ",
                                                   reinterpret_cast<const char*>(message),
                                                   " at offset ", error_offset, ")"));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
  std::unique_ptr<Pcre2Regex> regex(new Pcre2Regex());
  regex->code_ = code;
  return regex;
}

Pcre2Regex::~Pcre2Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::vector<std::pair<size_t, size_t>> Pcre2Regex::FindAll(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), start, 0, data, nullptr);
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH (or a resource limit: stop matching)
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    const size_t begin = ovector[0];
    const size_t end = ovector[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      start = end;
    } else {
      // Empty match: step over one UTF-8 character (or one ill-formed byte).
      size_t next = begin + 1;
      while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) ++next;
      start = next;
    }
  }
  pcre2_match_data_free(data);
  return matches;
}

}  // namespace mxmaca::data::internal
