// data/internal/flat_json_object.h: a fast path for GPT-2's encoder.json (a flat JSON
// object of 50,257 string -> integer entries), which nlohmann/json takes about 50 ms to
// parse and walk -- a third of `mxmaca preprocess`'s wall time on KJV.
//
// It only recognizes the plain case and never reports errors: anything it does not
// handle exactly as nlohmann would (a byte-order mark, a non-integer or out-of-range
// value, an integer with more than 18 digits, a repeated key, a raw control character,
// ill-formed UTF-8, an invalid escape or lone surrogate, an empty object, trailing
// bytes) makes it return nullopt, and the caller parses with nlohmann as before, so
// results and error messages are unchanged.
#ifndef MXMACA_DATA_INTERNAL_FLAT_JSON_OBJECT_H_
#define MXMACA_DATA_INTERNAL_FLAT_JSON_OBJECT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mxmaca::data::internal {

// ParseFlatStringIntObject: the (decoded key, value) entries of `text` in file order
// when it is one non-empty JSON object whose values are all integers (|value| < 10^18)
// and whose keys are distinct; nullopt otherwise (see above). Keys are decoded to
// UTF-8 (\uXXXX escapes and surrogate pairs included).
std::optional<std::vector<std::pair<std::string, int64_t>>> ParseFlatStringIntObject(
    std::string_view text);

}  // namespace mxmaca::data::internal

#endif  // MXMACA_DATA_INTERNAL_FLAT_JSON_OBJECT_H_
