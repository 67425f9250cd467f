// api/merge_datasets/merge_datasets_command.h: `mxmaca merge-datasets`, Megatron-LM's
// tools/merge_datasets.py (core_v0.19.0): every .bin/.idx pair in a directory, in sorted
// prefix order, appended into one dataset with IndexedDatasetBuilder::AddIndex (Megatron's
// add_index: sequence lengths and document indices concatenated, .bin bytes copied,
// pointers recomputed as int64 byte offsets), so the result is byte for byte the dataset
// that preprocessing the concatenated documents gives.
#ifndef MXMACA_API_MERGE_DATASETS_MERGE_DATASETS_COMMAND_H_
#define MXMACA_API_MERGE_DATASETS_MERGE_DATASETS_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mxmaca::api {

// MergeDatasetPrefixes: the prefixes (directory + basename without extension) of the
// datasets in `input_dir`, sorted as Python sorts the basenames (byte order). Every file's
// pair must exist: a .bin without its .idx (or the reverse) is InvalidArgument naming it;
// files of other extensions count as prefixes too, as in Megatron (and then lack a pair).
// Errors: InvalidArgument when `input_dir` is not a directory or holds no dataset.
absl::StatusOr<std::vector<std::string>> MergeDatasetPrefixes(const std::string& input_dir);

// RunMergeDatasets: `mxmaca merge-datasets --input DIR --output-prefix PREFIX`: writes
// PREFIX.bin / PREFIX.idx in the dtype of the first dataset and prints one line per input
// and a summary. Errors (InvalidArgument naming the value): a missing or unknown flag,
// --multimodal (sequence modes are not read here), an output directory that does not
// exist, an input of another dtype; IndexedDataset::Open's errors for a corrupt input; the
// OS error of a failed write.
absl::Status RunMergeDatasets(const std::vector<std::string>& argv);

}  // namespace mxmaca::api

#endif  // MXMACA_API_MERGE_DATASETS_MERGE_DATASETS_COMMAND_H_
