// data/gpt2_bpe_tokenizer.cc: loading encoder.json / vocab.bpe, encode, decode.
#include "data/gpt2_bpe_tokenizer.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "data/internal/byte_level.h"
#include "data/internal/flat_json_object.h"
#include "data/internal/pretokenizer.h"
#include "data/internal/read_file.h"
#include "data/internal/unicode_classes.h"
#include "data/internal/utf8.h"

namespace mxmaca::data {
namespace {

constexpr char kEndOfText[] = "<|endoftext|>";
// Words longer than this are encoded without the cache (keeps the cache's memory
// bounded on pathological input such as megabytes without a space).
constexpr size_t kMaxCachedWordBytes = 256;
// The per-thread cache is emptied when it holds more words or ids than this.
constexpr size_t kMaxCachedWords = size_t{1} << 18;
constexpr size_t kMaxCachedIds = size_t{1} << 22;


// ByteLevelToBytes: the raw bytes spelled by a token in GPT-2's byte characters
// (UTF-8), or false if a character is not one of the 256.
bool ByteLevelToBytes(std::string_view token, std::string* bytes) {
  bytes->clear();
  const auto* p = reinterpret_cast<const unsigned char*>(token.data());
  const auto* end = p + token.size();
  while (p < end) {
    const internal::Utf8Char c = internal::DecodeUtf8Char(p, end);
    if (!c.valid || c.code_point >= internal::kNumByteCodePoints ||
        internal::kCodePointToByte[c.code_point] < 0) {
      return false;
    }
    bytes->push_back(static_cast<char>(internal::kCodePointToByte[c.code_point]));
    p += c.length;
  }
  return true;
}

std::string Quote(absl::string_view s) {
  constexpr size_t kMaxShown = 60;
  if (s.size() > kMaxShown) return absl::StrCat("'", s.substr(0, kMaxShown), "...'");
  return absl::StrCat("'", s, "'");
}

std::atomic<uint64_t> next_instance_id{1};

}  // namespace

// Per-thread word -> ids cache. It belongs to one tokenizer at a time (owner);
// using another tokenizer on the same thread empties it.
struct Gpt2BpeTokenizer::WordCache {
  uint64_t owner = 0;
  // word bytes -> (offset, count) in ids.
  absl::flat_hash_map<std::string, std::pair<uint32_t, uint32_t>> index;
  std::vector<int32_t> ids;
  std::vector<int32_t> scratch;

  void Reset(uint64_t new_owner) {
    owner = new_owner;
    index.clear();
    ids.clear();
  }

