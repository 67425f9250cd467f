// data/hf_tokenizer.cc: tokenizer.json loading, added tokens, BPE, post-processing.
#include "data/hf_tokenizer.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "data/internal/read_file.h"

namespace mxmaca::data {
namespace {

using json = nlohmann::json;

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

absl::StatusOr<json> ReadJson(const std::string& path, absl::string_view what) {
  MXMACA_ASSIGN_OR_RETURN(std::string text, internal::ReadWholeFile(path, what));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", path, "' is not valid JSON (expected a Hugging Face ", what, ")"));
  }
  return j;
}

size_t Utf8Len(unsigned char c) {
  return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
}

// White_Space (Rust's char::is_whitespace, used by added tokens' lstrip/rstrip).
bool IsWhiteSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

// DecodeAt: the code point of the well-formed UTF-8 character at text[i, i + len), or
// 0xFFFFFFFF.
uint32_t DecodeAt(std::string_view text, size_t i, size_t len) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  if (len == 1) return b(0);
  uint32_t cp = b(0) & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0xFFFFFFFF;
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  return cp;
}

// SpaceBefore / SpaceAfter: the byte length of the White_Space character that ends
// before `end` / starts at `begin`, or 0.
size_t SpaceBefore(std::string_view text, size_t begin, size_t end) {
  size_t start = end;
  while (start > begin && (static_cast<unsigned char>(text[start - 1]) & 0xC0) == 0x80 &&
         end - start < 3) {
    --start;
  }
  if (start == begin && start == end) return 0;
  if (start > begin) --start;
  if (start < begin) return 0;
  const size_t len = end - start;
  if (Utf8Len(static_cast<unsigned char>(text[start])) != len) return 0;
  return IsWhiteSpace(DecodeAt(text, start, len)) ? len : 0;
}

size_t SpaceAfter(std::string_view text, size_t begin) {
  if (begin >= text.size()) return 0;
  const size_t len = Utf8Len(static_cast<unsigned char>(text[begin]));
  if (begin + len > text.size()) return 0;
  return IsWhiteSpace(DecodeAt(text, begin, len)) ? len : 0;
}

// EosContent: the "eos_token" of a tokenizer_config.json / special_tokens_map.json
// (a string or an AddedToken object), or "".
std::string EosContent(const json& j) {
  if (!j.is_object() || !j.contains("eos_token")) return "";
  const json& e = j["eos_token"];
  if (e.is_string()) return e.get<std::string>();
  if (e.is_object() && e.contains("content") && e["content"].is_string())
    return e["content"].get<std::string>();
  return "";
}

// The per-thread word -> ids cache (for the tokenizer the thread used last), bounded as
// Gpt2BpeTokenizer's: words over kMaxCachedWordBytes are not cached, and it is emptied
// past kMaxCachedWords words or kMaxCachedIds ids.
constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kMaxCachedWords = size_t{1} << 18;
constexpr size_t kMaxCachedIds = size_t{1} << 22;
std::atomic<uint64_t> next_instance_id{1};

struct WordCache {
  uint64_t owner = 0;
  absl::flat_hash_map<std::string, std::pair<uint32_t, uint32_t>> index;  // -> (offset, count)
  std::vector<int32_t> ids;

  static WordCache& ForThisThread(uint64_t owner) {
    thread_local WordCache cache;
    if (cache.owner != owner || cache.index.size() > kMaxCachedWords ||
        cache.ids.size() > kMaxCachedIds) {
      cache.owner = owner;
      cache.index.clear();
      cache.ids.clear();
    }
    return cache;
  }
};

}  // namespace

int32_t HuggingFaceTokenizer::TokenId(std::string_view token) const {
  for (const AddedToken& a : added_)
    if (a.content == token) return a.id;
  auto it = vocab_.find(std::string(token));
  return it == vocab_.end() ? -1 : it->second;
}

