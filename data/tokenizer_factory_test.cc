// data/tokenizer_factory_test.cc: HuggingFaceTokenizer, TikTokenizer and SentencePieceTokenizer on
// tiny hand-written files whose ids are worked out by hand here, plus the load and
// decode errors. (Parity with independent implementations: the *_parity_test targets.)
#include "data/tokenizer_factory.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "data/hf_tokenizer.h"
#include "data/internal/byte_level.h"
#include "data/tiktoken_tokenizer.h"

namespace mxmaca::data {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int32_t>;

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(TempDir(), "/", name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string Utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

// A byte-level tokenizer.json: the 256 byte characters (id = byte), then "he" 256,
// "Ġt" 257, "Ġthe" 258 ("Ġt" + "he"), added "<|eos|>" 259 and "<mask>" 260 (lstrip).
json ByteLevelJson() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[Utf8(internal::kByteToCodePoint[b])] = b;
  vocab["he"] = 256;
  vocab["\xC4\xA0t"] = 257;
  vocab["\xC4\xA0the"] = 258;
  json j;
  j["model"] = {{"type", "BPE"},
                {"vocab", vocab},
                {"merges", json::array({"h e", "\xC4\xA0 t", "\xC4\xA0t he"})}};
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
  j["decoder"] = {{"type", "ByteLevel"}};
  j["added_tokens"] = json::array(
      {{{"id", 259}, {"content", "<|eos|>"}, {"special", true}},
       {{"id", 260}, {"content", "<mask>"}, {"lstrip", true}, {"special", true}}});
  return j;
}

std::unique_ptr<Tokenizer> Build(const TokenizerSpec& spec) {
  auto t = BuildTokenizer(spec);
  INFO(t.status().ToString());
  REQUIRE(t.ok());
  return *std::move(t);
}

std::string ErrorOf(const TokenizerSpec& spec) {
  auto t = BuildTokenizer(spec);
  REQUIRE_FALSE(t.ok());
  return std::string(t.status().message());
}

TokenizerSpec Hf(const std::string& path) {
  TokenizerSpec s;
  s.tokenizer_type = "HuggingFaceTokenizer";
  s.tokenizer_model = path;
  return s;
}

TEST_CASE("HuggingFaceTokenizer: byte-level BPE, added tokens, template, eos") {
  const std::string dir = absl::StrCat(TempDir(), "/hf_small");
  REQUIRE(std::system(absl::StrCat("mkdir -p ", dir).c_str()) == 0);
  Write("hf_small/tokenizer.json", ByteLevelJson().dump());
  Write("hf_small/tokenizer_config.json", R"({"eos_token": "<|eos|>"})");
  auto t = Build(Hf(dir));
  CHECK(t->vocab_size() == 261);
  CHECK(t->eod() == 259);
  // "the the": "the" -> t + he (no "Ġ" before the first word); " the" -> Ġthe.
  CHECK(t->Encode("the the") == Ids{'t', 256, 258});
  CHECK(t->Encode("the<|eos|> the") == Ids{'t', 256, 259, 258});
  // <mask> lstrip swallows the spaces before it (Unicode White_Space, U+3000 too).
  CHECK(t->Encode("he \xE3\x80\x80 <mask>he") == Ids{256, 260, 256});
  CHECK(*t->Decode(Ids{'t', 256, 258}) == "the the");
  auto bad = t->Decode(Ids{'t', 261});
  REQUIRE_FALSE(bad.ok());
  CHECK(absl::StrContains(bad.status().message(), "token id 261 at position 1"));

  // TemplateProcessing: "<|eos|> $A <|eos|>" around every encoding.
  json j = ByteLevelJson();
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", json::array({{{"SpecialToken", {{"id", "<|eos|>"}}}},
                              {{"Sequence", {{"id", "A"}}}},
                              {{"SpecialToken", {{"id", "<|eos|>"}}}}})},
      {"special_tokens", {{"<|eos|>", {{"id", "<|eos|>"}, {"ids", {259}}}}}}};
  TokenizerSpec legacy = Hf(Write("templated.json", j.dump()));
  legacy.legacy_tokenizer = true;  // tokenizer(text).input_ids: with the template
  auto templated = Build(legacy);
  CHECK(templated->Encode("he") == Ids{259, 256, 259});
  CHECK(templated->eod() == -1);  // no tokenizer_config.json next to templated.json
  CHECK(*templated->Decode(Ids{259, 256}) == "<|eos|>he");
  // Megatron's default (megatron/core/tokenizers): tokenize(text), no template; decode
  // drops special tokens.
  auto core = Build(Hf(Write("templated.json", j.dump())));
  CHECK(core->Encode("he") == Ids{256});
  CHECK(core->Encode("he<|eos|>") == Ids{256, 259});
  CHECK(*core->Decode(Ids{259, 256, 259}) == "he");
}