  static WordCache& ForThisThread() {
    thread_local WordCache cache;
    return cache;
  }
};

Gpt2BpeTokenizer::~Gpt2BpeTokenizer() = default;

absl::StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> Gpt2BpeTokenizer::Load(
    const std::string& vocab_file, const std::string& merge_file) {
  std::unique_ptr<Gpt2BpeTokenizer> tok(new Gpt2BpeTokenizer());
  tok->instance_id_ = next_instance_id.fetch_add(1);

  // --- vocab (encoder.json) ---
  MXMACA_ASSIGN_OR_RETURN(const std::string vocab_text, internal::ReadWholeFile(vocab_file, "vocab file"));
  int64_t n = 0;
  std::vector<std::string> token_text;              // [id]: byte-level spelling
  absl::flat_hash_map<std::string, int32_t> id_of;  // byte-level spelling -> id
  // Fast path for a plain encoder.json; anything else (and every error) goes through
  // nlohmann below, exactly as before.
  if (auto entries = internal::ParseFlatStringIntObject(vocab_text)) {
    n = static_cast<int64_t>(entries->size());
    token_text.assign(static_cast<size_t>(n), std::string());
    std::vector<bool> seen(static_cast<size_t>(n), false);
    bool ok = true;
    for (const auto& [key, id] : *entries) {
      if (id < 0 || id >= n || seen[id]) {
        ok = false;
        break;
      }
      seen[id] = true;
      token_text[id] = key;
    }
    if (ok) {
      id_of.reserve(static_cast<size_t>(n));
      for (auto& [key, id] : *entries) id_of.emplace(std::move(key), static_cast<int32_t>(id));
    } else {
      n = 0;
    }
  }
  if (n == 0) {
    nlohmann::json vocab;
    try {
      vocab = nlohmann::json::parse(vocab_text);
    } catch (const nlohmann::json::parse_error& e) {
      return absl::InvalidArgumentError(absl::StrCat(
          "vocab file '", vocab_file, "' is not valid JSON (byte ", e.byte, "): ", e.what()));
    }
    if (!vocab.is_object() || vocab.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "vocab file '", vocab_file,
          "': expected a non-empty JSON object mapping tokens to ids (GPT-2 encoder.json)"));
    }
    n = static_cast<int64_t>(vocab.size());
    token_text.assign(static_cast<size_t>(n), std::string());
    std::vector<bool> seen(static_cast<size_t>(n), false);
    id_of.clear();
    id_of.reserve(static_cast<size_t>(n));
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      const std::string& key = it.key();
      if (!it.value().is_number_integer()) {
        return absl::InvalidArgumentError(absl::StrCat("vocab file '", vocab_file, "': token ",
                                                       Quote(key), " has value ", it.value().dump(),
                                                       ", expected an integer id"));
      }
      const int64_t id = it.value().get<int64_t>();
      if (id < 0 || id >= n || seen[id]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "vocab file '", vocab_file, "': token ", Quote(key), " has id ", id,
            id < 0 || id >= n ? absl::StrCat(", expected ids 0..", n - 1, " (one per token)")
                              : std::string(", which another token already has")));
      }
      seen[id] = true;
      token_text[id] = key;
      id_of.emplace(key, static_cast<int32_t>(id));
    }
  }
  tok->token_offsets_.reserve(static_cast<size_t>(n) + 1);
  tok->token_offsets_.push_back(0);
  std::string bytes;
  for (int64_t id = 0; id < n; ++id) {
    if (!ByteLevelToBytes(token_text[id], &bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "vocab file '", vocab_file, "': token ", Quote(token_text[id]), " (id ", id,
          ") contains a character outside GPT-2's 256 byte characters (bytes_to_unicode)"));
    }
    tok->token_bytes_ += bytes;
    tok->token_offsets_.push_back(static_cast<int64_t>(tok->token_bytes_.size()));
  }
  for (int b = 0; b < 256; ++b) {
    std::string spelling;
    internal::AppendUtf8(internal::kByteToCodePoint[b], &spelling);
    auto it = id_of.find(spelling);
    if (it == id_of.end()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("vocab file '%s': no token for the single byte 0x%02X (spelled '%s')",
                          vocab_file, b, spelling));
    }
    tok->byte_token_[b] = it->second;
  }
  auto eod = id_of.find(kEndOfText);
  if (eod == id_of.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab file '", vocab_file, "': no token '", kEndOfText, "'"));
  }
  tok->eod_ = eod->second;

  // --- merges (vocab.bpe) ---
  MXMACA_ASSIGN_OR_RETURN(const std::string merge_text, internal::ReadWholeFile(merge_file, "merge file"));
  std::vector<absl::string_view> lines = absl::StrSplit(merge_text, '\n');
  // Python: read().split('\n')[1:-1]: line 1 is the header; the piece after the
  // last '\n' (empty for a file that ends in a newline) is dropped.
  if (lines.size() < 2 || !absl::StartsWith(lines[0], "#version")) {
    return absl::InvalidArgumentError(absl::StrCat("merge file '", merge_file,
                                                   "' line 1: expected a '#version: ...' header "
                                                   "line (GPT-2 vocab.bpe), got ",
                                                   Quote(lines[0])));
  }
  std::string merged;  // reused: the two tokens concatenated
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    const size_t line_number = i + 1;
    // The fields separated by runs of " \t\r\f\v" (at most 3 kept: more is an error).
    absl::string_view parts[3];
    size_t num_parts = 0;
    const absl::string_view line = lines[i];
    for (size_t pos = 0; pos < line.size();) {
      const size_t start = line.find_first_not_of(" \t\r\f\v", pos);
      if (start == absl::string_view::npos) break;
      size_t stop = line.find_first_of(" \t\r\f\v", start);
      if (stop == absl::string_view::npos) stop = line.size();
      if (num_parts < 3) parts[num_parts] = line.substr(start, stop - start);
      ++num_parts;
      pos = stop;
    }
    if (num_parts == 0) continue;  // blank line: Python's () never matches a pair
    if (num_parts != 2) {
      return absl::InvalidArgumentError(absl::StrCat("merge file '", merge_file, "' line ",
                                                     line_number,
                                                     ": expected two tokens "
                                                     "separated by a space, got ",
                                                     Quote(lines[i])));
    }
    int32_t ids[3];
    merged.assign(parts[0].data(), parts[0].size());
    merged.append(parts[1].data(), parts[1].size());
    const absl::string_view names[3] = {parts[0], parts[1], merged};
    for (int k = 0; k < 3; ++k) {
      auto it = id_of.find(names[k]);
      if (it == id_of.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("merge file '", merge_file, "' line ", line_number, ": ",
                         k < 2 ? "token " : "merged token ", Quote(names[k]),
                         " is not in the vocab file '", vocab_file, "'"));
      }
      ids[k] = it->second;
    }
    if (!tok->merges_.Add(ids[0], ids[1], ids[2])) {
      return absl::InvalidArgumentError(absl::StrCat("merge file '", merge_file, "' line ",
                                                     line_number, ": the pair ", Quote(lines[i]),
                                                     " appears twice"));
    }
  }
  return tok;
}

