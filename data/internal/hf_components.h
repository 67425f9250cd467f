// data/internal/hf_components.h: the normalizers, pre-tokenizers and decoders of a
// Hugging Face tokenizer.json, parsed from its JSON and applied to UTF-8 strings.
//
// Source: huggingface/tokenizers (tokenizers/src/{normalizers,pre_tokenizers,decoders})
// — the JSON schema and the behaviour of each component; the reference in the tests
// is the independent JavaScript implementation @huggingface/tokenizers.
// Supported:
//   normalizer     null, Sequence, NFC, NFD, NFKC, NFKD (ICU), Prepend, Replace
//                  (String or Regex pattern), Lowercase
//   pre_tokenizer  null, Sequence, ByteLevel (add_prefix_space, use_regex), Split
//                  (String or Regex; behaviors Removed, Isolated, MergedWithPrevious,
//                  MergedWithNext, Contiguous; invert), Metaspace (replacement,
//                  prepend_scheme always|first|never, split), Digits
//   decoder        null, Sequence, ByteLevel, Replace (String), ByteFallback, Fuse,
//                  Strip, Metaspace
// Anything else is an InvalidArgument error naming the component.
#ifndef MXMACA_DATA_INTERNAL_HF_COMPONENTS_H_
#define MXMACA_DATA_INTERNAL_HF_COMPONENTS_H_

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mxmaca::data::internal {

// NormalizeFn: rewrites one text segment in place.
using NormalizeFn = std::function<void(std::string* text)>;

// Piece: a pre-tokenized piece; `at_start` is true for the piece that begins at
// offset 0 of the original input (Metaspace's prepend_scheme "first").
struct Piece {
  std::string text;
  bool at_start = false;
};

// PreTokenizeFn: splits/rewrites the pieces in place (a pre-tokenizer maps every
// piece to zero or more pieces, in order).
using PreTokenizeFn = std::function<void(std::vector<Piece>* pieces)>;

// DecodeFn: rewrites the list of token strings in place (HF's `decode_chain`); the
// decoded text is the concatenation of the final list.
using DecodeFn = std::function<void(std::vector<std::string>* tokens)>;

// ParseNormalizer / ParsePreTokenizer / ParseDecoder: the component described by `j`
// (a JSON object with "type", or null for none). Error: InvalidArgument naming the
// unsupported type or the malformed field.
absl::StatusOr<NormalizeFn> ParseNormalizer(const nlohmann::json& j);
absl::StatusOr<PreTokenizeFn> ParsePreTokenizer(const nlohmann::json& j);
absl::StatusOr<DecodeFn> ParseDecoder(const nlohmann::json& j);

// ByteLevelEncode: `bytes` spelled in GPT-2's byte characters (data/internal/byte_level.h).
std::string ByteLevelEncode(std::string_view bytes);

}  // namespace mxmaca::data::internal

#endif  // MXMACA_DATA_INTERNAL_HF_COMPONENTS_H_
