// data/sentencepiece_tokenizer.h: Megatron-LM's SentencePiece tokenizers
// (`--tokenizer-type SentencePieceTokenizer | GPTSentencePieceTokenizer |
// Llama2Tokenizer --tokenizer-model <file.model>`), on Debian's libsentencepiece.
//
// Without --legacy-tokenizer Megatron builds NeMo's SentencePiece wrapper
// (megatron/core/tokenizers/text/libraries/sentencepiece_tokenizer.py, legacy=False) for
// all three types: that is Flavor::kGptSentencePiece (data/tokenizer_factory.cc picks it).
// With --legacy-tokenizer, megatron/training/tokenizer/tokenizer.py:
//   SentencePieceTokenizer (_SentencePieceTokenizer, from NeMo): the vocab is the
//     model's pieces, then the special tokens <CLS>, <SEP>, <EOD>, <MASK>, the pad /
//     bos / eos pieces (or <PAD>, <BOS>, <EOS> when the model has none) and
//     <extra_id_0..n-1> (--vocab-extra-ids), each appended with the next id unless it
//     is already a piece. tokenize splits the text at every occurrence of a special
//     token (the earliest; on a tie the one added first), encodes the gaps with
//     SentencePiece and emits the special tokens' ids; detokenize decodes the runs
//     between special tokens and joins them as `run + " " + special + " "`.
//     eod = <EOD>; vocab_size = pieces + added specials.
//   GPTSentencePieceTokenizer: tokenize = encode_as_ids, detokenize = decode_ids,
//     eod = the model's eos_id, vocab_size = pieces.
//   Llama2Tokenizer: tokenize = [bos_id] + encode(text), detokenize = decode_ids,
//     eod = eos_id, vocab_size = pieces.
// Decode of the special tokens' own ids (SentencePieceTokenizer only) follows the
// same rule; ids that SentencePiece cannot decode are an error.
#ifndef MXMACA_DATA_SENTENCEPIECE_TOKENIZER_H_
#define MXMACA_DATA_SENTENCEPIECE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/internal/spm_processor.h"
#include "data/tokenizer.h"

namespace mxmaca::data {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Flavor: which Megatron class to behave as.
  enum class Flavor { kSentencePiece, kGptSentencePiece, kLlama2 };

  // Load: reads the SentencePiece model `model_file`. Errors: NotFound (no such file),
  // InvalidArgument naming the file (not a SentencePiece model: SentencePiece's
  // message; Llama2Tokenizer on a model without a bos piece; GPTSentencePieceTokenizer /
  // Llama2Tokenizer on a model without an eos piece; vocab_extra_ids < 0).
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> Load(
      const std::string& model_file, Flavor flavor, int64_t vocab_extra_ids = 0);

  void EncodeAppend(std::string_view text, std::vector<int32_t>* ids) const override;
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override;
  int32_t eod() const override { return eod_; }
  int64_t vocab_size() const override { return vocab_size_; }

  // bos / eos / pad: Megatron's ids (SentencePieceTokenizer: of its special tokens).
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  int32_t pad() const { return pad_; }

 private:
  SentencePieceTokenizer() = default;
  absl::StatusOr<std::string> DecodePieces(absl::Span<const int32_t> ids, size_t offset) const;

  std::unique_ptr<internal::SpmProcessor> sp_;
  Flavor flavor_ = Flavor::kSentencePiece;
  // SentencePieceTokenizer's special tokens in the order they were added, with ids.
  std::vector<std::pair<std::string, int32_t>> specials_;
  absl::flat_hash_map<int32_t, std::string> special_by_id_;
  int32_t eod_ = -1, bos_ = -1, eos_ = -1, pad_ = -1;
  int64_t vocab_size_ = 0;
};

}  // namespace mxmaca::data

#endif  // MXMACA_DATA_SENTENCEPIECE_TOKENIZER_H_