void Gpt2BpeTokenizer::EncodeWord(std::string_view word, WordCache& cache,
                                  std::vector<int32_t>* ids) const {
  if (word.size() == 1) {
    ids->push_back(byte_token_[static_cast<unsigned char>(word[0])]);
    return;
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    auto it = cache.index.find(absl::string_view(word.data(), word.size()));
    if (it != cache.index.end()) {
      const int32_t* first = cache.ids.data() + it->second.first;
      ids->insert(ids->end(), first, first + it->second.second);
      return;
    }
  }
  std::vector<int32_t>& symbols = cache.scratch;
  symbols.clear();
  for (char c : word) symbols.push_back(byte_token_[static_cast<unsigned char>(c)]);
  merges_.Apply(&symbols);
  ids->insert(ids->end(), symbols.begin(), symbols.end());
  if (!cacheable) return;
  if (cache.index.size() >= kMaxCachedWords || cache.ids.size() >= kMaxCachedIds) {
    cache.Reset(instance_id_);
  }
  cache.index.emplace(std::string(word), std::make_pair(static_cast<uint32_t>(cache.ids.size()),
                                                        static_cast<uint32_t>(symbols.size())));
  cache.ids.insert(cache.ids.end(), symbols.begin(), symbols.end());
}

void Gpt2BpeTokenizer::EncodeAppend(std::string_view text, std::vector<int32_t>* ids) const {
  WordCache& cache = WordCache::ForThisThread();
  if (cache.owner != instance_id_) cache.Reset(instance_id_);
  internal::Gpt2WordSplitter splitter(text);
  for (std::string_view word; splitter.Next(&word);) EncodeWord(word, cache, ids);
}

std::vector<int32_t> Gpt2BpeTokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 4 + 16);
  EncodeAppend(text, &ids);
  return ids;
}

absl::StatusOr<std::string> Gpt2BpeTokenizer::Decode(absl::Span<const int32_t> ids) const {
  const int64_t n = vocab_size();
  size_t total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n) {
      return absl::InvalidArgumentError(absl::StrCat("Decode: token id ", ids[i], " at position ",
                                                     i, " is outside [0, ", n, ")"));
    }
    total += static_cast<size_t>(token_offsets_[ids[i] + 1] - token_offsets_[ids[i]]);
  }
  std::string text;
  text.reserve(total);
  for (int32_t id : ids) {
    text.append(token_bytes_, static_cast<size_t>(token_offsets_[id]),
                static_cast<size_t>(token_offsets_[id + 1] - token_offsets_[id]));
  }
  return text;
}

}  // namespace mxmaca::data
