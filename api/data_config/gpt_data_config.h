// api/data_config/gpt_data_config.h: GptDataConfigFromArgs, the data flags of a
// Megatron GPT run (api/args MegatronArgs) turned into data::GptDataConfig, with the
// per-split sample counts of Megatron's training.py get_train_valid_test_num_samples:
//   train = --train-samples, else --train-iters x global batch;
//   valid = (train_iters // --eval-interval + 1) x --eval-iters x global batch;
//   test  = --eval-iters x global batch
// (with --train-samples, train_iters = train_samples // global batch, as Megatron's
// update_train_iters computes it without batch-size ramp-up).
// It lives in api/ because data/ depends on nothing of ours.
#ifndef MXMACA_API_DATA_CONFIG_GPT_DATA_CONFIG_H_
#define MXMACA_API_DATA_CONFIG_GPT_DATA_CONFIG_H_

#include "absl/status/statusor.h"
#include "api/args/megatron_args.h"
#include "data/gpt_dataset_builder.h"

namespace mxmaca::api {

// GptDataConfigFromArgs: the dataset config for `args` (parsed; validated or not: a
// missing --global-batch-size falls back to micro batch x data-parallel size). The
// tokenizer's eod and vocabulary size are GPT-2's (50256, 50257) unless
// --tokenizer-type NullTokenizer (eod = --vocab-size, vocabulary --vocab-size + 1, as
// Megatron's _NullTokenizer). Errors (InvalidArgument, naming the flags): no
// --seq-length; neither --train-iters nor --train-samples; no batch size; a --seed
// outside [0, 2^32 - 1] (numpy.random.RandomState's range); --eval-interval < 1;
// malformed data paths (data::ParseDataBlend); --split with per-split data paths
// (Megatron asserts the same); --mock-data with a data path.
absl::StatusOr<data::GptDataConfig> GptDataConfigFromArgs(const MegatronArgs& args);

}  // namespace mxmaca::api

#endif  // MXMACA_API_DATA_CONFIG_GPT_DATA_CONFIG_H_
