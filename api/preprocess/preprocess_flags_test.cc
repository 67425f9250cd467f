// api/preprocess/preprocess_flags_test.cc: argparse semantics and error messages of the
// preprocess_data.py flags.
#include "api/preprocess/preprocess_flags.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace mxmaca::api {
namespace {

std::vector<std::string> Base() {
  return {"--input", "in.jsonl", "--output-prefix", "out", "--tokenizer-type",
          "GPT2BPETokenizer", "--vocab-file", "enc.json", "--merge-file", "vocab.bpe",
          "--workers", "3"};
}

std::vector<std::string> With(std::vector<std::string> extra) {
  std::vector<std::string> args = Base();
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::string ErrorOf(const std::vector<std::string>& args) {
  auto parsed = ParsePreprocessArgs(args);
  REQUIRE_FALSE(parsed.ok());
  return std::string(parsed.status().message());
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST_CASE("Megatron's flags parse with argparse semantics and defaults") {
  auto parsed = ParsePreprocessArgs(Base());
  REQUIRE(parsed.ok());
  CHECK(parsed->input == "in.jsonl");
  CHECK(parsed->output_prefix == "out");
  CHECK(parsed->vocab_file == "enc.json");
  CHECK(parsed->merge_file == "vocab.bpe");
  CHECK(parsed->workers == 3);
  CHECK(parsed->json_keys == std::vector<std::string>{"text"});  // default
  CHECK(parsed->log_interval == 1000);
  CHECK_FALSE(parsed->append_eod);

  parsed = ParsePreprocessArgs(With({"--json-keys", "text", "title", "--append-eod",
                                     "--log-interval=7", "--workers", "5", "--partitions",
                                     "1", "--keep-sequential-samples", "--lang", "english",
                                     "--vocab-extra-ids", "0", "--keep-newlines"}));
  REQUIRE(parsed.ok());
  CHECK(parsed->json_keys == std::vector<std::string>{"text", "title"});
  CHECK(parsed->append_eod);
  CHECK(parsed->log_interval == 7);
  CHECK(parsed->workers == 5);  // the last occurrence wins
  CHECK(parsed->partitions == 1);
  CHECK(parsed->keep_sequential_samples);

  parsed =
      ParsePreprocessArgs(With({"--input", "dir/*.jsonl", "--workers", "6", "--partitions", "3"}));
  REQUIRE(parsed.ok());
  CHECK(parsed->input == "dir/*.jsonl");
  CHECK(parsed->partitions == 3);
  CHECK_FALSE(parsed->keep_sequential_samples);

  // Unambiguous prefixes, as argparse's allow_abbrev.
  parsed = ParsePreprocessArgs(With({"--append", "--json-k", "body", "--log-int", "2"}));
  REQUIRE(parsed.ok());
  CHECK(parsed->append_eod);
  CHECK(parsed->json_keys == std::vector<std::string>{"body"});
  CHECK(parsed->log_interval == 2);

  parsed = ParsePreprocessArgs({"--help"});
  REQUIRE(parsed.ok());
  CHECK(parsed->help);
}

TEST_CASE("errors name the flag and suggest the closest one") {
  CHECK(Contains(ErrorOf(With({"--output_prefix", "x"})), "did you mean --output-prefix?"));
  CHECK(Contains(ErrorOf(With({"--apend-eod"})), "did you mean --append-eod?"));
  CHECK(Contains(ErrorOf(With({"--frobnicate"})), "unrecognized argument --frobnicate"));
  CHECK(Contains(ErrorOf(With({"--vocab", "x"})), "ambiguous option --vocab"));
  CHECK(Contains(ErrorOf(With({"stray"})), "unrecognized argument \"stray\""));
  CHECK(Contains(ErrorOf(With({"--split-sentences"})), "--split-sentences"));
  CHECK(Contains(ErrorOf(With({"--partitions", "0"})), "--partitions must be >= 1"));
  CHECK(Contains(ErrorOf(With({"--partitions", "-2"})), "got -2"));
  CHECK(Contains(ErrorOf(With({"--partitions", "2"})),  // Base() has --workers 3
                 "--workers 3 is not divisible by --partitions 2"));
  CHECK(Contains(ErrorOf(With({"--partitions", "x"})), "invalid int value \"x\""));
  CHECK(Contains(ErrorOf(With({"--workers", "0"})), "--workers must be in [1, 1024]"));
  CHECK(Contains(ErrorOf(With({"--workers", "two"})), "invalid int value \"two\""));
  CHECK(Contains(ErrorOf(With({"--log-interval"})), "--log-interval expects one argument"));
  CHECK(Contains(ErrorOf(With({"--json-keys"})), "expects at least one argument"));
  CHECK(Contains(ErrorOf(With({"--json-keys", "a", "a"})), "\"a\" twice"));
  CHECK(Contains(ErrorOf(With({"--append-eod=1"})), "takes no value"));
  CHECK(Contains(ErrorOf(With({"--tokenizer-metadata", "m.json"})),
                 "tokenizer MXMACA does not provide"));
  CHECK(Contains(ErrorOf(With({"--tokenizer-type", "Llama2Tokenizer"})),
                 "Llama2Tokenizer needs --tokenizer-model"));
  CHECK(Contains(ErrorOf(With({"--tokenizer-type", "TikTokenizer", "--tokenizer-model", "v.json"})),
                 "TikTokenizer needs --tiktoken-pattern v1 or v2"));
  CHECK(Contains(ErrorOf(With({"--tokenizer-type", "BertWordPieceCase"})),
                 "BertWordPieceCase is not supported"));
  {
    auto tik = ParsePreprocessArgs(With({"--tokenizer-type", "TikTokenizer", "--tokenizer-model",
                                         "v.json", "--tiktoken-pattern", "v2", "--vocab-size",
                                         "5000", "--tiktoken-num-special-tokens", "10",
                                         "--tiktoken-special-tokens", "<unk>", "<s>", "</s>",
                                         "<pad>"}));
    REQUIRE(tik.ok());
    CHECK(tik->tokenizer_model == "v.json");
    CHECK(tik->tiktoken_pattern == "v2");
    CHECK(*tik->vocab_size == 5000);
    CHECK(tik->tiktoken_num_special_tokens == 10);
    CHECK(tik->tiktoken_special_tokens ==
          std::vector<std::string>{"<unk>", "<s>", "</s>", "<pad>"});
    CHECK(tik->json_keys == std::vector<std::string>{"text"});
    CHECK_FALSE(tik->legacy_tokenizer);
  }
  {
    auto legacy = ParsePreprocessArgs(With({"--tokenizer-type", "Llama2Tokenizer",
                                            "--tokenizer-model", "m.model", "--legacy-tokenizer"}));
    REQUIRE(legacy.ok());
    CHECK(legacy->legacy_tokenizer);
  }
  CHECK(Contains(ErrorOf(With({"--tokenizer-type", "Nonsense"})), "invalid choice"));
  CHECK(Contains(ErrorOf({"--input", "x"}),
                 "required: --output-prefix, --tokenizer-type, --workers"));
  CHECK(Contains(ErrorOf({"--input", "x", "--output-prefix", "y", "--tokenizer-type",
                          "GPT2BPETokenizer", "--workers", "1"}),
                 "--vocab-file"));
}

}  // namespace
}  // namespace mxmaca::api
