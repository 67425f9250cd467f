// data/fuzz/jsonl_fuzz.cc: libFuzzer target for //data:jsonl_reader.
//
// The input bytes are a JSONL file. ReadJsonlFile (keys "text" and "title") must return
// a Status, never crash; on success there must be one document per line (lines end at
// '\n'; the last may lack it) with two fields each, and every line parsed alone with
// ParseJsonlLine must succeed the same way. Differentially, ParseJsonlLine (our
// one-pass parser) and ParseJsonlLineReference (nlohmann/json) must agree on every
// line: same error category, same fields (except numbers beyond double range, NaN and
// Infinity, which only ours accepts, as Python's json.loads does; and lines with NUL
// bytes, where nlohmann stops reading).
//
// Built two ways, like tokenizer_fuzz: by data/fuzz/run_fuzzers_idx.sh with clang++
// -fsanitize=fuzzer (-DMXMACA_LIBFUZZER), and by Bazel as a plain binary replaying the
// files named on its command line.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "data/jsonl_reader.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "jsonl_fuzz: check failed: %s\n", what);
    std::abort();
  }
}

const std::string& Path() {
  static const std::string path = [] {
    const char* base = std::getenv("TMPDIR");
    return std::string(base != nullptr ? base : "/tmp") + "/jsonl_fuzz." +
           std::to_string(::getpid()) + ".jsonl";
  }();
  return path;
}

// The category of a parse error, comparable between the two parsers.
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

void CheckAgainstReference(const std::string& line, const std::vector<std::string>& keys) {
  mxmaca::data::JsonlDocument ours, ref;
  const absl::Status a = mxmaca::data::ParseJsonlLine(line, keys, "f", 1, &ours);
  const absl::Status b = mxmaca::data::ParseJsonlLineReference(line, keys, "f", 1, &ref);
  if (!b.ok() &&
      (b.message().find("number overflow") != std::string::npos ||
       line.find("NaN") != std::string::npos || line.find("Infinity") != std::string::npos)) {
    return;  // Python extensions only our parser accepts
  }
  // nlohmann's lexer takes a NUL byte for the end of input ("1 \0x" parses as 1);
  // json.loads and ours reject the trailing bytes.
  if (line.find('\0') != std::string::npos) return;
  if (Category(a) != Category(b)) {
    std::fprintf(stderr, "ours: %s\nnlohmann: %s\n", a.ToString().c_str(),
                 b.ToString().c_str());
    Check(false, "parsers disagree");
  }
  if (a.ok()) Check(ours.fields == ref.fields, "parsers extract different fields");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> keys = {"text", "title"};
  {
    // Differential check, line by line (lines split at '\n', a final '\r' dropped).
    const std::string all(reinterpret_cast<const char*>(data), size);
    size_t begin = 0;
    while (begin < all.size()) {
      size_t end = all.find('\n', begin);
      if (end == std::string::npos) end = all.size();
      std::string line = all.substr(begin, end - begin);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      CheckAgainstReference(line, keys);
      begin = end + 1;
    }
  }
  {
    std::FILE* f = std::fopen(Path().c_str(), "wb");
    Check(f != nullptr, "fopen");
    if (size > 0) Check(std::fwrite(data, 1, size, f) == size, "fwrite");
    std::fclose(f);
  }
  auto docs = mxmaca::data::ReadJsonlFile(Path(), keys);
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (!docs.ok()) {
    Check(!docs.status().message().empty(), "error without message");
    Check(docs.status().message().find(Path()) != std::string::npos, "error names file");
    return 0;
  }
  size_t lines = 0, begin = 0;
  std::vector<std::string> line_texts;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    line_texts.push_back(text.substr(begin, end - begin));
    ++lines;
    begin = end + 1;
  }
  Check(docs->size() == lines, "one document per line");
  mxmaca::data::JsonlDocument doc;
  for (size_t i = 0; i < lines; ++i) {
    Check((*docs)[i].fields.size() == keys.size(), "fields per key");
    Check(mxmaca::data::ParseJsonlLine(line_texts[i], keys, "x", i + 1, &doc).ok(),
          "line parses alone");
    Check(doc.fields == (*docs)[i].fields, "same fields alone");
  }
  return 0;
}

#ifndef MXMACA_LIBFUZZER
int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    std::printf("%s: ok\n", argv[i]);
  }
  ::unlink(Path().c_str());
  return 0;
}
#endif
