// data/tokenizer_factory.cc: --tokenizer-type -> tokenizer.
#include "data/tokenizer_factory.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/gpt2_bpe_tokenizer.h"
#include "data/hf_tokenizer.h"

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
    MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<HfTokenizer> t, HfTokenizer::Load(*spec.tokenizer_model));
    return std::unique_ptr<Tokenizer>(std::move(t));
  }
  return absl::InternalError("unreachable");
}

}  // namespace mxmaca::data
