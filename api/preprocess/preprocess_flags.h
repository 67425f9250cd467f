// api/preprocess/preprocess_flags.h: the flags of `mxmaca preprocess`, which are those of
// Megatron-LM's tools/preprocess_data.py (core_v0.15.0: get_args() plus the tokenizer
// group of megatron/training/arguments.py `_add_tokenizer_args`), parsed with
// argparse's rules: `--flag value` or `--flag=value`, store_true flags without a
// value, `--json-keys` taking one or more values, the last occurrence winning, and
// unambiguous prefixes accepted (argparse's allow_abbrev).
//
// Supported: --input, --json-keys, --output-prefix, --tokenizer-type GPT2BPETokenizer,
// --vocab-file, --merge-file, --append-eod, --workers, --partitions 1, --log-interval.
// Accepted with no effect, as in Megatron for this setup: --keep-sequential-samples
// (only matters with partitions > 1), --keep-newlines and --lang (only with
// --split-sentences), --vocab-size and --vocab-extra-ids (preprocess_data.py
// ignores them for GPT2BPETokenizer).
// Errors: unknown flags (with a "did you mean" suggestion), --split-sentences (needs
// NLTK's punkt model; not provided), --partitions other than 1, other tokenizer types
// and the flags that only configure them (--tokenizer-model, --tiktoken-*, ...).
#ifndef MXMACA_API_PREPROCESS_PREPROCESS_FLAGS_H_
#define MXMACA_API_PREPROCESS_PREPROCESS_FLAGS_H_

#include <cstdint>
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
  bool append_eod = false;                        // --append-eod
  int64_t workers = 0;                            // --workers (threads here), 1..1024
  int64_t partitions = 1;                         // --partitions (1 only)
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
// --output-prefix, --tokenizer-type, --workers, as Megatron; --vocab-file and
// --merge-file for GPT2BPETokenizer), unsupported flag values as listed above.
absl::StatusOr<PreprocessOptions> ParsePreprocessArgs(const std::vector<std::string>& args);

// PreprocessUsage: the usage text printed for --help.
std::string PreprocessUsage();

}  // namespace mxmaca::api

#endif  // MXMACA_API_PREPROCESS_PREPROCESS_FLAGS_H_