TEST_CASE("HuggingFaceTokenizer: errors name the file and what was expected") {
  CHECK(absl::StrContains(ErrorOf(Hf(Write("notjson.json", "{\"model\": "))), "not valid JSON"));
  json wordpiece = ByteLevelJson();
  wordpiece["model"]["type"] = "WordPiece";
  const std::string wp = Write("wordpiece.json", wordpiece.dump());
  const std::string wp_error = ErrorOf(Hf(wp));
  CHECK(absl::StrContains(wp_error, wp));
  CHECK(absl::StrContains(wp_error, "model type \"WordPiece\" is not supported"));
  json bad_merge = ByteLevelJson();
  bad_merge["model"]["merges"].push_back("x yz");
  CHECK(absl::StrContains(ErrorOf(Hf(Write("badmerge.json", bad_merge.dump()))),
                          "merge 3 (\"x\" \"yz\"): a token or the merged token is not in the vocab"));
  json bad_pre = ByteLevelJson();
  bad_pre["pre_tokenizer"] = {{"type", "Punctuation"}};
  CHECK(absl::StrContains(ErrorOf(Hf(Write("badpre.json", bad_pre.dump()))),
                          "unsupported pre_tokenizer \"Punctuation\""));
  json bad_regex = ByteLevelJson();
  bad_regex["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}};
  CHECK(absl::StrContains(ErrorOf(Hf(Write("badregex.json", bad_regex.dump()))),
                          "does not compile"));
  const std::string dir = absl::StrCat(TempDir(), "/hf_bad_eos");
  REQUIRE(std::system(absl::StrCat("mkdir -p ", dir).c_str()) == 0);
  Write("hf_bad_eos/tokenizer.json", ByteLevelJson().dump());
  Write("hf_bad_eos/tokenizer_config.json", R"({"eos_token": {"content": "</s>"}})");
  CHECK(absl::StrContains(ErrorOf(Hf(dir)), "eos_token \"</s>\" is not in the vocabulary"));
  TokenizerSpec none;
  none.tokenizer_type = "HuggingFaceTokenizer";
  CHECK(absl::StrContains(ErrorOf(none), "needs --tokenizer-model"));
  none.tokenizer_type = "BertWordPieceCase";
  CHECK(absl::StrContains(ErrorOf(none), "BertWordPieceCase is not supported"));
}

// Every value of the fixture replaced by each wrong-typed value: Load returns (OK or an
// error), never throws or crashes; the tokenizers it returns encode and decode.
void ReplaceEachValue(json* root, json* node, const std::string& file, int* loads) {
  const json kWrong[] = {json(1), json(-7), json("x"), json::array(), json::object(), json(),
                         json(true), json(1.5)};
  auto try_all = [&](json* slot) {
    const json saved = *slot;
    for (const json& w : kWrong) {
      *slot = w;
      Write(file, root->dump());
      absl::StatusOr<std::unique_ptr<HuggingFaceTokenizer>> t = HuggingFaceTokenizer::Load(
          absl::StrCat(TempDir(), "/", file));
      ++*loads;
      if (t.ok()) {
        const Ids ids = (*t)->Encode("the <mask> he\xE3\x80\x80x");
        (void)(*t)->Decode(ids);
      }
    }
    *slot = saved;
  };
  if (node->is_object()) {
    for (auto it = node->begin(); it != node->end(); ++it) {
      if (it.key() == "vocab") continue;  // 259 entries of one kind: spot-check one below
      try_all(&it.value());
      ReplaceEachValue(root, &it.value(), file, loads);
    }
  } else if (node->is_array()) {
    for (json& v : *node) {
      try_all(&v);
      ReplaceEachValue(root, &v, file, loads);
    }
  }
}

TEST_CASE("HuggingFaceTokenizer: wrong-typed fields never throw or crash") {
  json j = ByteLevelJson();
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", json::array({{{"SpecialToken", {{"id", "<|eos|>"}}}}, {{"Sequence", {{"id", "A"}}}}})},
      {"special_tokens", {{"<|eos|>", {{"id", "<|eos|>"}, {"ids", {259}}}}}}};
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", json::array({{{"type", "NFC"}},
                                                  {{"type", "Replace"},
                                                   {"pattern", {{"String", "x"}}},
                                                   {"content", "y"}}})}};
  j["model"]["vocab"]["he"] = "not an id";
  int loads = 0;
  ReplaceEachValue(&j, &j, "mutated.json", &loads);
  j["model"]["vocab"]["he"] = 256;
  ReplaceEachValue(&j, &j, "mutated.json", &loads);
  CHECK(loads > 500);
}

