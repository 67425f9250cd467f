// actors/checkpoint/megatron/mxmaca_bridge.h: between MXMACA's own checkpoints
// (CheckpointReader / CheckpointWriter: logical tensors in safetensors shards) and the
// logical tensors of a Megatron legacy checkpoint (megatron_checkpoint.h). Both hold
// whole tensors under the same names ("model/<name>", "optimizer/exp_avg/<name>", ...),
// so the bridge copies; it holds a whole checkpoint in memory while it runs.
#ifndef MXMACA_ACTORS_CHECKPOINT_MEGATRON_MXMACA_BRIDGE_H_
#define MXMACA_ACTORS_CHECKPOINT_MEGATRON_MXMACA_BRIDGE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "actors/checkpoint/checkpoint_reader.h"
#include "actors/checkpoint/megatron/megatron_checkpoint.h"
#include <nlohmann/json.hpp>

namespace mxmaca::actors::checkpoint::megatron {

// ReadLogicalTensors: every tensor of an opened MXMACA checkpoint, whole.
absl::StatusOr<LogicalTensors> ReadLogicalTensors(const CheckpointReader& reader);

// WriteAsMxmacaCheckpoint: writes `tensors` as an MXMACA checkpoint of `iteration` in
// `save_dir` (one shard file, "megatron"), with metadata args/state as given (objects).
// Errors of CheckpointWriter.
absl::Status WriteAsMxmacaCheckpoint(const LogicalTensors& tensors, const std::string& save_dir,
                                     int64_t iteration, const nlohmann::json& args,
                                     const nlohmann::json& state);

}  // namespace mxmaca::actors::checkpoint::megatron

#endif  // MXMACA_ACTORS_CHECKPOINT_MEGATRON_MXMACA_BRIDGE_H_