absl::Status HuggingFaceTokenizer::ParseModel(const json& model, const std::string& file) {
  auto invalid = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json '", file, "': ", parts...));
  };
  if (!model.is_object()) return invalid("\"model\" is not an object");
  const std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE") {
    return invalid("model type \"", type,
                   "\" is not supported (MXMACA reads BPE tokenizer.json models only)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
      return invalid("BPE ", key, " is not supported");
    }
  }
  if (!model.contains("vocab") || !model["vocab"].is_object())
    return invalid("model \"vocab\" is not an object of token -> id");
  int64_t max_id = -1;
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 30)) {
      return invalid("vocab entry \"", token, "\" has no non-negative integer id");
    }
    vocab_[token] = id.get<int32_t>();
    max_id = std::max<int64_t>(max_id, id.get<int64_t>());
  }
  if (vocab_.empty()) return invalid("the model vocab is empty");
  id_to_token_.assign(max_id + 1, "");
  id_known_.assign(max_id + 1, false);
  for (const auto& [token, id] : vocab_) {
    id_to_token_[id] = token;
    id_known_[id] = true;
  }
  if (!model.contains("merges") || !model["merges"].is_array())
    return invalid("model \"merges\" is not a list");
  int64_t index = 0;
  for (const json& m : model["merges"]) {
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ', 1);  // a token may itself start with a space
      if (space == std::string::npos) return invalid("merge ", index, " \"", s, "\" is not \"a b\"");
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      return invalid("merge ", index, " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    auto l = vocab_.find(left), r = vocab_.find(right), lr = vocab_.find(left + right);
    if (l == vocab_.end() || r == vocab_.end() || lr == vocab_.end()) {
      return invalid("merge ", index, " (\"", left, "\" \"", right,
                     "\"): a token or the merged token is not in the vocab");
    }
    merges_.Add(l->second, r->second, lr->second);  // a repeated pair keeps its first rank
    ++index;
  }
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto it = vocab_.find(model["unk_token"].get<std::string>());
    if (it != vocab_.end()) unk_id_ = it->second;
  }
  fuse_unk_ = model.value("fuse_unk", false);
  byte_fallback_ = model.value("byte_fallback", false);
  ignore_merges_ = model.value("ignore_merges", false);
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(absl::StrFormat("<0x%02X>", b));
    byte_fallback_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<HuggingFaceTokenizer>> HuggingFaceTokenizer::Load(const std::string& path,
                                                                                bool legacy) {
  // nlohmann::json throws on a value of the wrong type (e.g. "fuse_unk": "yes"); every
  // such throw becomes an error naming the file.
  try {
    return LoadUnchecked(path, legacy);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json from --tokenizer-model '", path,
                                                   "' has a field of the wrong type: ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<HuggingFaceTokenizer>> HuggingFaceTokenizer::LoadUnchecked(
    const std::string& path, bool legacy) {
  std::string file = path;
  std::string dir;
  if (!Exists(path)) {
    return absl::NotFoundError(absl::StrCat(
        "--tokenizer-model '", path,
        "' is neither a folder with tokenizer.json nor a tokenizer.json file (MXMACA reads "
        "local files only: a Hugging Face Hub name must be downloaded first)"));
  }
  if (IsDirectory(path)) {
    dir = path;
    file = absl::StrCat(path, "/tokenizer.json");
    if (!Exists(file)) {
      return absl::NotFoundError(absl::StrCat(
          "--tokenizer-model '", path,
          "' is a folder without tokenizer.json (HuggingFaceTokenizer needs a Hugging Face "
          "tokenizer.json; slow-tokenizer files such as vocab.json/merges.txt alone are not read)"));
    }
  } else {
    const size_t slash = path.rfind('/');
    dir = slash == std::string::npos ? "." : path.substr(0, slash);
  }
  MXMACA_ASSIGN_OR_RETURN(json j, ReadJson(file, "tokenizer.json"));
  auto invalid = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json '", file, "': ", parts...));
  };
  if (!j.is_object() || !j.contains("model")) {
    return invalid("no \"model\" (expected a Hugging Face tokenizer.json with model, "
                   "pre_tokenizer, decoder, added_tokens)");
  }
  std::unique_ptr<HuggingFaceTokenizer> t(new HuggingFaceTokenizer());
  t->instance_id_ = next_instance_id.fetch_add(1);
  MXMACA_RETURN_IF_ERROR(t->ParseModel(j["model"], file));
  auto named = [&](const absl::Status& s) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json '", file, "': ", s.message()));
  };
  {
    auto n = internal::ParseNormalizer(j.value("normalizer", json()));
    if (!n.ok()) return named(n.status());
    t->normalizer_ = *std::move(n);
    auto p = internal::ParsePreTokenizer(j.value("pre_tokenizer", json()));
    if (!p.ok()) return named(p.status());
    t->pre_tokenizer_ = *std::move(p);
    auto d = internal::ParseDecoder(j.value("decoder", json()));
    if (!d.ok()) return named(d.status());
    t->decoder_ = *std::move(d);
  }
  int64_t max_id = static_cast<int64_t>(t->id_to_token_.size()) - 1;
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    if (!j["added_tokens"].is_array()) return invalid("\"added_tokens\" is not a list");
    for (const json& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
          a["id"].get<int64_t>() < 0 || !a.contains("content") || !a["content"].is_string()) {
        return invalid("an added token without a non-negative \"id\" and a \"content\": ",
                       a.dump());
      }
      AddedToken added{a["content"].get<std::string>(), a["id"].get<int32_t>(),
                       a.value("lstrip", false), a.value("rstrip", false),
                       a.value("special", false)};
      if (added.content.empty()) return invalid("an added token with empty content");
      max_id = std::max<int64_t>(max_id, added.id);
      t->added_.push_back(std::move(added));
    }
  }
  std::stable_sort(t->added_.begin(), t->added_.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  for (size_t i = 0; i < t->added_.size(); ++i) {
    t->added_by_first_byte_[static_cast<unsigned char>(t->added_[i].content[0])].push_back(i);
  }
  t->vocab_size_ = max_id + 1;
  t->id_to_token_.resize(max_id + 1);
  t->id_known_.resize(max_id + 1, false);
  t->special_.assign(max_id + 1, false);
  for (const AddedToken& a : t->added_) {
    t->id_to_token_[a.id] = a.content;
    t->id_known_[a.id] = true;
    if (a.special) t->special_[a.id] = true;
  }
  t->legacy_ = legacy;
  // Post-processor: the ids around a single sequence.
  std::function<absl::Status(const json&)> post = [&](const json& p) -> absl::Status {
    if (p.is_null()) return absl::OkStatus();
    const std::string type = p.value("type", std::string());
    if (type == "ByteLevel") return absl::OkStatus();
    if (type == "Sequence") {
      for (const json& q : p.value("processors", json::array())) MXMACA_RETURN_IF_ERROR(post(q));
      return absl::OkStatus();
    }
    if (type == "RobertaProcessing" || type == "BertProcessing") {
      for (const char* key : {"cls", "sep"}) {
        if (!p.contains(key) || !p[key].is_array() || p[key].size() != 2 ||
            !p[key][1].is_number_integer())
          return invalid("post_processor ", type, " without [token, id] \"", key, "\"");
      }
      t->prefix_ids_.push_back(p["cls"][1].get<int32_t>());
      t->suffix_ids_.push_back(p["sep"][1].get<int32_t>());
      return absl::OkStatus();
    }
    if (type == "TemplateProcessing") {
      if (!p.contains("single") || !p["single"].is_array())
        return invalid("post_processor TemplateProcessing without \"single\"");
      const json specials = p.value("special_tokens", json::object());
      std::vector<int32_t> prefix, suffix;
      bool seen_sequence = false;
      for (const json& item : p["single"]) {
        if (item.contains("Sequence")) {
          seen_sequence = true;
          continue;
        }
        if (!item.contains("SpecialToken") || !item["SpecialToken"].contains("id"))
          return invalid("TemplateProcessing item ", item.dump());
        const std::string name = item["SpecialToken"]["id"].get<std::string>();
        if (!specials.contains(name) || !specials[name].contains("ids"))
          return invalid("TemplateProcessing special token \"", name, "\" has no ids");
        for (const json& id : specials[name]["ids"]) {
          (seen_sequence ? suffix : prefix).push_back(id.get<int32_t>());
        }
      }
      t->prefix_ids_.insert(t->prefix_ids_.begin(), prefix.begin(), prefix.end());
      t->suffix_ids_.insert(t->suffix_ids_.end(), suffix.begin(), suffix.end());
      return absl::OkStatus();
    }
    return invalid("unsupported post_processor \"", type, "\"");
  };
  MXMACA_RETURN_IF_ERROR(post(j.value("post_processor", json())));
  if (!legacy) {  // tokenize(text) adds no special tokens
    t->prefix_ids_.clear();
    t->suffix_ids_.clear();
  }
  for (int32_t id : t->prefix_ids_)
    if (id < 0 || id >= t->vocab_size_) return invalid("post_processor id ", id, " out of range");
  for (int32_t id : t->suffix_ids_)
    if (id < 0 || id >= t->vocab_size_) return invalid("post_processor id ", id, " out of range");

  // eos_token from tokenizer_config.json, else special_tokens_map.json.
  std::string eos;
  for (const char* name : {"tokenizer_config.json", "special_tokens_map.json"}) {
    const std::string config_path = absl::StrCat(dir, "/", name);
    if (!eos.empty() || !Exists(config_path)) continue;
    MXMACA_ASSIGN_OR_RETURN(json config, ReadJson(config_path, name));
    eos = EosContent(config);
    for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
      json one = json::object();
      if (config.is_object() && config.contains(key)) one["eos_token"] = config[key];
      const int32_t id = t->TokenId(EosContent(one));
      if (id >= 0) t->special_[id] = true;
    }
    if (std::string(name) == "tokenizer_config.json" && config.is_object() &&
        config.contains("clean_up_tokenization_spaces") &&
        config["clean_up_tokenization_spaces"].is_boolean()) {
      t->clean_up_spaces_ = config["clean_up_tokenization_spaces"].get<bool>();
    }
    if (!eos.empty()) {
      t->eod_ = t->TokenId(eos);
      if (t->eod_ < 0) {
        return absl::InvalidArgumentError(absl::StrCat(name, " '", config_path, "': eos_token \"",
                                                       eos, "\" is not in the vocabulary of ", file));
      }
    }
  }
  return t;
}