// A Megatron tiktoken vocab: the 256 bytes, then "ab" (256) and "abc" (257).
std::string TiktokenVocab(int extra_wrong = -1) {
  json list = json::array();
  auto add = [&](const std::string& bytes) {
    const int rank = static_cast<int>(list.size());
    list.push_back({{"rank", rank == extra_wrong ? rank + 1 : rank},
                    {"token_bytes", absl::Base64Escape(bytes)},
                    {"token_str", ""}});
  };
  for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)));
  add("ab");
  add("abc");
  return list.dump();
}

TokenizerSpec Tik(const std::string& path, int64_t vocab_size, int64_t k) {
  TokenizerSpec s;
  s.tokenizer_type = "TikTokenizer";
  s.tokenizer_model = path;
  s.tiktoken_pattern = "v2";
  s.vocab_size = vocab_size;
  s.tiktoken_num_special_tokens = k;
  return s;
}

TEST_CASE("TikTokenizer --legacy-tokenizer: tokenizer.py's layout and byte-pair merges") {
  const std::string path = Write("tik.json", TiktokenVocab());
  TokenizerSpec spec = Tik(path, 5 + 258, 5);
  spec.legacy_tokenizer = true;
  auto t = Build(spec);
  CHECK(t->vocab_size() == 263);
  CHECK(t->eod() == 2);  // "</s>" in ["<unk>", "<s>", "</s>", "<SPECIAL_3>", "<SPECIAL_4>"]
  // "abc" is one rank; " abc" merges " ", "a", "b", "c" -> " ", "ab", "c" -> " ", "abc".
  CHECK(t->Encode("abc abc") == Ids{257 + 5, ' ' + 5, 257 + 5});
  // Special-token text is ordinary text (encode_ordinary).
  CHECK(t->Encode("</s>").size() == 4);
  CHECK(*t->Decode(Ids{1, 257 + 5, 3, 4}) == "<s>abc<SPECIAL_3><SPECIAL_4>");
  CHECK_FALSE(t->Decode(Ids{263}).ok());
  // Custom specials (must contain the three), fillers after them.
  TokenizerSpec custom = Tik(path, 6 + 258, 6);
  custom.legacy_tokenizer = true;
  custom.tiktoken_special_tokens = {"<pad>", "</s>", "<s>", "<unk>"};
  auto c = Build(custom);
  CHECK(c->eod() == 1);
  CHECK(*c->Decode(Ids{0, 4, 5}) == "<pad><SPECIAL_4><SPECIAL_5>");
  // vocab_size - K < file size: the vocab is cut to the first N - K ranks.
  TokenizerSpec cut_spec = Tik(path, 5 + 257, 5);
  cut_spec.legacy_tokenizer = true;
  auto cut = Build(cut_spec);
  CHECK(cut->Encode("abc") == Ids{256 + 5, 'c' + 5});
}

