// api/inspect/inspect_data_command.h: `mxmaca inspect-data`: builds the datasets a
// training run with the same flags would read (Megatron's data flags: --data-path,
// --split, --train/valid/test-data-path, --mock-data, --seed, --seq-length,
// --train-iters/--train-samples, --global-batch-size, --eval-iters, --eval-interval,
// --data-cache-path, --vocab-file, --merge-file, ...) and reports each split's
// documents, samples and epochs. Its own flags:
//   --show N            print the first N train samples: token ids and decoded text
//                       (needs --vocab-file and --merge-file)
//   --dump-samples FILE write every train sample in order, each seq_length + 1 token
//                       ids as little-endian int64, to FILE
// The index cache is built or reused exactly as training would.
#ifndef MXMACA_API_INSPECT_INSPECT_DATA_COMMAND_H_
#define MXMACA_API_INSPECT_INSPECT_DATA_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace mxmaca::api {

// RunInspectData: runs the command on `args` (the words after `inspect-data`), printing
// to stdout. Errors: InvalidArgument for bad or missing flags (unknown flags are
// errors, as in training); those of building the datasets, of the tokenizer and of
// writing FILE (with its path).
absl::Status RunInspectData(const std::vector<std::string>& args);

// RunInspectData: as above, printing to `out`.
absl::Status RunInspectData(const std::vector<std::string>& args, std::ostream& out);

}  // namespace mxmaca::api

#endif  // MXMACA_API_INSPECT_INSPECT_DATA_COMMAND_H_
