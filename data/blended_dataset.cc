// data/blended_dataset.cc: see blended_dataset.h.
#include "data/blended_dataset.h"

#include <algorithm>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace mxmaca::data {

BlendingIndices BuildBlendingIndices(absl::Span<const double> weights, int64_t size) {
  BlendingIndices out;
  out.dataset_index.resize(size);
  out.dataset_sample_index.resize(size);
  std::vector<int64_t> current(weights.size(), 0);
  for (int64_t i = 0; i < size; ++i) {
    const double x = std::max(static_cast<double>(i), 1.0);
    int64_t best = 0;
    double max_error = weights[0] * x - static_cast<double>(current[0]);
    for (size_t d = 1; d < weights.size(); ++d) {
      const double error = weights[d] * x - static_cast<double>(current[d]);
      if (error > max_error) {
        max_error = error;
        best = static_cast<int64_t>(d);
      }
    }
    out.dataset_index[i] = static_cast<int16_t>(best);
    out.dataset_sample_index[i] = current[best];
    ++current[best];
  }
  return out;
}

BlendingIndices BuildExhaustiveBlendingIndices(absl::Span<const int64_t> sizes) {
  int64_t total = 0;
  std::set<int32_t> unspent;
  for (size_t d = 0; d < sizes.size(); ++d) {
    total += sizes[d];
    // Megatron inserts every dataset; one with no samples could never be spent (and
    // would loop forever), so it is left out here.
    if (sizes[d] > 0) unspent.insert(static_cast<int32_t>(d));
  }
  std::vector<double> weights(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    weights[d] = static_cast<double>(sizes[d]) / static_cast<double>(total);
  }
  std::vector<int64_t> counts(sizes.size(), 0);
  BlendingIndices out;
  out.dataset_index.reserve(total);
  out.dataset_sample_index.reserve(total);
  int64_t i = 0;
  while (!unspent.empty()) {
    const double x = std::max(static_cast<double>(i), 1.0);
    int32_t best = -1;
    double max_error = std::numeric_limits<double>::lowest();
    for (int32_t d : unspent) {
      const double error = weights[d] * x - static_cast<double>(counts[d]);
      if (error > max_error) {
        best = d;
        max_error = error;
      }
    }
    out.dataset_index.push_back(static_cast<int16_t>(best));
    out.dataset_sample_index.push_back(counts[best]);
    ++counts[best];
    if (counts[best] == sizes[best]) unspent.erase(best);
    ++i;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<BlendedDataset>> BlendedDataset::Create(
    std::vector<std::unique_ptr<SampleDataset>> datasets, std::vector<double> weights,
    std::optional<int64_t> size) {
  if (datasets.empty() || datasets.size() >= 32767) {
    return absl::InvalidArgumentError(
        absl::StrCat("a blend needs 1 to 32766 datasets, got ", datasets.size()));
  }
  if (weights.size() != datasets.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("blend of ", datasets.size(), " datasets got ", weights.size(), " weights"));
  }
  for (const auto& d : datasets) {
    if (d->sample_length() != datasets[0]->sample_length()) {
      return absl::InvalidArgumentError("blended datasets have different sample lengths");
    }
  }
  std::unique_ptr<BlendedDataset> blend(new BlendedDataset());
  blend->weights_ = NormalizeWeights(weights);
  if (size.has_value()) {
    blend->indices_ = BuildBlendingIndices(blend->weights_, *size);
  } else {
    std::vector<int64_t> sizes;
    for (const auto& d : datasets) sizes.push_back(d->size());
    blend->indices_ = BuildExhaustiveBlendingIndices(sizes);
  }
  std::vector<int64_t> needed(datasets.size(), 0);
  for (size_t i = 0; i < blend->indices_.dataset_index.size(); ++i) {
    const int d = blend->indices_.dataset_index[i];
    needed[d] = std::max(needed[d], blend->indices_.dataset_sample_index[i] + 1);
  }
  for (size_t d = 0; d < datasets.size(); ++d) {
    if (needed[d] > datasets[d]->size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("BlendedDataset size is improperly bounded: the blend needs ", needed[d],
                       " samples of dataset ", d, " which has ", datasets[d]->size(),
                       " (raise the mid-level dataset surplus)"));
    }
  }
  blend->datasets_ = std::move(datasets);
  return blend;
}

absl::Status BlendedDataset::GetSample(int64_t i, absl::Span<int32_t> out) const {
  if (i < 0 || i >= size()) {
    return absl::OutOfRangeError(
        absl::StrCat("BlendedDataset: sample ", i, " outside [0, ", size(), ")"));
  }
  return datasets_[indices_.dataset_index[i]]->GetSample(indices_.dataset_sample_index[i], out);
}

std::string BlendedDataset::Describe() const {
  std::vector<int64_t> drawn(datasets_.size(), 0);
  for (int16_t d : indices_.dataset_index) ++drawn[d];
  std::string out =
      absl::StrFormat("BlendedDataset: %d samples from %d datasets\n", size(), datasets_.size());
  for (size_t d = 0; d < datasets_.size(); ++d) {
    absl::StrAppendFormat(&out, "  [%d] weight %.6f, %d samples drawn (%.6f)\n", d, weights_[d],
                          drawn[d], size() > 0 ? static_cast<double>(drawn[d]) / size() : 0.0);
    for (absl::string_view line :
         absl::StrSplit(datasets_[d]->Describe(), '\n', absl::SkipEmpty())) {
      absl::StrAppend(&out, "    ", line, "\n");
    }
  }
  return out;
}

}  // namespace mxmaca::data
