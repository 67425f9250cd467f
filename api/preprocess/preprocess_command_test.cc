// api/preprocess/preprocess_command_test.cc: end-to-end `preprocess` on KJV chapters
// and edge-case documents, read back and compared with the tokenizer's Encode (+eod);
// output bytes independent of the worker count and batch size; errors leave nothing.
#include "api/preprocess/preprocess_command.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/preprocess/test_files.h"
#include "data/gpt2_bpe_tokenizer.h"
#include "data/indexed_dataset.h"

namespace mxmaca::api {
namespace {

using testing::kEncoderDir;
using testing::ListDir;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::WriteFile;

// JSON string literal for `s` (quotes, backslashes and control characters escaped).
std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// The chapters of Ruth from `bible` (bible-kjv), verse texts joined by "\n" as
// tools/kjv_to_jsonl.py does.
std::vector<std::string> RuthChapters() {
  std::FILE* p = ::popen("bible -f Ru1:1-Ru4:22", "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  REQUIRE(::pclose(p) == 0);
  std::map<std::string, std::string> chapters;
  std::vector<std::string> order;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    const size_t space = line.find(' ');
    REQUIRE(space != absl::string_view::npos);
    const std::string chapter(line.substr(0, line.find(':')));
    if (chapters.count(chapter) == 0) order.push_back(chapter);
    std::string& text = chapters[chapter];
    if (!text.empty()) text += "\n";
    text += std::string(line.substr(space + 1));
  }
  std::vector<std::string> result;
  for (const std::string& c : order) result.push_back(chapters[c]);
  REQUIRE(result.size() == 4);
  return result;
}

// An input document: sentences per key ("text", "title"); `as_array` writes the
// text as a JSON array of sentences.
struct InputDoc {
  std::vector<std::string> text;
  bool as_array = false;
  std::string title;
};

std::vector<InputDoc> TestDocs() {
  std::vector<InputDoc> docs;
  int chapter = 1;
  for (const std::string& text : RuthChapters()) {
    docs.push_back({{text}, false, absl::StrCat("Ruth ", chapter++)});
  }
  docs.push_back({{""}, false, "empty text"});                 // no tokens: empty document
  docs.push_back({{" "}, false, ""});                          // one token; empty title
  docs.push_back({{"First.", "", "Third <|endoftext|> x"}, true, "array"});
  docs.push_back({{}, true, "an empty array"});
  docs.push_back(
      {{"caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80\ttab"}, false, "\xCE\xB1"});
  docs.push_back({{"Line one.\r\nLine two.\n\n"}, false, "newlines"});
  return docs;
}

// Writes `docs` as JSONL (alternating LF and CRLF, no final newline, an extra key).
std::string WriteJsonl(const std::string& path, const std::vector<InputDoc>& docs) {
  std::string out;
  for (size_t i = 0; i < docs.size(); ++i) {
    std::string text;
    if (docs[i].as_array) {
      text = "[";
      for (size_t s = 0; s < docs[i].text.size(); ++s) {
        text += (s ? ", " : "") + JsonString(docs[i].text[s]);
      }
      text += "]";
    } else {
      text = JsonString(docs[i].text[0]);
    }
    out += absl::StrCat("{\"id\": ", i, ", \"title\": ", JsonString(docs[i].title),
                        ", \"text\": ", text, "}");
    if (i + 1 < docs.size()) out += i % 2 ? "\r\n" : "\n";
  }
  WriteFile(path, out);
  return path;
}

PreprocessOptions Options(const std::string& input, const std::string& prefix) {
  PreprocessOptions options;
  options.input = input;
  options.output_prefix = prefix;
  options.tokenizer_type = "GPT2BPETokenizer";
  options.vocab_file = absl::StrCat(kEncoderDir, "/encoder.json");
  options.merge_file = absl::StrCat(kEncoderDir, "/vocab.bpe");
  options.workers = 2;
  return options;
}

// The sequences Megatron's Encoder.encode makes of `sentences`.
std::vector<std::vector<int32_t>> ExpectedSequences(const data::Gpt2BpeTokenizer& tok,
                                                    const std::vector<std::string>& sentences,
                                                    bool append_eod) {
  std::vector<std::vector<int32_t>> sequences;
  for (const std::string& s : sentences) {
    std::vector<int32_t> ids = tok.Encode(s);
    if (!ids.empty()) sequences.push_back(std::move(ids));
  }
  if (append_eod && !sequences.empty()) sequences.back().push_back(tok.eod());
  return sequences;
}

void ExpectDataset(const std::string& prefix, const data::Gpt2BpeTokenizer& tok,
                   const std::vector<std::vector<std::string>>& docs, bool append_eod) {
  auto ds = data::IndexedDataset::Open(prefix);
  REQUIRE(ds.ok());
  CHECK((*ds)->dtype() == data::DType::kUint16);  // GPT-2: 50,257 < 65,500
  REQUIRE((*ds)->num_documents() == static_cast<int64_t>(docs.size()));
  for (size_t d = 0; d < docs.size(); ++d) {
    INFO("document " << d);
    const auto expected = ExpectedSequences(tok, docs[d], append_eod);
    const int64_t first = (*ds)->document_index(d);
    REQUIRE((*ds)->document_index(d + 1) - first == static_cast<int64_t>(expected.size()));
    for (size_t s = 0; s < expected.size(); ++s) {
      auto got = (*ds)->Get(first + static_cast<int64_t>(s));
      REQUIRE(got.ok());
      CHECK(*got == expected[s]);
    }
  }
}

TEST_CASE("preprocess writes Megatron datasets equal to Encode (+eod) per key") {
  auto tok = data::Gpt2BpeTokenizer::Load(absl::StrCat(kEncoderDir, "/encoder.json"),
                                          absl::StrCat(kEncoderDir, "/vocab.bpe"));
  REQUIRE(tok.ok());
  const std::string dir = MakeTempDir();
  const auto docs = TestDocs();
  const std::string input = WriteJsonl(dir + "/in.jsonl", docs);
  std::vector<std::vector<std::string>> texts, titles;
  for (const InputDoc& doc : docs) {
    texts.push_back(doc.text);
    titles.push_back({doc.title});
  }
  for (bool append_eod : {true, false}) {
    PreprocessOptions options = Options(input, dir + (append_eod ? "/eod" : "/plain"));
    options.json_keys = {"text", "title"};
    options.append_eod = append_eod;
    options.docs_per_batch = 3;
    PreprocessStats stats;
    REQUIRE(Preprocess(options, nullptr, &stats).ok());
    CHECK(stats.documents == static_cast<int64_t>(docs.size()));
    CHECK(stats.input_bytes == static_cast<int64_t>(ReadFile(input).size()));
    ExpectDataset(OutputPrefix(options.output_prefix, "text"), **tok, texts, append_eod);
    ExpectDataset(OutputPrefix(options.output_prefix, "title"), **tok, titles, append_eod);
  }
  CHECK(OutputPrefix("/a/b", "text") == "/a/b_text_document");
}

TEST_CASE("output bytes do not depend on workers, batch size or queue depth") {
  const std::string dir = MakeTempDir();
  // Many short random documents so that batches finish out of order.
  std::vector<InputDoc> docs = TestDocs();
  std::srand(12345);
  for (int i = 0; i < 300; ++i) {
    std::string text;
    const int words = std::rand() % 40;
    for (int w = 0; w < words; ++w) {
      text += " ";
      for (int c = std::rand() % 9; c >= 0; --c) text += static_cast<char>('a' + std::rand() % 26);
    }
    docs.push_back({{text}, false, ""});
  }
  const std::string input = WriteJsonl(dir + "/in.jsonl", docs);
  std::string reference_bin, reference_idx;
  int run = 0;
  for (int64_t workers : {1, 2, 3, 5}) {
    for (int64_t per_batch : {1, 7, 256}) {
      PreprocessOptions options = Options(input, absl::StrCat(dir, "/run", run++));
      options.workers = workers;
      options.docs_per_batch = per_batch;
      options.max_batches_in_flight = workers == 3 ? 1 : 0;
      options.append_eod = true;
      REQUIRE(Preprocess(options, nullptr).ok());
      const std::string prefix = OutputPrefix(options.output_prefix, "text");
      const std::string bin = ReadFile(prefix + ".bin");
      const std::string idx = ReadFile(prefix + ".idx");
      REQUIRE(!bin.empty());
      if (reference_bin.empty()) {
        reference_bin = bin;
        reference_idx = idx;
      }
      INFO("workers " << workers << ", docs per batch " << per_batch);
      CHECK(bin == reference_bin);
      CHECK(idx == reference_idx);
    }
  }
}

TEST_CASE("progress lines every --log-interval documents and a summary") {
  const std::string dir = MakeTempDir();
  const auto docs = TestDocs();  // 10 documents
  PreprocessOptions options = Options(WriteJsonl(dir + "/in.jsonl", docs), dir + "/out");
  options.log_interval = 4;
  options.docs_per_batch = 3;
  std::FILE* log = std::tmpfile();
  REQUIRE(log != nullptr);
  REQUIRE(Preprocess(options, log).ok());
  std::rewind(log);
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), log)) > 0) text.append(buf, n);
  std::fclose(log);
  INFO(text);
  CHECK(text.find("Opening " + options.input) != std::string::npos);
  CHECK(text.find("Processed 4 documents (") != std::string::npos);
  CHECK(text.find("Processed 8 documents (") != std::string::npos);
  CHECK(text.find("Processed 10 documents") == std::string::npos);
  CHECK(text.find(" docs/s, ") != std::string::npos);
  CHECK(text.find(" MB/s, ") != std::string::npos);
  CHECK(text.find("Done: 10 documents") != std::string::npos);
}

