// api/train/train_setup.h: from validated Megatron arguments to the pieces of a run —
// the model configuration, the learning-rate schedule and the data configuration.
//
// Each function mirrors the Megatron code that derives the same values, named beside it.
#ifndef MXMACA_API_TRAIN_TRAIN_SETUP_H_
#define MXMACA_API_TRAIN_TRAIN_SETUP_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "api/args/megatron_args.h"
#include "layers/flops.h"
#include "layers/gpt_config.h"
#include "layers/lr_schedule.h"

namespace mxmaca::api {

// GptConfigFromArgs: layers::GptConfig for the flags in `args` (after
// ValidateAndDeriveArgs) and the tokenizer's vocabulary size `vocab_size`; the padded size
// is PaddedVocabSize(vocab_size, --make-vocab-size-divisible-by, TP). Errors:
// InvalidArgument naming the flag for spellings the layers do not know
// (--position-embedding-type, --normalization, --recompute-*), and GptConfig::Validate's.
absl::StatusOr<layers::GptConfig> GptConfigFromArgs(const MegatronArgs& args, int64_t vocab_size);

// SchedulerConfigFromArgs: megatron/training/training.py get_optimizer_param_scheduler:
// with --train-iters, decay = lr_decay_iters x global batch, warmup = lr_warmup_fraction x
// decay or lr_warmup_iters x global batch, wd increments over train_iters x global batch;
// with --train-samples the *_samples flags directly. All in samples. A fractional warmup
// (fraction x decay) is rounded down to whole samples.
absl::StatusOr<layers::OptimizerParamSchedulerConfig> SchedulerConfigFromArgs(
    const MegatronArgs& args);

// TrainIters: --train-iters, or --train-samples / global batch (Megatron's
// update_train_iters for a constant batch size).
int64_t TrainIters(const MegatronArgs& args);

// DenseShape: the dimensions Megatron's FLOPs formula needs, from a model config.
layers::DenseGptShape DenseShape(const layers::GptConfig& config);

// ParseStageSlowdown: --inject-stage-slowdown STAGE:FACTOR[:FROM_ITER] for a pipeline of
// `pipeline_size` stages (real and synthetic runs). Errors: InvalidArgument quoting the
// value unless 0 <= STAGE < pipeline_size, FACTOR >= 1 (finite) and FROM_ITER >= 1.
absl::Status ParseStageSlowdown(const std::string& value, int32_t pipeline_size, int32_t* stage,
                                double* factor, int64_t* from);

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_TRAIN_SETUP_H_