TEST_CASE("TikTokenizer (megatron/core/tokenizers): seven specials, special text is special") {
  const std::string path = Write("tik_core.json", TiktokenVocab());
  auto t = Build(Tik(path, 9 + 258, 9));
  CHECK(t->eod() == 2);
  CHECK(*t->Decode(Ids{3, 4, 5, 6, 7, 8}) == "<mask><pad><cls><sep><SPECIAL_7><SPECIAL_8>");
  // allowed_special="all": "</s>" and "<SPECIAL_8>" in the text are their ids.
  CHECK(t->Encode("abc</s> abc<SPECIAL_8>") == Ids{257 + 9, 2, ' ' + 9, 257 + 9, 8});
  CHECK(t->Encode("</s") == Ids{'<' + 9, '/' + 9, 's' + 9});
  // Seven specials do not fit in K = 5; a custom list must contain all seven.
  CHECK(absl::StrContains(ErrorOf(Tik(path, 5 + 258, 5)), "--tiktoken-num-special-tokens (5)"));
  TokenizerSpec three = Tik(path, 9 + 258, 9);
  three.tiktoken_special_tokens = {"<unk>", "<s>", "</s>"};
  CHECK(absl::StrContains(ErrorOf(three), "must include <unk> <s> </s> <mask> <pad> <cls> <sep>"));
}

TEST_CASE("TikTokenizer: Megatron's asserts and file checks are errors") {
  const std::string path = Write("tik2.json", TiktokenVocab());
  CHECK(absl::StrContains(ErrorOf(Tik(path, 9 + 259, 9)), "are needed"));
  CHECK(absl::StrContains(ErrorOf(Tik(path, 9, 9)), "< --vocab-size"));
  TokenizerSpec dup = Tik(path, 267, 9);
  dup.tiktoken_special_tokens = {"<unk>", "<s>", "</s>", "<s>"};
  CHECK(absl::StrContains(ErrorOf(dup), "unique"));
  TokenizerSpec pattern = Tik(path, 267, 9);
  pattern.tiktoken_pattern = "v3";
  CHECK(absl::StrContains(ErrorOf(pattern), "--tiktoken-pattern v1 or v2"));
  CHECK(absl::StrContains(ErrorOf(Tik(Write("tik_bad_rank.json", TiktokenVocab(40)), 267, 9)),
                          "entry 40 has rank 41"));
  CHECK(absl::StrContains(ErrorOf(Tik(Write("tik.txt", TiktokenVocab()), 267, 9)),
                          "must be a .json file"));
  CHECK(absl::StrContains(ErrorOf(Tik(absl::StrCat(TempDir(), "/missing.json"), 267, 9)),
                          "missing.json"));
}

TEST_CASE("SentencePiece types: a corrupt or missing model is a clean error") {
  TokenizerSpec s;
  s.tokenizer_type = "Llama2Tokenizer";
  s.tokenizer_model = Write("corrupt.model", "definitely not a protobuf \x01\x02\x03");
  const std::string error = ErrorOf(s);
  CHECK(absl::StrContains(error, "corrupt.model"));
  CHECK(absl::StrContains(error, "is not a SentencePiece model"));
  s.tokenizer_model = absl::StrCat(TempDir(), "/none.model");
  CHECK(absl::StrContains(ErrorOf(s), "cannot open --tokenizer-model"));
  s.tokenizer_model.reset();
  CHECK(absl::StrContains(ErrorOf(s), "needs --tokenizer-model"));
}

}  // namespace
}  // namespace mxmaca::data
