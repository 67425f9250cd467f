// data/tokenizer_factory.cc: --tokenizer-type -> tokenizer.
#include "data/tokenizer_factory.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/gpt2_bpe_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tiktoken_tokenizer.h"

namespace mxmaca::data {

absl::Status CheckTokenizerFlags(const TokenizerSpec& spec) {
  const std::string& type = spec.tokenizer_type;
  auto needs = [&](const char* flag, const char* what) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tokenizer-type ", type, " needs ", flag, " (", what, ")"));
  };
  if (type == "GPT2BPETokenizer") {
    if (!spec.vocab_file.has_value() || !spec.merge_file.has_value()) {
      return needs("--vocab-file and --merge-file", "GPT-2's encoder.json and vocab.bpe");
    }
    return absl::OkStatus();
  }
  if (type == "HuggingFaceTokenizer") {
    if (!spec.tokenizer_model.has_value())
      return needs("--tokenizer-model", "a folder with tokenizer.json, or the tokenizer.json");
    return absl::OkStatus();
  }
  if (type == "SentencePieceTokenizer" || type == "GPTSentencePieceTokenizer" ||
      type == "Llama2Tokenizer") {
    if (!spec.tokenizer_model.has_value()) return needs("--tokenizer-model", "a SentencePiece .model");
    return absl::OkStatus();
  }
  if (type == "TikTokenizer") {
    if (!spec.tokenizer_model.has_value())
      return needs("--tokenizer-model", "a tiktoken vocab .json as Megatron reads it");
    if (!spec.tiktoken_pattern.has_value() ||
        (*spec.tiktoken_pattern != "v1" && *spec.tiktoken_pattern != "v2")) {
      return needs("--tiktoken-pattern v1 or v2", "Megatron's PATTERN_TIKTOKEN / _V2");
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("--tokenizer-type ", type,
                                                 " is not supported by MXMACA (supported: ",
                                                 kBuildableTokenizerTypes, ", NullTokenizer)"));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> BuildTokenizer(const TokenizerSpec& spec) {
  MXMACA_RETURN_IF_ERROR(CheckTokenizerFlags(spec));
  const std::string& type = spec.tokenizer_type;
  if (type == "GPT2BPETokenizer") {
    MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<Gpt2BpeTokenizer> t,
                            Gpt2BpeTokenizer::Load(*spec.vocab_file, *spec.merge_file));
    return std::unique_ptr<Tokenizer>(std::move(t));
  }
  if (type == "HuggingFaceTokenizer") {
    MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<HuggingFaceTokenizer> t, HuggingFaceTokenizer::Load(*spec.tokenizer_model,
                                                                  spec.legacy_tokenizer));
    return std::unique_ptr<Tokenizer>(std::move(t));
  }
  if (type == "TikTokenizer") {
    MXMACA_ASSIGN_OR_RETURN(
        std::unique_ptr<TikTokenizer> t,
        TikTokenizer::Load(*spec.tokenizer_model, *spec.tiktoken_pattern, spec.vocab_size,
                           spec.tiktoken_num_special_tokens, spec.tiktoken_special_tokens,
                           spec.legacy_tokenizer));
    return std::unique_ptr<Tokenizer>(std::move(t));
  }
  using Flavor = SentencePieceTokenizer::Flavor;
  const Flavor flavor = !spec.legacy_tokenizer                 ? Flavor::kGptSentencePiece
                        : type == "SentencePieceTokenizer"      ? Flavor::kSentencePiece
                        : type == "GPTSentencePieceTokenizer" ? Flavor::kGptSentencePiece
                                                              : Flavor::kLlama2;
  MXMACA_ASSIGN_OR_RETURN(
      std::unique_ptr<SentencePieceTokenizer> t,
      SentencePieceTokenizer::Load(*spec.tokenizer_model, flavor, spec.vocab_extra_ids));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace mxmaca::data
