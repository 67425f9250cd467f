// data/jsonl_reader_test.cc: line splitting (LF, CRLF, no final newline, long lines,
// buffer boundaries), key extraction and error messages of the JSONL reader.
#include "data/jsonl_reader.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace mxmaca::data {
namespace {

std::string TempFile(const std::string& contents) {
  static int counter = 0;
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(base != nullptr ? base : "/tmp") + "/jsonl_" +
                           std::to_string(::getpid()) + "_" + std::to_string(counter++) +
                           ".jsonl";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  return path;
}

const std::vector<std::string> kText = {"text"};

// Reads `contents` with `keys`; returns the error message, or "" on success (docs in
// *docs).
std::string ReadError(const std::string& contents, std::vector<JsonlDocument>* docs,
                      const std::vector<std::string>& keys = kText,
                      std::string* path_out = nullptr) {
  const std::string path = TempFile(contents);
  if (path_out != nullptr) *path_out = path;
  auto result = ReadJsonlFile(path, keys);
  if (!result.ok()) return std::string(result.status().message());
  *docs = std::move(*result);
  return "";
}

TEST_CASE("LF, CRLF and a missing final newline give the same documents") {
  const std::string a = "{\"text\": \"first\\nline\", \"id\": 1}";
  const std::string b = "{\"id\": 2, \"text\": \"s\\u00e9cond \\ud83d\\ude00\"}";
  for (const std::string& contents :
       {a + "\n" + b + "\n", a + "\r\n" + b + "\r\n", a + "\n" + b, a + "\r\n" + b + "\r"}) {
    std::vector<JsonlDocument> docs;
    REQUIRE(ReadError(contents, &docs) == "");
    REQUIRE(docs.size() == 2);
    CHECK(docs[0].fields == std::vector<std::vector<std::string>>{{"first\nline"}});
    CHECK(docs[1].fields ==
          std::vector<std::vector<std::string>>{{"s\xC3\xA9" "cond \xF0\x9F\x98\x80"}});
  }
}

TEST_CASE("several keys, arrays of sentences and empty strings") {
  std::vector<JsonlDocument> docs;
  REQUIRE(ReadError("{\"text\": \"\", \"title\": [\"a\", \"\", \"b c\"]}\n", &docs,
                    {"title", "text"}) == "");
  REQUIRE(docs.size() == 1);
  REQUIRE(docs[0].fields.size() == 2);
  CHECK(docs[0].fields[0] == std::vector<std::string>{"a", "", "b c"});
  CHECK(docs[0].fields[1] == std::vector<std::string>{""});
}

TEST_CASE("errors name the file and the line") {
  std::vector<JsonlDocument> docs;
  std::string path;
  auto expect = [&](const std::string& contents, const std::string& line_tag,
                    const std::string& what) {
    const std::string message = ReadError(contents, &docs, kText, &path);
    INFO(message);
    CHECK(message.find(path + ":" + line_tag + ": ") != std::string::npos);
    CHECK(message.find(what) != std::string::npos);
  };
  const std::string ok = "{\"text\": \"x\"}\n";
  expect(ok + "\n" + ok, "2", "blank line");
  expect(ok + "   \r\n", "2", "blank line");
  expect(ok + ok + "{\"text\": \"x\"\n", "3", "invalid JSON");
  expect("{\"text\": \"\xff\"}\n", "1", "invalid JSON");  // ill-formed UTF-8
  expect(ok + "{\"body\": \"x\"}\n", "2", "missing key \"text\"");
  expect("{\"text\": 3}\n", "1", "key \"text\" is number");
  expect("{\"text\": null}\n", "1", "key \"text\" is null");
  expect("{\"text\": [\"a\", 1]}\n", "1", "element 1 of key \"text\" is number");
  expect("[\"text\"]\n", "1", "expected a JSON object, got array");

  expect("\xEF\xBB\xBF{\"text\": \"x\"}\n", "1", "byte-order mark");

  // As json.loads: NaN, Infinity and numbers beyond double range are valid (a fuzz
  // finding: nlohmann threw out_of_range on 1e400).
  REQUIRE(ReadError("{\"text\": \"x\", \"n\": [1e400, NaN, -Infinity]}\n", &docs) == "");
  CHECK(docs.size() == 1);

  const std::string empty = TempFile("");
  auto result = ReadJsonlFile(empty, kText);
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(result.status().message().find("empty") != std::string::npos);
  CHECK(ReadJsonlFile("/nonexistent/x.jsonl", kText).status().code() ==
        absl::StatusCode::kNotFound);
}

TEST_CASE("random documents across buffer boundaries and a line over 1 MiB") {
  std::mt19937_64 rng(0x15011);
  std::uniform_int_distribution<int> length(0, 3000);
  std::uniform_int_distribution<int> codepoint(1, 0x2FFF);
  std::vector<std::string> texts;
  std::string contents;
  int64_t total = 0;
  while (total < (3 << 20)) {
    std::string text;
    const int n = texts.size() == 100 ? 1500000 : length(rng);  // one very long line
    for (int i = 0; i < n; ++i) {
      const int c = codepoint(rng);
      if (c < 0x80) {
        text.push_back(static_cast<char>(c));
      } else if (c < 0x800) {
        text.push_back(static_cast<char>(0xC0 | (c >> 6)));
        text.push_back(static_cast<char>(0x80 | (c & 0x3F)));
      } else {
        text.push_back(static_cast<char>(0xE0 | (c >> 12)));
        text.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
        text.push_back(static_cast<char>(0x80 | (c & 0x3F)));
      }
    }
    nlohmann::json obj = {{"meta", static_cast<int>(texts.size())}, {"text", text}};
    contents += obj.dump() + (rng() % 2 ? "\r\n" : "\n");
    total += static_cast<int64_t>(text.size());
    texts.push_back(std::move(text));
  }
  std::vector<JsonlDocument> docs;
  REQUIRE(ReadError(contents, &docs) == "");
  REQUIRE(docs.size() == texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    REQUIRE(docs[i].fields.size() == 1);
    REQUIRE(docs[i].fields[0] == std::vector<std::string>{texts[i]});
  }
  // bytes_consumed counts every byte, newlines included.
  auto reader = JsonlLineReader::Open(TempFile(contents));
  REQUIRE(reader.ok());
  std::string line;
  int64_t lines = 0;
  while (true) {
    auto more = (*reader)->Next(&line);
    REQUIRE(more.ok());
    if (!*more) break;
    ++lines;
  }
  CHECK(lines == static_cast<int64_t>(texts.size()));
  CHECK((*reader)->line_number() == lines);
  CHECK((*reader)->bytes_consumed() == static_cast<int64_t>(contents.size()));
}

}  // namespace
}  // namespace mxmaca::data
