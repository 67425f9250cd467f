// api/preprocess/partition_writer.h: the partition files of `mxmaca preprocess
// --partitions N` (Megatron-LM tools/preprocess_data.py main(), core_v0.19.0).
//
// Megatron names partition i of --input IN "{name}_{i}{ext}" with (name, ext) =
// os.path.splitext(IN) -- IN being the glob pattern itself, so "data/*.jsonl" gives
// "data/*_0.jsonl" -- and its output prefix "{output_prefix}_{i}". The lines of the
// input files, in glob order, go to partition 0, 1, ..., N-1, 0, ... (round-robin), or,
// with --keep-sequential-samples, in contiguous blocks of ceil(total_lines / N) lines.
//
// Differences from Megatron, all where Megatron would write a broken partition or
// crash: every line written ends with '\n' (Megatron copies a last line without newline
// as is, gluing it to the next line of that partition); an empty input file counts 0
// lines (Megatron's count repeats the previous file's, or fails on a first empty file);
// the partition files are written under temporary names and renamed only when all are
// complete, so an interrupted run does not leave files that a rerun would take as
// "already present"; a blank line is reported with the input file and line here.
#ifndef MXMACA_API_PREPROCESS_PARTITION_WRITER_H_
#define MXMACA_API_PREPROCESS_PARTITION_WRITER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mxmaca::api {

// SplitExtension: Python's os.path.splitext on POSIX: ("dir/a.b", ".jsonl") for
// "dir/a.b.jsonl"; leading dots of the last component do not start an extension
// (".bashrc" -> (".bashrc", "")).
std::pair<std::string, std::string> SplitExtension(const std::string& path);

// PartitionNames: partition `index`'s file and output prefix (Megatron's get_file_name).
struct PartitionNames {
  std::string partition;      // {name}_{index}{ext} of --input
  std::string output_prefix;  // {output_prefix}_{index}
};
PartitionNames PartitionNamesFor(const std::string& input, const std::string& output_prefix,
                                 int64_t index);

// WritePartitions: distributes the lines of `inputs` (in order) into the files
// `partitions` (N >= 2 of them), round-robin or, with `keep_sequential`, in blocks of
// ceil(total / N) lines (see above). Returns the number of lines written to each.
// Errors (nothing is left behind): an input ending in ".gz" (gzip input is not
// supported: decompress it first), an input that cannot be opened or read or is a
// directory (NotFound / the OS error, naming it), a blank line (InvalidArgument
// "FILE:LINE: blank line"), no line in any input (InvalidArgument, nothing to
// preprocess), a partition file that cannot be written (the OS error, naming it).
absl::StatusOr<std::vector<int64_t>> WritePartitions(const std::vector<std::string>& inputs,
                                                     const std::vector<std::string>& partitions,
                                                     bool keep_sequential);

}  // namespace mxmaca::api

#endif  // MXMACA_API_PREPROCESS_PARTITION_WRITER_H_