TEST_CASE("errors name file and line and leave no output behind") {
  const std::string dir = MakeTempDir();
  std::string jsonl;
  for (int i = 0; i < 20; ++i) {
    jsonl += i == 13 ? "{\"text\": \"broken\"\n" : "{\"text\": \"fine\"}\n";
  }
  WriteFile(dir + "/bad.jsonl", jsonl);
  for (int64_t workers : {1, 3}) {
    PreprocessOptions options = Options(dir + "/bad.jsonl", dir + "/out");
    options.workers = workers;
    options.docs_per_batch = 4;
    absl::Status status = Preprocess(options, nullptr);
    REQUIRE_FALSE(status.ok());
    CHECK(status.message().find(dir + "/bad.jsonl:14: invalid JSON") != std::string::npos);
    CHECK(ListDir(dir) == std::vector<std::string>{"bad.jsonl"});
  }
  WriteFile(dir + "/ok.jsonl", "{\"text\": \"x\"}\n");
  PreprocessOptions options = Options(dir + "/ok.jsonl", dir + "/no/such/dir/out");
  CHECK_FALSE(Preprocess(options, nullptr).ok());
  options = Options(dir + "/ok.jsonl", dir + "/out");
  options.merge_file = dir + "/missing.bpe";
  absl::Status status = Preprocess(options, nullptr);
  CHECK_FALSE(status.ok());
  CHECK(status.message().find("missing.bpe") != std::string::npos);
  options = Options(dir + "/ok.jsonl", dir + "/out");
  options.json_keys = {"body"};
  status = Preprocess(options, nullptr);
  CHECK(status.message().find("ok.jsonl:1: missing key \"body\"") != std::string::npos);
  CHECK(RunPreprocess({"--input", "x", "--bogus"}).code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mxmaca::api
