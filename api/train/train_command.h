// api/train/train_command.h: `mxmaca train`, Megatron's pretrain_gpt.py on MXMACA.
//
// Parses Megatron's flags (api/args), builds the tokenizer, the datasets, the model and
// the optimizer, resumes from --load when a checkpoint is there, and runs the training
// through the actor runtime: a Coordinator, a DataActor and one StageActor per pipeline
// stage (one, for now), printing Megatron-style log lines.
#ifndef MXMACA_API_TRAIN_TRAIN_COMMAND_H_
#define MXMACA_API_TRAIN_TRAIN_COMMAND_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "actors/messages.h"
#include "actors/training_log.h"

namespace mxmaca::api {

// Train: runs the training `args` describe and returns how it ended (the summary's
// per-iteration losses are exact, for tests that compare runs bit for bit). Every log line
// goes to `print` (stdout when empty). Errors as RunTrain's, except that a failure during
// training is returned as a summary with ok = false. `on_iteration`, when set, is called
// after every training iteration (on the coordinator's thread; keep it short) with that
// iteration's loss, grad norm, learning rate and throughput.
absl::StatusOr<actors::TrainingSummary> Train(
    const std::vector<std::string>& args, std::function<void(const std::string&)> print = {},
    std::function<void(const actors::IterationLogRecord&)> on_iteration = {});

// RunTrain: runs `mxmaca train <args>`; `args` excludes the program and subcommand names.
// Errors: bad flags or combinations (naming them), unreadable data, tokenizer or
// checkpoint files (naming the file), a model that does not match the checkpoint, and
// any failure during training (naming the actor, iteration, micro-batch and op).
absl::Status RunTrain(const std::vector<std::string>& args);

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_TRAIN_COMMAND_H_
