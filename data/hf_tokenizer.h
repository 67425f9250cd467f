// data/hf_tokenizer.h: Megatron-LM's `--tokenizer-type HuggingFaceTokenizer
// --tokenizer-model <dir or tokenizer.json>`, read from a Hugging Face tokenizer.json
// without Python or the Rust `tokenizers` library.
//
// Source: Megatron-LM megatron/training/tokenizer/tokenizer.py `_HuggingFaceTokenizer`
// (--legacy-tokenizer) and megatron/core/tokenizers/text/libraries/huggingface_tokenizer.py
// (the default; the two differ in the template and decode, see Load); eod =
// `eos_token_id`; vocab_size = `len(tokenizer)`; huggingface/tokenizers for the file format and
// the pipeline: added tokens are split off first (leftmost-longest, with their
// lstrip/rstrip), each remaining segment is normalized, pre-tokenized and encoded by
// the model, then the post-processor adds its template.
//
// Supported: model "BPE" (vocab, merges as "a b" strings or [a, b] pairs, unk_token,
// fuse_unk, byte_fallback, ignore_merges) — the byte-level BPE of GPT-2, Llama-3,
// Qwen, Mistral-Nemo, and the SentencePiece-style BPE of Llama-2/Mistral (Metaspace or
// Prepend/Replace normalizers, byte fallback); the normalizers, pre-tokenizers and
// decoders listed in data/internal/hf_components.h; post-processors TemplateProcessing
// (single sequence), ByteLevel, RobertaProcessing, BertProcessing, Sequence.
// Not supported (InvalidArgument at Load): other models (WordPiece, Unigram,
// WordLevel), continuing_subword_prefix / end_of_word_suffix. Ignored: BPE dropout,
// added tokens' single_word, the normalized flag (every added token is matched on
// the raw text).
//
// eod is the id of tokenizer_config.json's (else special_tokens_map.json's)
// "eos_token", read from the folder holding tokenizer.json; -1 if neither names one.
// Decode applies `clean_up_tokenization_spaces` only when tokenizer_config.json sets it
// to true. Unicode classes in Split regexes are PCRE2's (Unicode 14), not Oniguruma's.
#ifndef MXMACA_DATA_HF_TOKENIZER_H_
#define MXMACA_DATA_HF_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/internal/bpe_merges.h"
#include "data/internal/hf_components.h"
#include "data/tokenizer.h"

namespace mxmaca::data {

// HuggingFaceTokenizer: immutable after Load; EncodeAppend and Decode are const and safe to call
// from many threads at once.
class HuggingFaceTokenizer : public Tokenizer {
 public:
  // Load: `path` is a folder with tokenizer.json (and optionally tokenizer_config.json,
  // special_tokens_map.json) or the tokenizer.json file itself. Errors, each naming the
  // file: NotFound / PermissionDenied (cannot open); InvalidArgument: not JSON, no
  // "model", an unsupported model or component (named), a vocab that is not an object
  // of token -> id, a merge (index given) whose tokens or merged token are not in the
  // vocab, an added token without id/content, an eos_token not in the vocabulary.
  //
  // `legacy` (--legacy-tokenizer) picks Megatron's tokenizer.py `_HuggingFaceTokenizer`:
  // tokenize = `tokenizer(text).input_ids` (with the post-processor's template, e.g.
  // Llama-3's <|begin_of_text|>), detokenize = `decode(ids)` keeping special tokens.
  // Without it (Megatron's default, megatron/core/tokenizers HuggingFaceTokenizer with
  // include_special_tokens False): tokenize = convert_tokens_to_ids(tokenize(text)), no
  // template; detokenize drops the special tokens (added tokens marked "special", and
  // the config's bos/eos/unk/pad tokens) before decoding.
  static absl::StatusOr<std::unique_ptr<HuggingFaceTokenizer>> Load(const std::string& path,
                                                                    bool legacy = true);

  void EncodeAppend(std::string_view text, std::vector<int32_t>* ids) const override;
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override;
  int32_t eod() const override { return eod_; }
  // vocab_size: the largest id of the vocab and added tokens, plus one (= HF's
  // `len(tokenizer)` for the dense id ranges real tokenizers use).
  int64_t vocab_size() const override { return vocab_size_; }

  // TokenId: the id of `token` (added tokens first, then the model vocab), or -1.
  int32_t TokenId(std::string_view token) const;

 private:
  HuggingFaceTokenizer() = default;
  static absl::StatusOr<std::unique_ptr<HuggingFaceTokenizer>> LoadUnchecked(
      const std::string& path, bool legacy);
  struct AddedToken {
    std::string content;
    int32_t id;
    bool lstrip;
    bool rstrip;
    bool special;
  };
  absl::Status ParseModel(const nlohmann::json& model, const std::string& file);
  // EncodeSegment: normalize, pre-tokenize, BPE one text segment.
  void EncodeSegment(std::string text, bool at_start, std::vector<int32_t>* ids) const;
  // EncodeWord: BPE of one pre-tokenized word, through the calling thread's word cache
  // (thread_local, for the tokenizer it used last; bounded as Gpt2BpeTokenizer's).
  void EncodeWord(std::string_view word, std::vector<int32_t>* ids) const;
  void EncodeWordUncached(std::string_view word, std::vector<int32_t>* ids) const;

  absl::flat_hash_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;  // [vocab_size_]; "" for unused ids
  std::vector<bool> id_known_;
  internal::BpeMerges merges_;
  std::vector<AddedToken> added_;  // sorted by content length, longest first
  std::vector<int> added_by_first_byte_[256];  // indices into added_, longest first
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  int32_t byte_fallback_ids_[256];
  internal::NormalizeFn normalizer_;
  internal::PreTokenizeFn pre_tokenizer_;
  internal::DecodeFn decoder_;
  std::vector<int32_t> prefix_ids_;  // the post-processor's template before / after
  std::vector<int32_t> suffix_ids_;  // the sequence
  bool clean_up_spaces_ = false;
  bool legacy_ = true;
  std::vector<bool> special_;  // [vocab_size_]: dropped by Decode when !legacy_
  int32_t eod_ = -1;
  int64_t vocab_size_ = 0;
  // Distinguishes tokenizers in the per-thread word caches (addresses can be reused).
  uint64_t instance_id_ = 0;
};

}  // namespace mxmaca::data

#endif  // MXMACA_DATA_HF_TOKENIZER_H_
