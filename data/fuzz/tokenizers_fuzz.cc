// data/fuzz/tokenizers_fuzz.cc: libFuzzer target for //data:hf_tokenizer and
// //data:tiktoken_tokenizer.
//
// The first input byte picks the check, the rest is the payload:
//   0: HuggingFaceTokenizer (a Llama-3-layout byte-level tokenizer.json written here:
//      Split regex + ByteLevel, added tokens with lstrip/rstrip, ignore_merges) on the
//      payload as text: ids inside the vocab, Decode(Encode(b)) == b for every byte
//      string, a second Encode equal (word cache);
//   1: TikTokenizer (v1 pattern) the same;
//   2: the payload as a tokenizer.json: Load must return (OK or an error), never crash
//      or throw; a loaded tokenizer must encode and decode a fixed text.
// Built by data/fuzz/run_fuzzers_tokenizers.sh with clang++ -fsanitize=fuzzer
// (-DMXMACA_LIBFUZZER) and by Bazel as a plain binary replaying the files it is given.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "data/hf_tokenizer.h"
#include "data/internal/byte_level.h"
#include "data/tiktoken_tokenizer.h"

namespace {

using json = nlohmann::json;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "tokenizers_fuzz: check failed: %s\n", what);
    std::abort();
  }
}

std::string TempPath(const char* name) {
  const char* t = std::getenv("TMPDIR");
  return absl::StrCat(t != nullptr ? t : "/tmp", "/mxmaca_tokenizers_fuzz_", getpid(), "_", name);
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

const mxmaca::data::HuggingFaceTokenizer& Hf() {
  static const mxmaca::data::HuggingFaceTokenizer* const tok = [] {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[Utf8(mxmaca::data::internal::kByteToCodePoint[b])] = b;
    const char* merges[][2] = {{"h", "e"}, {"\xC4\xA0", "t"}, {"\xC4\xA0t", "he"}, {"t", "he"},
                               {"i", "n"}, {"\xC4\xA0", "in"}, {"\xC4\xA0", "\xC4\xA0"}};
    json merge_list = json::array();
    for (const auto& m : merges) {
      const std::string merged = std::string(m[0]) + m[1];
      if (!vocab.contains(merged)) vocab[merged] = static_cast<int>(vocab.size());
      merge_list.push_back(json::array({m[0], m[1]}));
    }
    const int n = static_cast<int>(vocab.size());
    json j;
    j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list},
                  {"ignore_merges", true}};
    j["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers",
         json::array({{{"type", "Split"},
                       {"pattern",
                        {{"Regex",
                          R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
                       {"behavior", "Isolated"}},
                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
    j["decoder"] = {{"type", "ByteLevel"}};
    j["added_tokens"] = json::array({{{"id", n}, {"content", "<|eot|>"}},
                                     {{"id", n + 1}, {"content", "<m>"}, {"lstrip", false}}});
    const std::string path = TempPath("tokenizer.json");
    std::ofstream(path) << j.dump();
    auto loaded = mxmaca::data::HuggingFaceTokenizer::Load(path);
    if (!loaded.ok()) {
      std::fprintf(stderr, "tokenizers_fuzz: %s\n", loaded.status().ToString().c_str());
      std::abort();
    }
    std::remove(path.c_str());
    return loaded->release();
  }();
  return *tok;
}

const mxmaca::data::TikTokenizer& Tik() {
  static const mxmaca::data::TikTokenizer* const tok = [] {
    json list = json::array();
    auto add = [&](const std::string& bytes) {
      list.push_back({{"rank", static_cast<int>(list.size())},
                      {"token_bytes", absl::Base64Escape(bytes)},
                      {"token_str", ""}});
    };
    for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)));
    for (const char* t : {"he", " t", " the", "in", " in", "  ", "\xC3\xA9", "ing"}) add(t);
    const std::string path = TempPath("tiktoken.json");
    std::ofstream(path) << list.dump();
    auto loaded = mxmaca::data::TikTokenizer::Load(path, "v1", 10 + 264, 10, {}, /*legacy=*/false);
    if (!loaded.ok()) {
      std::fprintf(stderr, "tokenizers_fuzz: %s\n", loaded.status().ToString().c_str());
      std::abort();
    }
    std::remove(path.c_str());
    return loaded->release();
  }();
  return *tok;
}

void RoundTrip(const mxmaca::data::Tokenizer& tok, std::string_view text) {
  const std::vector<int32_t> ids = tok.Encode(text);
  for (int32_t id : ids) Check(id >= 0 && id < tok.vocab_size(), "id outside the vocab");
  auto decoded = tok.Decode(ids);
  Check(decoded.ok(), "Decode failed on Encode's ids");
  Check(*decoded == text, "Decode(Encode(b)) != b");
  Check(tok.Encode(text) == ids, "second Encode differs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view payload(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      RoundTrip(Hf(), payload);
      break;
    case 1:
      RoundTrip(Tik(), payload);
      break;
    default: {
      static const std::string path = TempPath("input.json");
      std::ofstream(path, std::ios::binary | std::ios::trunc) << payload;
      auto loaded = mxmaca::data::HuggingFaceTokenizer::Load(path);
      if (loaded.ok()) {
        const std::vector<int32_t> ids = (*loaded)->Encode("Hello world <m> the 123");
        for (int32_t id : ids) Check(id >= 0 && id < (*loaded)->vocab_size(), "id outside");
        (void)(*loaded)->Decode(ids);
      }
      break;
    }
  }
  return 0;
}

#ifndef MXMACA_LIBFUZZER
int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "tokenizers_fuzz: cannot open %s\n", argv[i]);
      return 2;
    }
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("tokenizers_fuzz: %d inputs ok\n", argc - 1);
  return 0;
}
#endif
