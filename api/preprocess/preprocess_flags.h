// api/preprocess/preprocess_flags.h: the flags of `mxmaca preprocess`, which are those of
// Megatron-LM's tools/preprocess_data.py (core_v0.15.0: get_args() plus the tokenizer
// group of megatron/training/arguments.py `_add_tokenizer_args`), parsed with
// argparse's rules: `--flag value` or `--flag=value`, store_true flags without a
// value, `--json-keys` taking one or more values, the last occurrence winning, and
// unambiguous prefixes accepted (argparse's allow_abbrev).
//
// Supported: --input, --json-keys, --output-prefix, --tokenizer-type GPT2BPETokenizer
// (--vocab-file, --merge-file), HuggingFaceTokenizer, SentencePieceTokenizer,
// GPTSentencePieceTokenizer, Llama2Tokenizer (--tokenizer-model, --vocab-extra-ids),
// TikTokenizer (--tokenizer-model, --tiktoken-pattern, --vocab-size,
// --tiktoken-num-special-tokens, --tiktoken-special-tokens), --legacy-tokenizer,
// --append-eod, --workers, --partitions (>= 1; --workers must be a multiple of it, as
// Megatron asserts), --keep-sequential-samples (with --partitions > 1, see
// preprocess_partitions.h), --log-interval.
// Accepted with no effect, as in Megatron for this setup: --keep-newlines and --lang
// (only with --split-sentences).
// Errors: unknown flags (with a "did you mean" suggestion), --split-sentences (needs
// NLTK's punkt model; not provided), other tokenizer types
// and the flags that only configure them (--tokenizer-metadata, --special-tokens, ...).
#ifndef MXMACA_API_PREPROCESS_PREPROCESS_FLAGS_H_
#define MXMACA_API_PREPROCESS_PREPROCESS_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mxmaca::api {

// PreprocessOptions: the parsed flags, named after Megatron's argparse dests.
struct PreprocessOptions {
  std::string input;                              // --input (JSONL file)
  std::vector<std::string> json_keys = {"text"};  // --json-keys
  std::string output_prefix;                      // --output-prefix
  std::string tokenizer_type;                     // --tokenizer-type
  std::string vocab_file;                         // --vocab-file (encoder.json)
  std::string merge_file;                         // --merge-file (vocab.bpe)
  std::string tokenizer_model;                    // --tokenizer-model
  std::optional<int64_t> vocab_size;              // --vocab-size (TikTokenizer)
  int64_t vocab_extra_ids = 0;                    // --vocab-extra-ids
  std::string tiktoken_pattern;                   // --tiktoken-pattern
  int64_t tiktoken_num_special_tokens = 1000;     // --tiktoken-num-special-tokens
  std::vector<std::string> tiktoken_special_tokens;  // --tiktoken-special-tokens
  bool legacy_tokenizer = false;  // --legacy-tokenizer (see data/tokenizer_factory.h)
  bool append_eod = false;                        // --append-eod
  int64_t workers = 0;                            // --workers (threads here), 1..1024
  int64_t partitions = 1;                         // --partitions, >= 1
  bool keep_sequential_samples = false;           // --keep-sequential-samples
  int64_t log_interval = 1000;                    // --log-interval (documents), >= 1
  bool help = false;                              // -h / --help was given

  // Tuning, not flags: documents per unit of parallel work and the most units in
  // flight (tests make them small to exercise reordering).
  int64_t docs_per_batch = 256;
  int64_t max_batches_in_flight = 0;  // 0: 4 x workers
};

// ParsePreprocessArgs: `args` (without the program and subcommand names) into options.
// Errors (InvalidArgument, naming the flag): unknown or ambiguous flag (with the
// closest known flags), missing value, bad integer, a missing required flag (--input,
// --output-prefix, --tokenizer-type, --workers, as Megatron; --partitions < 1 or not
// dividing --workers; --vocab-file and
// --merge-file for GPT2BPETokenizer; --tokenizer-model for the others;
// --tiktoken-pattern v1|v2 for TikTokenizer), unsupported flag values as listed above.
absl::StatusOr<PreprocessOptions> ParsePreprocessArgs(const std::vector<std::string>& args);

// PreprocessUsage: the usage text printed for --help.
std::string PreprocessUsage();

}  // namespace mxmaca::api

#endif  // MXMACA_API_PREPROCESS_PREPROCESS_FLAGS_H_
