// api/train/checkpoint_args.h: the run's arguments as stored in a checkpoint's metadata,
// and the model configuration recovered from them (for --load checks and `generate`).
//
// Stored object: {"argv": [...the train command line...], "model": {GptConfig fields
// under Megatron's dest names}, "tokenizer": {"type", "vocab_file", "merge_file"}}.
#ifndef MXMACA_API_TRAIN_CHECKPOINT_ARGS_H_
#define MXMACA_API_TRAIN_CHECKPOINT_ARGS_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "api/args/megatron_args.h"
#include "layers/gpt_config.h"

namespace mxmaca::api {

// CheckpointArgsJson: the object above.
nlohmann::json CheckpointArgsJson(const std::vector<std::string>& argv, const MegatronArgs& args,
                                  const layers::GptConfig& model);

// ModelConfigFromCheckpointArgs: the GptConfig stored by CheckpointArgsJson (dropout set
// to 0: it is used for inference and shape checks). Errors: DataLoss naming the missing
// or mistyped field.
absl::StatusOr<layers::GptConfig> ModelConfigFromCheckpointArgs(const nlohmann::json& args);

// CheckModelMatchesCheckpoint: Megatron's check_checkpoint_args for the shape fields:
// InvalidArgument "--hidden-size is 512 but the checkpoint in DIR was trained with 256"
// for the first field that differs. The padded vocabulary size is not compared: it
// follows the layout (TP, --make-vocab-size-divisible-by), and the vocabulary tensors load
// into any padded size (actors/stage_checkpoint.h); the true vocabulary size is.
absl::Status CheckModelMatchesCheckpoint(const layers::GptConfig& model,
                                         const nlohmann::json& args, const std::string& dir);

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_CHECKPOINT_ARGS_H_
