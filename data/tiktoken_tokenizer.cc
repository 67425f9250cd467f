// data/tiktoken_tokenizer.cc: Megatron's CustomTikTokenizer.
#include "data/tiktoken_tokenizer.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/internal/read_file.h"

namespace mxmaca::data {

const char kTiktokenPatternV1[] =
    R"([^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
const char kTiktokenPatternV2[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

absl::StatusOr<std::unique_ptr<TikTokenizer>> TikTokenizer::Load(
    const std::string& path, const std::string& pattern, std::optional<int64_t> vocab_size,
    int64_t num_special_tokens, std::vector<std::string> special_tokens, bool legacy) {
  try {
    return LoadUnchecked(path, pattern, vocab_size, num_special_tokens, std::move(special_tokens),
                         legacy);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("--tokenizer-model (TikTokenizer vocab) '", path,
                                                   "' has a field of the wrong type: ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<TikTokenizer>> TikTokenizer::LoadUnchecked(
    const std::string& path, const std::string& pattern, std::optional<int64_t> vocab_size,
    int64_t num_special_tokens, std::vector<std::string> special_tokens, bool legacy) {
  auto invalid = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (pattern != "v1" && pattern != "v2") {
    return invalid("--tokenizer-type TikTokenizer needs --tiktoken-pattern v1 or v2, got '",
                   pattern, "'");
  }
  const int64_t n = vocab_size.value_or(int64_t{1} << 17);
  const std::vector<std::string> kDefault =
      legacy ? std::vector<std::string>{"<unk>", "<s>", "</s>"}
             : std::vector<std::string>{"<unk>", "<s>", "</s>", "<mask>", "<pad>", "<cls>", "<sep>"};
  if (special_tokens.empty()) special_tokens = kDefault;
  absl::flat_hash_set<std::string> unique(special_tokens.begin(), special_tokens.end());
  if (unique.size() != special_tokens.size()) {
    return invalid("--tiktoken-special-tokens must be unique");
  }
  if (!(static_cast<int64_t>(special_tokens.size()) <= num_special_tokens &&
        num_special_tokens < n)) {
    return invalid("TikTokenizer needs len(--tiktoken-special-tokens) (", special_tokens.size(),
                   ") <= --tiktoken-num-special-tokens (", num_special_tokens,
                   ") < --vocab-size (", n, ")");
  }
  for (const std::string& s : kDefault) {
    if (!unique.contains(s)) {
      return invalid("--tiktoken-special-tokens must include ",
                     legacy ? "<unk> <s> </s>" : "<unk> <s> </s> <mask> <pad> <cls> <sep>",
                     legacy ? " (--legacy-tokenizer)" : " (without --legacy-tokenizer)");
    }
  }
  if (n > std::numeric_limits<int32_t>::max()) return invalid("--vocab-size ", n, " too large");
  std::unique_ptr<TikTokenizer> t(new TikTokenizer());
  t->legacy_ = legacy;
  t->vocab_size_ = n;
  t->num_special_ = static_cast<int32_t>(num_special_tokens);
  t->specials_ = std::move(special_tokens);
  for (int64_t i = t->specials_.size(); i < num_special_tokens; ++i) {
    std::string filler = absl::StrCat("<SPECIAL_", i, ">");
    if (unique.contains(filler)) return invalid("special token ", filler, " given twice");
    t->specials_.push_back(std::move(filler));
  }
  for (int32_t i = 0; i < t->num_special_; ++i) {
    if (t->specials_[i] == "<unk>") t->unk_ = i;
    if (t->specials_[i] == "<s>") t->bos_ = i;
    if (t->specials_[i] == "</s>") t->eos_ = i;
  }
  for (size_t i = 0; i < t->specials_.size(); ++i) {
    if (t->specials_[i].empty()) return invalid("a special token is the empty string");
    t->specials_by_first_byte_[static_cast<unsigned char>(t->specials_[i][0])].push_back(i);
  }
  for (auto& bucket : t->specials_by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(), [&](int a, int b) {
      return t->specials_[a].size() > t->specials_[b].size();
    });
  }
  MXMACA_ASSIGN_OR_RETURN(t->regex_, internal::Pcre2Regex::Compile(
                                         pattern == "v1" ? kTiktokenPatternV1 : kTiktokenPatternV2));

  const std::string what = "--tokenizer-model (TikTokenizer vocab)";
  if (!absl::EndsWith(path, ".json")) {
    return invalid(what, " '", path,
                   "' must be a .json file: a list of {\"rank\", \"token_bytes\", \"token_str\"}");
  }
  MXMACA_ASSIGN_OR_RETURN(std::string text, internal::ReadWholeFile(path, what));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array()) {
    return invalid(what, " '", path,
                   "' is not a JSON list of {\"rank\", \"token_bytes\", \"token_str\"}");
  }
  const int64_t inner = n - num_special_tokens;
  if (static_cast<int64_t>(j.size()) < inner) {
    return invalid(what, " '", path, "' has ", j.size(), " tokens; --vocab-size (", n,
                   ") - --tiktoken-num-special-tokens (", num_special_tokens, ") = ", inner,
                   " are needed");
  }
  t->rank_bytes_.reserve(inner);
  for (int64_t i = 0; i < inner; ++i) {
    const nlohmann::json& x = j[i];
    if (!x.is_object() || x.size() != 3 || !x.contains("rank") || !x.contains("token_bytes") ||
        !x.contains("token_str") || !x["rank"].is_number_integer() ||
        !x["token_bytes"].is_string()) {
      return invalid(what, " '", path, "' entry ", i,
                     " is not {\"rank\": int, \"token_bytes\": base64, \"token_str\": str}");
    }
    if (x["rank"].get<int64_t>() != i) {
      return invalid(what, " '", path, "' entry ", i, " has rank ", x["rank"].get<int64_t>());
    }
    std::string bytes;
    if (!absl::Base64Unescape(x["token_bytes"].get<std::string>(), &bytes) || bytes.empty()) {
      return invalid(what, " '", path, "' entry ", i, ": token_bytes is not base64 of >= 1 byte");
    }
    if (i < 256 && bytes != std::string(1, static_cast<char>(i))) {
      return invalid(what, " '", path, "' entry ", i, " must be the single byte ", i);
    }
    if (!t->ranks_.emplace(bytes, static_cast<int32_t>(i)).second) {
      return invalid(what, " '", path, "' entry ", i, " repeats an earlier token");
    }
    t->rank_bytes_.push_back(std::move(bytes));
  }
  return t;
}

void TikTokenizer::BytePairEncode(std::string_view piece, std::vector<int32_t>* ids) const {
  auto rank_of = [&](size_t b, size_t e) {
    auto it = ranks_.find(absl::string_view(piece.data() + b, e - b));
    return it == ranks_.end() ? std::numeric_limits<int32_t>::max() : it->second;
  };
  // parts[k] = start of part k; parts.back() = piece.size().
  std::vector<size_t> parts(piece.size() + 1);
  for (size_t i = 0; i <= piece.size(); ++i) parts[i] = i;
  while (parts.size() > 2) {
    int32_t best = std::numeric_limits<int32_t>::max();
    size_t best_k = 0;
    for (size_t k = 0; k + 2 < parts.size(); ++k) {
      const int32_t r = rank_of(parts[k], parts[k + 2]);
      if (r < best) {
        best = r;
        best_k = k;
      }
    }
    if (best == std::numeric_limits<int32_t>::max()) break;
    parts.erase(parts.begin() + best_k + 1);
  }
  for (size_t k = 0; k + 1 < parts.size(); ++k) {
    ids->push_back(rank_of(parts[k], parts[k + 1]) + num_special_);  // every byte has a rank
  }
}

void TikTokenizer::EncodeAppend(std::string_view text, std::vector<int32_t>* ids) const {
  if (legacy_) {
    EncodeOrdinary(text, ids);
    return;
  }
  // allowed_special="all": split at each special token's text, earliest first.
  size_t start = 0;
  for (size_t pos = 0; pos < text.size(); ++pos) {
    for (int i : specials_by_first_byte_[static_cast<unsigned char>(text[pos])]) {
      const std::string& s = specials_[i];
      if (text.compare(pos, s.size(), s) == 0) {
        EncodeOrdinary(text.substr(start, pos - start), ids);
        ids->push_back(i);
        start = pos + s.size();
        pos = start - 1;
        break;
      }
    }
  }
  EncodeOrdinary(text.substr(start), ids);
}

void TikTokenizer::EncodeOrdinary(std::string_view text, std::vector<int32_t>* ids) const {
  auto encode = [&](std::string_view piece) {
    auto it = ranks_.find(absl::string_view(piece.data(), piece.size()));
    if (it != ranks_.end()) {
      ids->push_back(it->second + num_special_);
    } else {
      BytePairEncode(piece, ids);
    }
  };
  // On well-formed UTF-8 both patterns match every character; the bytes between
  // matches (ill-formed UTF-8 only, which tiktoken never sees) are encoded as pieces of
  // their own, so nothing is dropped.
  size_t prev = 0;
  for (const auto& [b, e] : regex_->FindAll(text)) {
    if (b > prev) encode(text.substr(prev, b - prev));
    encode(text.substr(b, e - b));
    prev = e;
  }
  if (prev < text.size()) encode(text.substr(prev));
}

absl::StatusOr<std::string> TikTokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id >= 0 && id < num_special_) {
      out += specials_[id];
    } else if (id >= num_special_ && id < vocab_size_) {
      out += rank_bytes_[id - num_special_];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("cannot decode token id ", id,
                                                     " at position ", i, ": outside [0, ",
                                                     vocab_size_, ")"));
    }
  }
  return out;
}

}  // namespace mxmaca::data