void HuggingFaceTokenizer::EncodeWord(std::string_view word, std::vector<int32_t>* ids) const {
  const absl::string_view key(word.data(), word.size());
  WordCache* cache = nullptr;
  if (word.size() <= kMaxCachedWordBytes) {
    cache = &WordCache::ForThisThread(instance_id_);
    auto hit = cache->index.find(key);
    if (hit != cache->index.end()) {
      const int32_t* first = cache->ids.data() + hit->second.first;
      ids->insert(ids->end(), first, first + hit->second.second);
      return;
    }
  }
  const size_t start = ids->size();
  EncodeWordUncached(word, ids);
  if (cache != nullptr) {
    cache->index.emplace(std::string(key), std::make_pair(static_cast<uint32_t>(cache->ids.size()),
                                                          static_cast<uint32_t>(ids->size() - start)));
    cache->ids.insert(cache->ids.end(), ids->begin() + start, ids->end());
  }
}

void HuggingFaceTokenizer::EncodeWordUncached(std::string_view word, std::vector<int32_t>* ids) const {
  if (ignore_merges_) {
    auto it = vocab_.find(absl::string_view(word.data(), word.size()));
    if (it != vocab_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  bool last_unk = false;
  for (size_t i = 0; i < word.size();) {
    const size_t len = std::min(Utf8Len(static_cast<unsigned char>(word[i])), word.size() - i);
    auto it = vocab_.find(absl::string_view(word.data() + i, len));
    if (it != vocab_.end()) {
      symbols.push_back(it->second);
      last_unk = false;
    } else {
      bool fell_back = byte_fallback_;
      for (size_t k = 0; fell_back && k < len; ++k)
        fell_back = byte_fallback_ids_[static_cast<unsigned char>(word[i + k])] >= 0;
      if (fell_back) {
        for (size_t k = 0; k < len; ++k)
          symbols.push_back(byte_fallback_ids_[static_cast<unsigned char>(word[i + k])]);
        last_unk = false;
      } else if (unk_id_ >= 0) {
        if (!(fuse_unk_ && last_unk)) symbols.push_back(unk_id_);
        last_unk = true;
      }
    }
    i += len;
  }
  merges_.Apply(&symbols);
  ids->insert(ids->end(), symbols.begin(), symbols.end());
}

void HuggingFaceTokenizer::EncodeSegment(std::string text, bool at_start, std::vector<int32_t>* ids) const {
  normalizer_(&text);
  if (text.empty()) return;
  std::vector<internal::Piece> pieces;
  pieces.push_back(internal::Piece{std::move(text), at_start});
  pre_tokenizer_(&pieces);
  for (const internal::Piece& p : pieces) EncodeWord(p.text, ids);
}

void HuggingFaceTokenizer::EncodeAppend(std::string_view text, std::vector<int32_t>* ids) const {
  ids->insert(ids->end(), prefix_ids_.begin(), prefix_ids_.end());
  size_t segment_start = 0;  // start of the text not yet encoded
  size_t pos = 0;
  while (pos < text.size()) {
    const AddedToken* match = nullptr;
    for (int i : added_by_first_byte_[static_cast<unsigned char>(text[pos])]) {  // longest first
      const AddedToken& a = added_[i];
      if (text.compare(pos, a.content.size(), a.content) == 0) {
        match = &a;
        break;
      }
    }
    if (match == nullptr) {
      pos += Utf8Len(static_cast<unsigned char>(text[pos]));
      continue;
    }
    size_t seg_end = pos;
    if (match->lstrip) {
      for (size_t n; (n = SpaceBefore(text, segment_start, seg_end)) > 0;) seg_end -= n;
    }
    if (seg_end > segment_start) {
      EncodeSegment(std::string(text.substr(segment_start, seg_end - segment_start)),
                    segment_start == 0, ids);
    }
    ids->push_back(match->id);
    pos += match->content.size();
    if (match->rstrip) {
      for (size_t n; (n = SpaceAfter(text, pos)) > 0;) pos += n;
    }
    segment_start = pos;
  }
  if (segment_start < text.size()) {
    EncodeSegment(std::string(text.substr(segment_start)), segment_start == 0, ids);
  }
  ids->insert(ids->end(), suffix_ids_.begin(), suffix_ids_.end());
}

absl::StatusOr<std::string> HuggingFaceTokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab_size_ || !id_known_[id]) {
      return absl::InvalidArgumentError(absl::StrCat("cannot decode token id ", id, " at position ",
                                                     i, ": not in the tokenizer.json vocabulary (",
                                                     vocab_size_, " ids)"));
    }
    if (!legacy_ && special_[id]) continue;  // remove_special_tokens
    tokens.push_back(id_to_token_[id]);
  }
  decoder_(&tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  if (clean_up_spaces_) {
    out = absl::StrReplaceAll(out, {{" .", "."},
                                    {" ?", "?"},
                                    {" !", "!"},
                                    {" ,", ","},
                                    {" ' ", "'"},
                                    {" n't", "n't"},
                                    {" 'm", "'m"},
                                    {" 's", "'s"},
                                    {" 've", "'ve"},
                                    {" 're", "'re"}});
  }
  return out;
}

}  // namespace mxmaca::data
