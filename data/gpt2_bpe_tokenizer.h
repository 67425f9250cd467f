// data/gpt2_bpe_tokenizer.h: GPT-2's byte-level BPE tokenizer (Megatron-LM's
// `--tokenizer-type GPT2BPETokenizer`).
//
// Sources: openai/gpt-2 src/encoder.py; Megatron-LM
// megatron/training/tokenizer/gpt2_tokenization.py and tokenizer.py
// (_GPT2BPETokenizer). Files: `--vocab-file` is GPT-2's encoder.json (token ->
// id, 50,257 entries), `--merge-file` is vocab.bpe ("#version: 0.2" then 50,000
// merges, one "left right" pair per line, in rank order).
//
// Encoding equals GPT-2's for every valid UTF-8 string: the same pre-tokenizer
// regex (hand-written, Unicode tables of Python's `regex` module, see
// internal/pretokenizer.h), the same byte -> character map and the same merge
// order. The reference is Python `regex` 2022.10.31 (Unicode 15.0), as used by
// encoder.py and Megatron. JavaScript ports (gpt-3-encoder's Encoder.js on node 20,
// Unicode 17.0) differ on 9,663 code points: letters/numbers assigned after 15.0,
// and JavaScript's \s (has U+FEFF, lacks U+0085); on text without those code
// points all three agree (//data:gpt2_bpe_tokenizer_parity_test).
//
// As in Megatron, "<|endoftext|>" inside text is ordinary text (it encodes to
// several tokens); documents are terminated by appending eod() explicitly.
//
// Bytes that are not well-formed UTF-8 (which GPT-2, working on Python str, never
// sees) are encoded as single "punctuation-like" characters (class
// [^\s\p{L}\p{N}]) whose bytes are byte-level tokens like any other; nothing is
// dropped or replaced, so Decode(Encode(b)) == b for every byte string b.
#ifndef MXMACA_DATA_GPT2_BPE_TOKENIZER_H_
#define MXMACA_DATA_GPT2_BPE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/internal/bpe_merges.h"
#include "data/tokenizer.h"

namespace mxmaca::data {

// Gpt2BpeTokenizer: immutable after Load(); Encode and Decode are const and safe to
// call from many threads at once. Each thread keeps its own word -> ids cache
// (thread_local, for the tokenizer it used last; words over 256 bytes are not
// cached; emptied past 2^18 words or 2^22 ids, i.e. at most a few tens of MB).
class Gpt2BpeTokenizer : public Tokenizer {
 public:
  // Load: reads `vocab_file` (encoder.json) and `merge_file` (vocab.bpe).
  // Errors (InvalidArgument unless noted, each naming the file):
  //   - NotFound / PermissionDenied / InvalidArgument: a file cannot be opened or read;
  //   - vocab: not valid JSON; not an object of string -> integer; ids not exactly
  //     0..n-1 each once; a token using a character outside GPT-2's 256 byte
  //     characters; one of the 256 single-byte tokens or "<|endoftext|>" missing;
  //   - merges: no "#version" header line; a line (number given, 1-based) that is
  //     not two space-separated tokens; a token or the merged token not in the
  //     vocab; a repeated pair.
  // As in GPT-2/Megatron (`read().split('\n')[1:-1]`), the first line is the header
  // and text after the last newline is ignored.
  static absl::StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> Load(const std::string& vocab_file,
                                                                const std::string& merge_file);

  Gpt2BpeTokenizer(const Gpt2BpeTokenizer&) = delete;
  Gpt2BpeTokenizer& operator=(const Gpt2BpeTokenizer&) = delete;
  ~Gpt2BpeTokenizer() override;

  // Encode: the token ids [num_tokens] (each in [0, vocab_size())) of `text`
  // (UTF-8; ill-formed bytes allowed, see the file comment). No eod is added.
  std::vector<int32_t> Encode(std::string_view text) const;

  // EncodeAppend: as Encode, appending to *ids (saves a copy per document).
  void EncodeAppend(std::string_view text, std::vector<int32_t>* ids) const override;

  // Decode: the bytes that `ids` stand for, concatenated. Unlike Megatron's
  // detokenize (bytes.decode('utf-8', errors='replace')) the raw bytes are returned,
  // so ill-formed UTF-8 is not replaced by U+FFFD. Error: InvalidArgument naming
  // the position and value of the first id outside [0, vocab_size()).
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override;

  // eod: the id of "<|endoftext|>" (50256 for GPT-2), Megatron's `eod`.
  int32_t eod() const override { return eod_; }

  // vocab_size: number of tokens in the vocab file (50257 for GPT-2), before
  // Megatron's padding to a multiple of make_vocab_size_divisible_by * TP.
  int64_t vocab_size() const override {
    return static_cast<int64_t>(token_offsets_.size()) - 1;
  }

 private:
  Gpt2BpeTokenizer() = default;

  // WordCache: the calling thread's word -> ids cache (defined in the .cc).
  struct WordCache;

  // EncodeWord: appends the ids of one pre-tokenized word, via `cache`.
  void EncodeWord(std::string_view word, WordCache& cache, std::vector<int32_t>* ids) const;

  // byte_token_[b]: id of the single-byte token for byte b.
  int32_t byte_token_[256] = {};
  internal::BpeMerges merges_;
  // Token i's bytes are token_bytes_[token_offsets_[i], token_offsets_[i + 1]).
  std::string token_bytes_;
  std::vector<int64_t> token_offsets_;
  int32_t eod_ = -1;
  // Distinguishes tokenizers in the per-thread caches (addresses can be reused).
  uint64_t instance_id_ = 0;
};

}  // namespace mxmaca::data

#endif  // MXMACA_DATA_GPT2_BPE_TOKENIZER_H_
