// data/json_line_parser.h: a single-pass JSON validator that extracts the values of
// chosen top-level keys of an object, for the JSONL input of `preprocess`.
//
// It accepts exactly what Python's json.loads (C scanner, strict=True) accepts, which
// is what Megatron's preprocess_data.py runs on every line: RFC 8259 JSON plus the
// literals NaN, Infinity and -Infinity and numbers of any size; strings must be valid
// UTF-8 with no raw control characters. Two restrictions, both where Megatron would
// fail later anyway or Python itself gives up: a \u escape of a lone surrogate is an
// error (Megatron's tokenizer cannot encode it), and nesting deeper than
// kMaxJsonDepth is an error (Python raises RecursionError near 1000 levels). One
// leniency: Python 3.11 rejects integers of more than 4300 digits
// (sys.int_info.default_max_str_digits); numbers are only validated here, so any length
// passes.
//
// Only the values of the requested keys are decoded; everything else is validated and
// skipped, so a line costs one pass over its bytes (strings are copied in runs, not
// byte by byte). nlohmann/json stays the reference in tests (jsonl_reader.h,
// ParseJsonlLineReference).
#ifndef MXMACA_DATA_JSON_LINE_PARSER_H_
#define MXMACA_DATA_JSON_LINE_PARSER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace mxmaca::data {

// kMaxJsonDepth: the deepest nesting of arrays/objects accepted (the top-level object
// is depth 1).
inline constexpr int kMaxJsonDepth = 900;

// JsonField: what one requested top-level key holds.
struct JsonField {
  bool present = false;
  // The value's JSON type, as nlohmann's type_name(): "string", "array", "object",
  // "number", "boolean" or "null".
  const char* type = "";
  // The decoded string (type "string"), or the array's string elements in order (type
  // "array"; non-string elements are not stored).
  std::vector<std::string> strings;
  // For an array: index of its first element that is not a string (-1 if none), and
  // that element's type.
  int64_t first_non_string = -1;
  const char* non_string_type = "";
};

// ParseJsonObjectFields: validates `text` as one JSON value and, if it is an object,
// fills (*fields)[k] (resized to keys.size()) for each top-level `keys[k]` (a repeated
// key: the last occurrence wins, as in Python). Errors (InvalidArgument):
// "invalid JSON at byte B: REASON" (B = 0-based offset in `text`), or "expected a JSON
// object, got TYPE" for a valid non-object value.
absl::Status ParseJsonObjectFields(std::string_view text, const std::vector<std::string>& keys,
                                   std::vector<JsonField>* fields);

}  // namespace mxmaca::data

#endif  // MXMACA_DATA_JSON_LINE_PARSER_H_
