// api/data_config/gpt_data_config.cc: see gpt_data_config.h.
#include "api/data_config/gpt_data_config.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mxmaca::api {

absl::StatusOr<data::GptDataConfig> GptDataConfigFromArgs(const MegatronArgs& args) {
  data::GptDataConfig config;
  MXMACA_ASSIGN_OR_RETURN(config.blend, data::ParseDataBlend(args.data_path));
  MXMACA_ASSIGN_OR_RETURN(config.blend_per_split[0], data::ParseDataBlend(args.train_data_path));
  MXMACA_ASSIGN_OR_RETURN(config.blend_per_split[1], data::ParseDataBlend(args.valid_data_path));
  MXMACA_ASSIGN_OR_RETURN(config.blend_per_split[2], data::ParseDataBlend(args.test_data_path));
  const bool per_split = !args.train_data_path.empty() || !args.valid_data_path.empty() ||
                         !args.test_data_path.empty();
  if (per_split && args.split.has_value()) {
    // BlendedMegatronDatasetConfig: "split and blend_per_split are incompatible".
    return absl::InvalidArgumentError(
        "--split cannot be combined with --train-data-path/--valid-data-path/--test-data-path");
  }
  if (args.mock_data && (config.blend.has_value() || per_split)) {
    return absl::InvalidArgumentError("--mock-data cannot be combined with a data path");
  }
  config.mock = args.mock_data;
  config.split = args.split.value_or("969, 30, 1");
  if (args.seed < 0 || args.seed > 0xffffffffLL) {
    return absl::InvalidArgumentError(
        absl::StrCat("--seed ", args.seed, " is outside [0, 2^32 - 1] (numpy.random.RandomState)"));
  }
  config.seed = static_cast<uint32_t>(args.seed);
  if (!args.seq_length.has_value()) {
    return absl::InvalidArgumentError("--seq-length is required to build GPT datasets");
  }
  config.seq_length = static_cast<int32_t>(*args.seq_length);

  int64_t global_batch = 0;
  if (args.global_batch_size.has_value()) {
    global_batch = *args.global_batch_size;
  } else if (args.micro_batch_size.has_value()) {
    global_batch = *args.micro_batch_size * args.data_parallel_size;
  }
  if (global_batch < 1) {
    return absl::InvalidArgumentError(
        "--global-batch-size (or --micro-batch-size) is required to size the datasets");
  }
  int64_t train_iters = 0;
  if (args.train_samples.has_value()) {
    config.num_samples[0] = *args.train_samples;
    train_iters = *args.train_samples / global_batch;
  } else if (args.train_iters.has_value()) {
    train_iters = *args.train_iters;
    config.num_samples[0] = train_iters * global_batch;
  } else {
    return absl::InvalidArgumentError("one of --train-iters or --train-samples is required");
  }
  if (args.eval_interval.has_value() && *args.eval_interval < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--eval-interval must be at least 1, got ", *args.eval_interval));
  }
  // Megatron's get_train_valid_test_num_samples: one evaluation per interval plus the final
  // one. Without --eval-interval (0.19's default None, where Megatron's division fails) only
  // the final evaluation runs.
  int64_t eval_points = args.eval_interval.has_value() ? train_iters / *args.eval_interval + 1 : 1;
  // --start-eval-at-iter skips start // eval_interval of them (training.py). Megatron can
  // reach 0 here and still run the final evaluation; one is kept for it.
  if (args.eval_interval.has_value() && args.start_eval_at_iter.has_value()) {
    eval_points =
        std::max<int64_t>(1, eval_points - *args.start_eval_at_iter / *args.eval_interval);
  }
  // (core_v0.19.0: validation and test count --eval-global-batch-size samples per iteration.)
  const int64_t eval_batch = args.eval_global_batch_size.value_or(global_batch);
  // --skip-train: one evaluation (training.py: eval_iters = args.eval_iters).
  if (args.skip_train) eval_points = 1;
  config.num_samples[1] = eval_points * args.eval_iters * eval_batch;
  config.num_samples[2] = args.eval_iters * eval_batch;
  config.cache_path = args.data_cache_path.value_or("");
  config.mid_level_dataset_surplus = args.mid_level_dataset_surplus;
  if (args.tokenizer_type.has_value() && *args.tokenizer_type == "NullTokenizer") {
    if (!args.vocab_size.has_value()) {
      return absl::InvalidArgumentError("--tokenizer-type NullTokenizer needs --vocab-size");
    }
    config.eod_token = static_cast<int32_t>(*args.vocab_size);
    config.vocab_size = *args.vocab_size + 1;
  } else {
    config.eod_token = 50256;
    config.vocab_size = 50257;
  }
  return config;
}

}  // namespace mxmaca::api
