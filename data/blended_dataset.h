// data/blended_dataset.h: Megatron-Core's BlendedDataset: samples drawn from several
// datasets in proportion to weights, by the greedy error-minimising order of
// helpers.cpp build_blending_indices (or build_exhaustive_blending_indices when no size
// is given).
//
// Source: megatron/core/datasets/blended_dataset.py and helpers.cpp, core_v0.15.0.
// Unlike Megatron, the blending indices are not cached on disk: building them is
// O(size x datasets) arithmetic with no randomness, cheaper than reading a cache.
#ifndef MXMACA_DATA_BLENDED_DATASET_H_
#define MXMACA_DATA_BLENDED_DATASET_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/gpt_dataset.h"

namespace mxmaca::data {

// BlendingIndices: for blended sample i, which dataset (dataset_index[i], int16 in
// Megatron) and which of its samples (dataset_sample_index[i]).
struct BlendingIndices {
  std::vector<int16_t> dataset_index;
  std::vector<int64_t> dataset_sample_index;
};

// BuildBlendingIndices: helpers.cpp build_blending_indices: for each i in [0, size),
// pick the dataset d maximising weights[d] * max(i, 1) - drawn[d] (first on ties).
// `weights` [k] should already be normalised (BlendedDataset normalises them).
BlendingIndices BuildBlendingIndices(absl::Span<const double> weights, int64_t size);

// BuildExhaustiveBlendingIndices: helpers.cpp build_exhaustive_blending_indices: draws
// exactly sizes[d] samples from each dataset d, in proportion to sizes, by the same
// greedy rule restricted to datasets not yet spent.
BlendingIndices BuildExhaustiveBlendingIndices(absl::Span<const int64_t> sizes);

// BlendedDataset: the blend of `datasets` (all of the same sample_length()).
class BlendedDataset : public SampleDataset {
 public:
  // Create: normalises `weights` (Megatron normalises again here, so weights that were
  // normalised by the builder are normalised twice, as in Megatron) and builds the
  // indices for `size` samples, or exhaustively over every sample of every dataset when
  // size is nullopt. Errors: InvalidArgument if there are no datasets, more than 32766,
  // weights of another count, unequal sample lengths, or if the blend asks a dataset
  // for a sample it does not have (Megatron: "size is improperly bounded" / IndexError).
  static absl::StatusOr<std::unique_ptr<BlendedDataset>> Create(
      std::vector<std::unique_ptr<SampleDataset>> datasets, std::vector<double> weights,
      std::optional<int64_t> size);

  int64_t size() const override { return static_cast<int64_t>(indices_.dataset_index.size()); }
  int64_t sample_length() const override { return datasets_[0]->sample_length(); }
  absl::Status GetSample(int64_t i, absl::Span<int32_t> out) const override;
  std::string Describe() const override;

  const BlendingIndices& indices() const { return indices_; }
  const std::vector<double>& weights() const { return weights_; }
  const SampleDataset& dataset(int d) const { return *datasets_[d]; }
  int num_datasets() const { return static_cast<int>(datasets_.size()); }

 private:
  BlendedDataset() = default;
  std::vector<std::unique_ptr<SampleDataset>> datasets_;
  std::vector<double> weights_;
  BlendingIndices indices_;
};

}  // namespace mxmaca::data

#endif  // MXMACA_DATA_BLENDED_DATASET_H_
