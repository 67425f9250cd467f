// data/tokenizer.h: the interface every text tokenizer implements (Megatron-LM's
// MegatronLegacyTokenizer: tokenize, detokenize, eod, vocab_size).
//
// Source: Megatron-LM megatron/training/tokenizer/tokenizer.py (Megatron-Core 0.19) and
// megatron/core/datasets/megatron_tokenizer.py. Implementations, named after the
// --tokenizer-type values they serve: Gpt2BpeTokenizer (GPT2BPETokenizer),
// HuggingFaceTokenizer, SentencePieceTokenizer (also GPTSentencePieceTokenizer and
// Llama2Tokenizer), TikTokenizer; BuildTokenizer (data/tokenizer_factory.h) picks one by
// --tokenizer-type.
#ifndef MXMACA_DATA_TOKENIZER_H_
#define MXMACA_DATA_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace mxmaca::data {

// Tokenizer: immutable after loading; EncodeAppend and Decode are const and safe to
// call from many threads at once.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // EncodeAppend: appends Megatron's `tokenize(text)` ids (each in [0, vocab_size()))
  // for `text` (UTF-8) to *ids. Whatever the Megatron tokenizer adds by itself (BOS
  // for Llama2Tokenizer, a HF post-processor's template) is added; eod is not.
  virtual void EncodeAppend(std::string_view text, std::vector<int32_t>* ids) const = 0;

  // Encode: EncodeAppend into a fresh vector.
  std::vector<int32_t> Encode(std::string_view text) const {
    std::vector<int32_t> ids;
    EncodeAppend(text, &ids);
    return ids;
  }

  // Decode: Megatron's `detokenize(ids)` as UTF-8 bytes. Error: InvalidArgument naming
  // the position and value of the first id the tokenizer cannot decode.
  virtual absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const = 0;

  // eod: Megatron's `eod` id (what --append-eod appends and what ends generation), or
  // -1 when the tokenizer has none (then preprocess --append-eod and train refuse it).
  virtual int32_t eod() const = 0;

  // vocab_size: Megatron's `tokenizer.vocab_size`, before padding to a multiple of
  // --make-vocab-size-divisible-by x TP.
  virtual int64_t vocab_size() const = 0;
};

}  // namespace mxmaca::data

#endif  // MXMACA_DATA_TOKENIZER_H_
