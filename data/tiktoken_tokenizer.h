// data/tiktoken_tokenizer.h: Megatron-LM's `--tokenizer-type TikTokenizer
// --tokenizer-model <vocab.json> --tiktoken-pattern v1|v2 [--vocab-size N]
// [--tiktoken-num-special-tokens K] [--tiktoken-special-tokens ...]`.
//
// Source: Megatron-LM megatron/training/tokenizer/tokenizer.py (Megatron-Core 0.19)
// `CustomTikTokenizer`, `reload_mergeable_ranks`, PATTERN_TIKTOKEN (v1) and
// PATTERN_TIKTOKEN_V2; openai/tiktoken src/lib.rs `byte_pair_merge` (repeatedly merge
// the leftmost adjacent pair whose concatenation has the lowest rank).
// Two Megatron implementations, chosen by --legacy-tokenizer:
//   legacy (megatron/training/tokenizer/tokenizer.py `CustomTikTokenizer`): specials
//     default ["<unk>", "<s>", "</s>"] (a custom list must contain them); tokenize =
//     encode_ordinary: special-token text in the input is plain text.
//   default (megatron/core/tokenizers/text/libraries/tiktoken_tokenizer.py
//     `TikTokenTokenizer`, what pretrain_gpt.py and preprocess_data.py use without
//     --legacy-tokenizer): specials default ["<unk>", "<s>", "</s>", "<mask>", "<pad>",
//     "<cls>", "<sep>"] (a custom list must contain them); tokenize =
//     encode(text, allowed_special="all"): a special token's text in the input becomes
//     its id (the earliest occurrence first; the longest at one position).
// Layout (both): ids [0, K) are the special tokens — the list followed by
// "<SPECIAL_i>" fillers up to K — and ids [K, N) are the first N - K ranks of the vocab
// file shifted by K. N defaults to 2^17 = 131072. eod = id of "</s>"; vocab_size = N;
// decode maps special ids to their strings. File: a JSON list of {"rank": i, "token_bytes": base64, "token_str": s}
// with rank == position and ranks 0..255 the single bytes 0..255.
// Unlike tiktoken's decode (UTF-8 errors="replace"), Decode returns the raw bytes, and
// ill-formed UTF-8 input (which tiktoken, on Python str, never sees) is kept: the bytes
// no pattern alternative matches become pieces of their own, so Decode(Encode(b)) == b
// for every byte string b.
#ifndef MXMACA_DATA_TIKTOKEN_TOKENIZER_H_
#define MXMACA_DATA_TIKTOKEN_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/internal/pcre2_regex.h"
#include "data/tokenizer.h"

namespace mxmaca::data {

// kTiktokenPatternV1 / kTiktokenPatternV2: Megatron's PATTERN_TIKTOKEN(_V2), verbatim.
extern const char kTiktokenPatternV1[];
extern const char kTiktokenPatternV2[];

class TikTokenizer : public Tokenizer {
 public:
  // Load: reads the vocab file `path` and builds the layout above. `pattern` is "v1"
  // or "v2"; `vocab_size` N (nullopt: 131072); `num_special_tokens` K;
  // `special_tokens` (empty: the default list); `legacy` picks the implementation. Errors (InvalidArgument unless noted):
  // a pattern other than v1/v2; Megatron's asserts (unique special tokens, at most K
  // of them, K < N, the default three included); NotFound / PermissionDenied for the
  // file; a file not ending in .json, not JSON, not a list, an entry (index given)
  // without exactly rank/token_bytes/token_str, a rank that is not its index, bad
  // base64, ranks 0..255 not the single bytes, a repeated token, fewer than N - K
  // entries.
  static absl::StatusOr<std::unique_ptr<TikTokenizer>> Load(
      const std::string& path, const std::string& pattern, std::optional<int64_t> vocab_size,
      int64_t num_special_tokens, std::vector<std::string> special_tokens, bool legacy);

  void EncodeAppend(std::string_view text, std::vector<int32_t>* ids) const override;
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override;
  int32_t eod() const override { return eos_; }
  int64_t vocab_size() const override { return vocab_size_; }
  int32_t bos() const { return bos_; }
  int32_t unk() const { return unk_; }

 private:
  TikTokenizer() = default;
  static absl::StatusOr<std::unique_ptr<TikTokenizer>> LoadUnchecked(
      const std::string& path, const std::string& pattern, std::optional<int64_t> vocab_size,
      int64_t num_special_tokens, std::vector<std::string> special_tokens, bool legacy);
  // EncodeOrdinary: the ids of `text` with no special-token matching.
  void EncodeOrdinary(std::string_view text, std::vector<int32_t>* ids) const;
  // BytePairEncode: ranks (unshifted) of one pre-tokenized piece.
  void BytePairEncode(std::string_view piece, std::vector<int32_t>* ids) const;

  std::unique_ptr<internal::Pcre2Regex> regex_;
  absl::flat_hash_map<std::string, int32_t> ranks_;  // bytes -> rank
  std::vector<std::string> rank_bytes_;              // [N - K]
  std::vector<std::string> specials_;                // [K]
  int32_t num_special_ = 0;
  bool legacy_ = false;
  std::vector<int> specials_by_first_byte_[256];  // indices into specials_, longest first
  int32_t unk_ = -1, bos_ = -1, eos_ = -1;
  int64_t vocab_size_ = 0;
};

}  // namespace mxmaca::data

#endif  // MXMACA_DATA_TIKTOKEN_TOKENIZER_H_
