// api/preprocess/preprocess_partitions.h: `mxmaca preprocess --partitions N` for N > 1,
// as Megatron-LM's tools/preprocess_data.py main() (core_v0.19.0) does it:
//
//   1. --input is a glob pattern (Python's glob.glob, directory order; see
//      python_glob.h). Its files' lines are written to N partition files next to the
//      pattern, {name}_{i}{ext} for (name, ext) = os.path.splitext(--input),
//      round-robin or, with --keep-sequential-samples, in blocks of ceil(lines / N)
//      (partition_writer.h). When all N partition files already exist they are reused
//      as they are and the glob is not read, as in Megatron ("partitions already
//      present"): delete them to re-partition changed inputs. When some are missing,
//      the glob's matches that are this run's partition files (a pattern such as
//      "kjv*.jsonl" matches "kjv*_0.jsonl") are skipped -- they are about to be
//      rewritten; Megatron truncates and reads them at once -- and a match shaped like
//      another run's partition file ({name}_{digits}{ext}) is read with a warning.
//   2. Each partition is encoded into {output_prefix}_{i}_{KEY}_document.bin/.idx.
//   3. For each KEY the N datasets are appended in partition order 0..N-1 with
//      IndexedDatasetBuilder::AddIndex (Megatron's add_index) into
//      {output_prefix}_{KEY}_document.bin/.idx.
//
// The output bytes are Megatron's for the same N and flags. Differences from Megatron
// in how it gets there: one tokenizer load, and the partitions are encoded one after
// another, each by all --workers threads (Megatron: N processes of workers / N each;
// the bytes do not depend on it); the per-partition datasets of step 2 are deleted
// after the merge (Megatron leaves them; it never reads them again, it re-encodes on
// every run); an --input that matches no file is an error (Megatron writes empty
// datasets); an empty partition (fewer lines than N) is skipped rather than encoded
// (the same bytes: its dataset is empty). The partition files stay, as in Megatron.
#ifndef MXMACA_API_PREPROCESS_PREPROCESS_PARTITIONS_H_
#define MXMACA_API_PREPROCESS_PREPROCESS_PARTITIONS_H_

#include <cstdio>

#include "absl/status/status.h"
#include "api/preprocess/preprocess_flags.h"

namespace mxmaca::api {

struct PreprocessStats;

// PreprocessPartitions: steps 1-3 above for options.partitions >= 2, logging to `log`
// (may be nullptr) and filling *stats (if non-null) with the sums over the partitions
// (input_bytes: bytes of the partition files). Errors (nothing but the partition files
// is left behind): InvalidArgument naming --input when it matches no file;
// WritePartitions' errors (gzip, blank line, no lines, unreadable input); the
// tokenizer's, the JSONL's (naming the partition file and its line) and the dataset
// writer's errors, as Preprocess.
absl::Status PreprocessPartitions(const PreprocessOptions& options, std::FILE* log,
                                  PreprocessStats* stats);

}  // namespace mxmaca::api

#endif  // MXMACA_API_PREPROCESS_PREPROCESS_PARTITIONS_H_
