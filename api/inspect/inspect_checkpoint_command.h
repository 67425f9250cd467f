// api/inspect/inspect_checkpoint_command.h: `mxmaca inspect-checkpoint DIR` (or --load DIR /
// --save DIR) [--iteration N] [--verify]: what a checkpoint directory holds, for either format
// MXMACA reads:
//   MXMACA's own (iter_*/metadata.json + shard_*.safetensors, docs/CHECKPOINTS.md): first the
//     directory (checkpoint_dir_report.h: the tracker file, every iter_* directory complete
//     or half-written, the --save lock and its holder, temp entries of saves that never
//     committed and whether the next save removes them), then for the latest (or --iteration)
//     committed checkpoint: format, iteration, shard files, and per logical tensor its dtype
//     (F32), full shape and the CRC-32C of its values in C order;
//   Megatron's legacy (--ckpt-format torch, iter_*/mp_rank_*/model_optim_rng.pt): format,
//     iteration, the TP/PP/EP layout and each model chunk's layers, the top-level entries and
//     the args' model fields, then per rank file and state-dict key its dtype, shape and the
//     CRC-32 (zip's) of its element bytes in C order.
// A directory with no committed checkpoint prints the directory section alone.
// --verify also checks every stored checksum (MXMACA: CRC-32C per box; Megatron: the zip
// CRC-32 of every archive entry).
#ifndef MXMACA_API_INSPECT_INSPECT_CHECKPOINT_COMMAND_H_
#define MXMACA_API_INSPECT_INSPECT_CHECKPOINT_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace mxmaca::api {

// RunInspectCheckpoint: runs the command on `args` (the words after `inspect-checkpoint`),
// printing to `out`. Errors: InvalidArgument for an unknown flag, a flag without its value,
// or no directory or two; NotFound "<DIR> does not exist" when DIR is not a directory; the
// readers' errors (naming the file) otherwise.
absl::Status RunInspectCheckpoint(const std::vector<std::string>& args, std::ostream& out);
absl::Status RunInspectCheckpoint(const std::vector<std::string>& args);  // to stdout

}  // namespace mxmaca::api

#endif  // MXMACA_API_INSPECT_INSPECT_CHECKPOINT_COMMAND_H_
