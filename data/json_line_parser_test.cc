// data/json_line_parser_test.cc: fixed cases of Python's json.loads grammar and a
// differential test against nlohmann/json (ParseJsonlLineReference) on random,
// partly corrupted lines.
#include "data/json_line_parser.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "data/json_line_parser_test_util.h"
#include "data/jsonl_reader.h"

namespace mxmaca::data {
namespace {

const std::vector<std::string> kText = {"text"};

// Parses `line`; returns "" or the error message; the text field in *field.
std::string Parse(const std::string& line, JsonField* field) {
  std::vector<JsonField> fields;
  absl::Status status = ParseJsonObjectFields(line, kText, &fields);
  if (!status.ok()) return std::string(status.message());
  *field = fields[0];
  return "";
}

TEST_CASE("accepts what json.loads accepts and decodes the requested strings") {
  JsonField f;
  REQUIRE(Parse(" {\"id\": -0.5e+3, \"text\" : \"a\\\"b\\\\c\\/\\b\\f\\n\\r\\t\"} ", &f) == "");
  CHECK(f.present);
  CHECK(std::string(f.type) == "string");
  CHECK(f.strings == std::vector<std::string>{"a\"b\\c/\b\f\n\r\t"});
  REQUIRE(Parse("{\"text\": \"\\u00e9\\u4E2D\\ud83d\\ude00\\u0000 \xC3\xA9\xF0\x9F\x98\x80\"}",
                &f) == "");
  CHECK(f.strings == std::vector<std::string>{std::string("\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80"
                                                          "\0 \xC3\xA9\xF0\x9F\x98\x80",
                                                          17)});
  // Python extensions: NaN, Infinity, huge numbers; nested values skipped.
  REQUIRE(Parse("{\"a\": [NaN, -Infinity, Infinity, 1e99999, 123456789012345678901234567890],"
                " \"b\": {\"text\": \"inner\"}, \"text\": [\"x\", \"\", \"y\"]}",
                &f) == "");
  CHECK(std::string(f.type) == "array");
  CHECK(f.strings == std::vector<std::string>{"x", "", "y"});
  CHECK(f.first_non_string == -1);
  // The last of repeated keys wins.
  REQUIRE(Parse("{\"text\": \"first\", \"text\": [\"a\", 1, null]}", &f) == "");
  CHECK(f.strings == std::vector<std::string>{"a"});
  CHECK(f.first_non_string == 1);
  CHECK(std::string(f.non_string_type) == "number");
  REQUIRE(Parse("{\"text\": {\"k\": []}}", &f) == "");
  CHECK(std::string(f.type) == "object");
  REQUIRE(Parse("{\"other\": true}", &f) == "");
  CHECK_FALSE(f.present);
  REQUIRE(Parse("{}", &f) == "");
  CHECK(Parse("[1, 2]", &f) == "expected a JSON object, got array");
  CHECK(Parse("\"s\"", &f) == "expected a JSON object, got string");
}

TEST_CASE("rejects what json.loads rejects, naming the byte") {
  JsonField f;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"text\": \"x\"} x", "invalid JSON at byte 14: extra data"},
      {"{\"text\": \"x\",}", "invalid JSON at byte 13: expected a string key"},
      {"{\"text\": 01}", "invalid JSON at byte 10: expected ',' or '}'"},
      {"{\"text\": 1.}", "invalid JSON at byte 11: invalid number"},
      {"{\"text\": -}", "invalid JSON at byte 10: invalid number"},
      {"{\"text\": +1}", "invalid JSON at byte 9: expected a value"},
      {"{\"text\": \"a\tb\"}", "invalid JSON at byte 11: control character"},
      {"{\"text\": \"\\x\"}", "invalid JSON at byte 11: invalid escape"},
      {"{\"text\": \"\\u12G4\"}", "invalid \\u escape"},
      {"{\"text\": \"\\ud800\"}", "lone high surrogate"},
      {"{\"text\": \"\\udc00x\"}", "lone low surrogate"},
      {"{\"text\": \"\xC0\x80\"}", "invalid UTF-8"},          // overlong
      {"{\"text\": \"\xED\xA0\x80\"}", "invalid UTF-8"},      // encoded surrogate
      {"{\"text\": \"\xF4\x90\x80\x80\"}", "invalid UTF-8"},  // above U+10FFFF
      {"{\"text\": \"\xE4\xB8\"}", "invalid UTF-8"},          // truncated
      {"{\"text\": tru}", "invalid literal"},
      {"{\"text\": nan}", "invalid literal"},
      {"{'text': 1}", "expected a string key"},
      {"{\"text\" 1}", "expected ':'"},
      {"{\"text\": \"x\"", "expected ',' or '}'"},
      {"{\"text\": \"x", "unterminated string"},
      {"", "expected a value"},
      // A NUL byte is not the end of the line (nlohmann's lexer would stop there).
      {std::string("{\"text\": \"x\"}\0{", 15), "invalid JSON at byte 13: extra data"},
      {std::string(901, '[') + std::string(901, ']'), "nesting too deep"},
  };
  for (const auto& [line, expected] : cases) {
    INFO(line);
    const std::string message = Parse(line, &f);
    CHECK(message.find(expected) != std::string::npos);
  }
  CHECK(Parse(std::string(899, '[') + std::string(899, ']'), &f) ==
        "expected a JSON object, got array");
}

// The category of a ParseJsonlLine / ParseJsonlLineReference error.
std::string Category(const absl::Status& status) {
  if (status.ok()) return "ok";
  // Messages are "f:1: WHAT ..."; compare WHAT's first words only (the rest may quote
  // the input).
  std::string m(status.message());
  if (m.rfind("f:1: ", 0) == 0) m = m.substr(5);
  for (const char* c : {"blank line", "UTF-8 byte-order mark", "invalid JSON",
                        "expected a JSON object", "missing key", "element", "key \""}) {
    if (m.rfind(c, 0) == 0) return c;
  }
  return m;
}

TEST_CASE("agrees with nlohmann/json on random and corrupted lines") {
  testing::JsonLineGenerator gen(0xC0FFEE, /*python_extensions=*/false);
  int ok = 0, overflow = 0;
  for (int i = 0; i < 30000; ++i) {
    const std::string line = gen.Line();
    JsonlDocument ours, ref;
    const absl::Status a = ParseJsonlLine(line, {"text", "title"}, "f", 1, &ours);
    const absl::Status b = ParseJsonlLineReference(line, {"text", "title"}, "f", 1, &ref);
    if (!b.ok() && b.message().find("number overflow") != std::string::npos) {
      ++overflow;  // e.g. 1e345: json.loads reads inf, nlohmann rejects
      continue;
    }
    INFO(line << "\nours: " << a.ToString() << "\nnlohmann: " << b.ToString());
    REQUIRE(Category(a) == Category(b));
    if (a.ok()) {
      ++ok;
      REQUIRE(ours.fields == ref.fields);
    }
  }
  INFO("valid lines " << ok << ", overflow " << overflow);
  CHECK(ok > 3000);  // the generator must exercise the success path
}

}  // namespace
}  // namespace mxmaca::data
