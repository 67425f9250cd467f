// data/gpt_dataset_builder.h: BuildGptDatasets, the train/valid/test datasets of a
// Megatron GPT run from its data flags: Megatron-Core's BlendedMegatronDatasetBuilder
// (blended_megatron_dataset_builder.py, core_v0.15.0) with GPTDataset, BlendedDataset
// and MockGPTDataset.
//
//   --data-path P            one dataset, split by --split
//   --data-path W1 P1 W2 P2  a blend: each dataset split by --split, the blend of each
//                            split drawn by weight
//   --data-path P1 P2        a blend weighted by the datasets' sizes
//   --{train,valid,test}-data-path ...   a separate blend per split (no --split)
//   --mock-data (or nothing) MockGPTDataset with the split "1,1,1"
#ifndef MXMACA_DATA_GPT_DATASET_BUILDER_H_
#define MXMACA_DATA_GPT_DATASET_BUILDER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/gpt_dataset.h"

namespace mxmaca::data {

// GptDataBlend: dataset prefixes and, optionally, one weight per prefix.
struct GptDataBlend {
  std::vector<std::string> prefixes;
  std::optional<std::vector<double>> weights;
};

// ParseDataBlend: Megatron's utils.get_blend_from_list for the words of one
// --*data-path flag: an odd count is a list of prefixes; an even count is
// weight/prefix pairs, unless some "weight" is not a number, in which case all words
// are prefixes. Prefixes are whitespace-stripped. Returns nullopt for no words. Errors:
// InvalidArgument for a negative weight, or if some but not all weights parse.
absl::StatusOr<std::optional<GptDataBlend>> ParseDataBlend(const std::vector<std::string>& words);

// GptDataConfig: what BuildGptDatasets needs (Megatron's GPTDatasetConfig and the
// sample counts of training.py get_train_valid_test_num_samples).
struct GptDataConfig {
  // blend: --data-path. blend_per_split: --train/valid/test-data-path (not with blend).
  std::optional<GptDataBlend> blend;
  std::array<std::optional<GptDataBlend>, kNumSplits> blend_per_split;
  // mock: --mock-data; also implied when there is neither blend nor blend_per_split.
  bool mock = false;
  // split: --split (Megatron's default with --data-path).
  std::string split = "969, 30, 1";
  uint32_t seed = 1234;
  int32_t seq_length = 0;
  // num_samples: samples requested per split (train, valid, test); nullopt = one epoch.
  std::array<std::optional<int64_t>, kNumSplits> num_samples;
  // cache_path: --data-cache-path; "" = "{prefix}/cache/GPTDataset_indices" per dataset.
  std::string cache_path;
  // mid_level_dataset_surplus: --mid-level-dataset-surplus (Megatron default 0.005).
  double mid_level_dataset_surplus = 0.005;
  // eod_token / vocab_size: the tokenizer's end-of-document id and vocabulary size, for
  // the mock dataset (vocab_size 0 = unchecked; else it must exceed 4094 and eod).
  int32_t eod_token = 50256;
  int64_t vocab_size = 0;
  // open_source: opens a prefix (tests substitute in-memory data); null =
  // OpenIndexedTokenSource.
  std::function<absl::StatusOr<std::shared_ptr<const TokenSource>>(const std::string&)> open_source;
};

// GptDatasetSplits: the three datasets; a null pointer for a split that is empty
// (weight 0 in --split, or no --*-data-path for it).
struct GptDatasetSplits {
  std::unique_ptr<SampleDataset> train, valid, test;
};

// BuildGptDatasets: builds (or loads from the index cache) every split. Errors:
// InvalidArgument for an inconsistent config (blend and blend_per_split together,
// weights without a sample count, seq_length < 2, an empty split range, a mock vocab
// too small); those of opening the data and of the index cache.
absl::StatusOr<GptDatasetSplits> BuildGptDatasets(const GptDataConfig& config);

}  // namespace mxmaca::data

#endif  // MXMACA_DATA_GPT_DATASET_BUILDER_H_
