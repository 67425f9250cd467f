// api/train/synthetic_train.h: `mxmaca train --synthetic-op-ms F,B,W[,OPT]`: the job's
// pipeline layout on synthetic stages (actors/synthetic_stage_program.h) instead of the GPT.
//
// Every rank of the (tp, pp, dp) grid that the flags describe runs a
// SyntheticStageProgram in this process: each forward (F), input-gradient (B) and
// weight-gradient (W) op sleeps its declared time per micro-batch and model chunk, so a
// deep pipeline (PP 8, 16) runs on real stage actors, real messages and the real
// coordinator on a 2-core machine, and prints the same Megatron-style iteration lines as
// a real run (with "bubble per stage"). No tokenizer, data files or model is needed.
//
// Flags with an effect: --tensor-model-parallel-size, --pipeline-model-parallel-size,
// --world-size (dp = world / (tp x pp)), --num-layers-per-virtual-pipeline-stage (with
// --num-layers) or --num-virtual-stages-per-pipeline-rank (v), --pipeline-schedule,
// --dynamic-pipeline, --max-stashed-microbatches, --optimizer-post-validation,
// --inject-stage-slowdown, --pipeline-channel-slots, --micro-batch-size,
// --global-batch-size, --train-iters / --train-samples, --log-interval, --trace-file,
// --use-distributed-optimizer, --overlap-grad-reduce, --clip-grad, the learning-rate
// schedule (the log's learning-rate column; --lr defaults to 1e-4 here), and --seq-length /
// --hidden-size (the declared activation shape [b, s, h]: the log's tokens/s and peak
// activation memory). Model-size flags may be omitted (placeholders pass Megatron's
// checks). Other flags `mxmaca train` honours are accepted with a notice that they have
// no effect here; --save, --load, --finetune, the exit flags, rebalancing, MoE and
// uneven-stage flags are errors (they need a real model or change what the per-chunk op
// times mean).
#ifndef MXMACA_API_TRAIN_SYNTHETIC_TRAIN_H_
#define MXMACA_API_TRAIN_SYNTHETIC_TRAIN_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "actors/messages.h"
#include "actors/synthetic_stage_program.h"
#include "actors/training_log.h"
#include "api/args/megatron_args.h"

namespace mxmaca::api {

// SyntheticOpTimes: the parsed --synthetic-op-ms value, in seconds.
struct SyntheticOpTimes {
  actors::SyntheticOpSeconds op;   // F, B, W per micro-batch and model chunk
  double optimizer_seconds = 0.0;  // each optimizer step (0 = as fast as it runs)
};

// ParseSyntheticOpMs: "F,B,W" or "F,B,W,OPT", milliseconds, each a finite number >= 0 and
// F + B + W > 0. Errors: InvalidArgument naming the flag, the whole value and the part
// that is wrong.
absl::StatusOr<SyntheticOpTimes> ParseSyntheticOpMs(const std::string& value);

// TrainSynthetic: runs the job `args` describes on the synthetic backend (see the file
// comment). `args` is ParseMegatronArgs' result (not yet validated) with synthetic_op_ms
// set. Every log line goes to `print` (must be callable); `on_iteration` as in Train().
// Returns the run's summary (ok = false with the failing stage, iteration, micro-batch and
// op when one failed). Errors: a bad --synthetic-op-ms value; Unimplemented naming the
// flags the synthetic backend cannot honour, or a multi-process launch (it runs every
// rank in this process); InvalidArgument from Megatron's checks (ValidateAndDeriveArgs),
// a schedule that does not fit the layout (naming the sizes), bad values of
// --inject-stage-slowdown, --max-stashed-microbatches or --pipeline-channel-slots.
absl::StatusOr<actors::TrainingSummary> TrainSynthetic(
    MegatronArgs args, const std::function<void(const std::string&)>& print,
    std::function<void(const actors::IterationLogRecord&)> on_iteration = {});

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_SYNTHETIC_TRAIN_H_
