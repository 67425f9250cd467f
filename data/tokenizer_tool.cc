// data/tokenizer_tool.cc: command-line driver for the tokenizer parity tests.
//
//   tokenizer_tool --tokenizer-type=T [--tokenizer-model=M] [--vocab-file=V]
//                  [--merge-file=F] [--vocab-size=N] [--vocab-extra-ids=N]
//                  [--tiktoken-pattern=v1|v2] [--tiktoken-num-special-tokens=N]
//                  [--tiktoken-special-tokens=a,b,c] [--legacy-tokenizer] < in.jsonl > out.jsonl
// Each input line is one JSON string; each output line is
// {"ids": [...], "text": <Decode(ids)>} (invalid UTF-8 in text replaced by U+FFFD).
// The first output line is {"vocab_size": n, "eod": id}. Exit 2 on a load error
// (the message on stderr), 1 on a decode error.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "data/tokenizer_factory.h"

int main(int argc, char** argv) {
  mxmaca::data::TokenizerSpec spec;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    int64_t n = 0;
    if (key == "--tokenizer-type") {
      spec.tokenizer_type = value;
    } else if (key == "--tokenizer-model") {
      spec.tokenizer_model = value;
    } else if (key == "--vocab-file") {
      spec.vocab_file = value;
    } else if (key == "--merge-file") {
      spec.merge_file = value;
    } else if (key == "--vocab-size" && absl::SimpleAtoi(value, &n)) {
      spec.vocab_size = n;
    } else if (key == "--vocab-extra-ids" && absl::SimpleAtoi(value, &n)) {
      spec.vocab_extra_ids = n;
    } else if (key == "--tiktoken-pattern") {
      spec.tiktoken_pattern = value;
    } else if (key == "--tiktoken-num-special-tokens" && absl::SimpleAtoi(value, &n)) {
      spec.tiktoken_num_special_tokens = n;
    } else if (key == "--legacy-tokenizer") {
      spec.legacy_tokenizer = true;
    } else if (key == "--tiktoken-special-tokens") {
      spec.tiktoken_special_tokens = absl::StrSplit(value, ',');
    } else {
      std::fprintf(stderr, "tokenizer_tool: unknown argument '%s'\n", arg.c_str());
      return 2;
    }
  }
  auto tokenizer = mxmaca::data::BuildTokenizer(spec);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "tokenizer_tool: %s\n", std::string(tokenizer.status().message()).c_str());
    return 2;
  }
  std::ios::sync_with_stdio(false);
  std::cout << nlohmann::json{{"vocab_size", (*tokenizer)->vocab_size()},
                              {"eod", (*tokenizer)->eod()}}
                   .dump()
            << "\n";
  std::string line;
  int64_t line_number = 0;
  while (std::getline(std::cin, line)) {
    ++line_number;
    std::string text;
    try {
      text = nlohmann::json::parse(line).get<std::string>();
    } catch (const nlohmann::json::exception& e) {
      std::fprintf(stderr, "tokenizer_tool: stdin line %lld is not a JSON string: %s\n",
                   static_cast<long long>(line_number), e.what());
      return 2;
    }
    const std::vector<int32_t> ids = (*tokenizer)->Encode(text);
    auto decoded = (*tokenizer)->Decode(ids);
    if (!decoded.ok()) {
      std::fprintf(stderr, "tokenizer_tool: line %lld: %s\n", static_cast<long long>(line_number),
                   std::string(decoded.status().message()).c_str());
      return 1;
    }
    nlohmann::json out{{"ids", ids}, {"text", *decoded}};
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  return 0;
}
