// data/fuzz/jsonl_fuzz.cc: libFuzzer target for //data:jsonl_reader.
//
// The input bytes are a JSONL file. ReadJsonlFile (keys "text" and "title") must return
// a Status, never crash; on success there must be one document per line (lines end at
// '\n'; the last may lack it) with two fields each, and every line parsed alone with
// ParseJsonlLine must succeed the same way.
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> keys = {"text", "title"};
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
