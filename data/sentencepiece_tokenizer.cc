// data/sentencepiece_tokenizer.cc: Megatron's three SentencePiece tokenizers.
#include "data/sentencepiece_tokenizer.h"

#include <sys/stat.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mxmaca::data {

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Load(
    const std::string& model_file, Flavor flavor, int64_t vocab_extra_ids) {
  struct stat st;
  if (::stat(model_file.c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot open --tokenizer-model '", model_file, "' (a SentencePiece .model)"));
  }
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tokenizer-model '", model_file, "' is a folder; expected a SentencePiece .model file"));
  }
  if (vocab_extra_ids < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--vocab-extra-ids must be >= 0, got ", vocab_extra_ids));
  }
  std::string error;
  std::unique_ptr<internal::SpmProcessor> sp = internal::SpmProcessor::Load(model_file, &error);
  if (sp == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tokenizer-model '", model_file,
        "' is not a SentencePiece model (expected a serialized sentencepiece ModelProto, "
        "e.g. tokenizer.model): ",
        error));
  }
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer());
  t->flavor_ = flavor;
  const int n = sp->piece_size();
  auto piece_or = [&](int id, const char* fallback) {
    return id >= 0 && id < n ? sp->IdToPiece(id) : std::string(fallback);
  };
  if (flavor == Flavor::kSentencePiece) {
    absl::flat_hash_map<std::string, int32_t> vocab;
    for (int i = 0; i < n; ++i) vocab.emplace(sp->IdToPiece(i), i);  // first id wins
    int64_t next_id = n;
    auto add = [&](const std::string& token) {
      auto it = vocab.find(token);
      if (it == vocab.end()) it = vocab.emplace(token, static_cast<int32_t>(next_id++)).first;
      for (const auto& [s, id] : t->specials_)
        if (s == token) return it->second;
      t->specials_.emplace_back(token, it->second);
      t->special_by_id_[it->second] = token;
      return it->second;
    };
    add("<CLS>");
    add("<SEP>");
    t->eod_ = add("<EOD>");
    add("<MASK>");
    t->pad_ = add(piece_or(sp->pad_id(), "<PAD>"));
    t->bos_ = add(piece_or(sp->bos_id(), "<BOS>"));
    t->eos_ = add(piece_or(sp->eos_id(), "<EOS>"));
    for (int64_t i = 0; i < vocab_extra_ids; ++i) add(absl::StrCat("<extra_id_", i, ">"));
    t->vocab_size_ = next_id;
  } else {
    t->bos_ = sp->bos_id();
    t->eos_ = sp->eos_id();
    t->pad_ = sp->pad_id();
    t->eod_ = t->eos_;
    t->vocab_size_ = n;
    const char* name = flavor == Flavor::kLlama2 ? "Llama2Tokenizer" : "GPTSentencePieceTokenizer";
    if (flavor == Flavor::kLlama2 && (t->bos_ < 0 || t->bos_ >= n)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tokenizer-model '", model_file, "': ", name,
          " prepends the model's bos piece, but the model has none (bos_id ", t->bos_, ")"));
    }
    if (t->eos_ < 0 || t->eos_ >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tokenizer-model '", model_file, "': ", name,
                       " uses the model's eos piece as eod, but the model has none (eos_id ",
                       t->eos_, ")"));
    }
  }
  t->sp_ = std::move(sp);
  return t;
}

void SentencePieceTokenizer::EncodeAppend(std::string_view text, std::vector<int32_t>* ids) const {
  auto encode = [&](std::string_view s) {
    for (int id : sp_->Encode(s)) ids->push_back(id);
  };
  if (flavor_ == Flavor::kLlama2) ids->push_back(bos_);
  if (flavor_ != Flavor::kSentencePiece) {
    encode(text);
    return;
  }
  size_t idx = 0;
  while (true) {
    size_t best = std::string_view::npos;
    const std::pair<std::string, int32_t>* next = nullptr;
    for (const auto& special : specials_) {
      const size_t at = text.find(special.first, idx);
      if (at != std::string_view::npos && (best == std::string_view::npos || at < best)) {
        best = at;
        next = &special;
      }
    }
    if (next == nullptr) break;
    encode(text.substr(idx, best - idx));
    ids->push_back(next->second);
    idx = best + next->first.size();
  }
  encode(text.substr(idx));
}

absl::StatusOr<std::string> SentencePieceTokenizer::DecodePieces(absl::Span<const int32_t> ids,
                                                                 size_t offset) const {
  std::vector<int> pieces(ids.begin(), ids.end());
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i] < 0 || pieces[i] >= sp_->piece_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot decode token id ", pieces[i], " at position ", offset + i,
                       ": not a piece of the SentencePiece model (", sp_->piece_size(),
                       " pieces) nor a special token"));
    }
  }
  std::string text, error;
  if (!sp_->Decode(pieces, &text, &error)) {
    return absl::InvalidArgumentError(absl::StrCat("SentencePiece cannot decode ids: ", error));
  }
  return text;
}

absl::StatusOr<std::string> SentencePieceTokenizer::Decode(absl::Span<const int32_t> ids) const {
  if (flavor_ != Flavor::kSentencePiece) return DecodePieces(ids, 0);
  std::string text;
  size_t last = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = special_by_id_.find(ids[i]);
    if (it == special_by_id_.end()) continue;
    absl::StatusOr<std::string> run = DecodePieces(ids.subspan(last, i - last), last);
    if (!run.ok()) return run.status();
    absl::StrAppend(&text, *run, " ", it->second, " ");
    last = i + 1;
  }
  absl::StatusOr<std::string> run = DecodePieces(ids.subspan(last), last);
  if (!run.ok()) return run.status();
  text += *run;
  return text;
}

}  // namespace mxmaca::data
