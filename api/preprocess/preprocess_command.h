// api/preprocess/preprocess_command.h: `mxmaca preprocess`, Megatron-LM's
// tools/preprocess_data.py in C++: JSONL in, Megatron indexed datasets out.
//
// For each `--json-keys` KEY it writes {output_prefix}_{KEY}_document.bin/.idx with one
// document per input line, in input order. As Megatron's Encoder.encode does, each
// sentence (the string, or each element of an array of strings) is tokenized with
// GPT-2 BPE; sentences with no tokens are dropped; the document's sentences become its
// sequences; with --append-eod the eod token (50256) is appended to the last sequence of
// every non-empty document. A document without tokens is still recorded (its document
// index repeats the previous one), as Megatron's add_document does. The token dtype is
// Megatron's DType.optimal_dtype(vocab_size): uint16 for GPT-2.
//
// Work is parallel over --workers threads in batches of lines; the main thread reads
// the input and writes the batches back in input order, so the output bytes do not
// depend on the number of workers. Each output appears atomically at the end (temp
// files + rename); on any error no output is left behind.
//
// With --partitions N > 1 the input is a glob and the work goes through partition files,
// merged at the end (see preprocess_partitions.h); the output bytes are those Megatron
// writes for the same N.
//
// Differences from Megatron: all keys are finalized (Megatron's loop finalizes only the
// last key's .idx); --split-sentences is unsupported.
#ifndef MXMACA_API_PREPROCESS_PREPROCESS_COMMAND_H_
#define MXMACA_API_PREPROCESS_PREPROCESS_COMMAND_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/preprocess/preprocess_flags.h"
#include "data/tokenizer.h"

namespace mxmaca::api {

// PreprocessStats: what a run processed.
struct PreprocessStats {
  int64_t documents = 0;    // input lines
  int64_t tokens = 0;       // tokens written, all keys, eod included
  int64_t input_bytes = 0;  // bytes of the input read, newlines included
  double seconds = 0;       // from the first line read to the last output renamed
};

// RunPreprocess: `mxmaca preprocess ARGS...` (`args` without program and subcommand
// names): parses the flags (see preprocess_flags.h) and runs Preprocess with progress
// on stderr. With --help prints the usage to stdout and returns OK. Errors: those of
// ParsePreprocessArgs and Preprocess.
absl::Status RunPreprocess(const std::vector<std::string>& args);

// Preprocess: runs with parsed `options` (--partitions > 1: PreprocessPartitions, else
// BuildPreprocessTokenizer + PreprocessFile), writing "Opening ...", a progress line
// "Processed N documents (X docs/s, Y MB/s, T tokens)." every --log-interval documents
// (MB = 2^20 bytes of input, as Megatron) and a final summary to `log` (may be
// nullptr). Fills *stats if non-null. Errors: the tokenizer's Load errors; the JSONL
// errors (file:line, see data/jsonl_reader.h); the indexed dataset writer's errors.
absl::Status Preprocess(const PreprocessOptions& options, std::FILE* log,
                        PreprocessStats* stats = nullptr);

// BuildPreprocessTokenizer: the tokenizer --tokenizer-type and its flags name (see
// data/tokenizer_factory.h). Errors: the tokenizer's Load errors; InvalidArgument for
// --append-eod with a tokenizer that has no end-of-document token.
absl::StatusOr<std::unique_ptr<data::Tokenizer>> BuildPreprocessTokenizer(
    const PreprocessOptions& options);

// PreprocessFile: one JSONL file, options.input, into {options.output_prefix}_{KEY}_document
// with an already loaded `tokenizer` (options.partitions is not looked at). Logs and
// stats as Preprocess; the "Time to startup" line adds `startup_seconds` (time spent
// before the call, e.g. loading the tokenizer). Errors: as Preprocess, minus the
// tokenizer's.
absl::Status PreprocessFile(const PreprocessOptions& options, const data::Tokenizer& tokenizer,
                            std::FILE* log, PreprocessStats* stats = nullptr,
                            double startup_seconds = 0);

// OutputPrefix: "{output_prefix}_{key}_document", the dataset prefix for `key`.
std::string OutputPrefix(const std::string& output_prefix, const std::string& key);

}  // namespace mxmaca::api

#endif  // MXMACA_API_PREPROCESS_PREPROCESS_COMMAND_H_
