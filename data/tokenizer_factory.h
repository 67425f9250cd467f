// data/tokenizer_factory.h: builds the tokenizer that Megatron-LM's `build_tokenizer`
// would build for the same --tokenizer-type / --tokenizer-model / --vocab-file ... flags.
//
// Source: Megatron-LM megatron/training/tokenizer/tokenizer.py `build_tokenizer`
// (Megatron-Core 0.19).
#ifndef MXMACA_DATA_TOKENIZER_FACTORY_H_
#define MXMACA_DATA_TOKENIZER_FACTORY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/tokenizer.h"

namespace mxmaca::data {

// TokenizerSpec: Megatron's tokenizer flags (names as in its args).
struct TokenizerSpec {
  std::string tokenizer_type = "GPT2BPETokenizer";  // --tokenizer-type
  std::optional<std::string> vocab_file;            // --vocab-file (GPT2BPETokenizer)
  std::optional<std::string> merge_file;            // --merge-file (GPT2BPETokenizer)
  std::optional<std::string> tokenizer_model;       // --tokenizer-model
  std::optional<int64_t> vocab_size;                // --vocab-size (TikTokenizer)
  int64_t vocab_extra_ids = 0;                      // --vocab-extra-ids (SentencePieceTokenizer)
  std::optional<std::string> tiktoken_pattern;      // --tiktoken-pattern v1|v2
  int64_t tiktoken_num_special_tokens = 1000;       // --tiktoken-num-special-tokens
  std::vector<std::string> tiktoken_special_tokens;  // --tiktoken-special-tokens (empty: default)
  // --legacy-tokenizer: megatron/training/tokenizer/tokenizer.py's classes instead of
  // megatron/core/tokenizers' (Megatron's default). They differ for SentencePiece
  // (without the flag all three SentencePiece types are NeMo's wrapper: encode_as_ids,
  // eod = the model's eos, vocab = pieces — GPTSentencePieceTokenizer's semantics),
  // TikTokenizer (default special tokens, special-token text; data/tiktoken_tokenizer.h)
  // and HuggingFaceTokenizer (post-processor template and special tokens in decode;
  // data/hf_tokenizer.h); GPT2BPETokenizer is the same either way.
  bool legacy_tokenizer = false;
};

// kBuildableTokenizerTypes: the --tokenizer-type values BuildTokenizer accepts
// (NullTokenizer has no files and is handled by its callers).
inline constexpr const char* kBuildableTokenizerTypes =
    "GPT2BPETokenizer, HuggingFaceTokenizer, SentencePieceTokenizer, GPTSentencePieceTokenizer, "
    "Llama2Tokenizer, TikTokenizer";

// CheckTokenizerFlags: the flag checks Megatron's build_tokenizer asserts, without
// reading any file (for argument validation). Error: InvalidArgument naming the
// missing flag or the unsupported type.
absl::Status CheckTokenizerFlags(const TokenizerSpec& spec);

// BuildTokenizer: CheckTokenizerFlags, then loads the tokenizer's files (the class
// Megatron builds for the spec, see legacy_tokenizer). Errors: those
// of CheckTokenizerFlags and of the tokenizer's Load (each names the file and what was
// expected in it).
absl::StatusOr<std::unique_ptr<Tokenizer>> BuildTokenizer(const TokenizerSpec& spec);

}  // namespace mxmaca::data

#endif  // MXMACA_DATA_TOKENIZER_FACTORY_H_
