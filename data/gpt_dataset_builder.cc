// data/gpt_dataset_builder.cc: see gpt_dataset_builder.h.
#include "data/gpt_dataset_builder.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/blended_dataset.h"
#include "data/mock_dataset.h"

namespace mxmaca::data {
namespace {

using SplitDatasets = std::array<std::unique_ptr<SampleDataset>, kNumSplits>;
using Sizes = std::array<std::optional<int64_t>, kNumSplits>;

// Builder: one BuildGptDatasets call; opens each prefix once.
class Builder {
 public:
  explicit Builder(const GptDataConfig& config) : config_(config) {}

  absl::StatusOr<std::shared_ptr<const TokenSource>> Open(const std::string& prefix) {
    auto it = sources_.find(prefix);
    if (it != sources_.end()) return it->second;
    absl::StatusOr<std::shared_ptr<const TokenSource>> source =
        config_.open_source ? config_.open_source(prefix) : OpenIndexedTokenSource(prefix);
    if (!source.ok()) return source.status();
    sources_[prefix] = *source;
    return *source;
  }

  // _build_megatron_dataset_splits for one low-level dataset.
  absl::StatusOr<SplitDatasets> BuildSplits(std::shared_ptr<const TokenSource> source,
                                            const SplitMatrix& matrix,
                                            const std::string& split_string, const Sizes& sizes) {
    SplitDatasets out;
    const int64_t n = static_cast<int64_t>(source->sequence_lengths().size());
    for (int i = 0; i < kNumSplits; ++i) {
      if (!matrix[i].has_value()) continue;
      const auto [begin, end] = SplitSequenceRange(*matrix[i], n);
      GptDatasetOptions options;
      options.split = static_cast<Split>(i);
      options.num_samples = sizes[i];
      options.seq_length = config_.seq_length;
      options.seed = config_.seed;
      options.split_string = split_string;
      options.split_matrix = matrix;
      options.cache_dir = config_.cache_path;
      auto dataset = GptDataset::Build(source, begin, end, options);
      if (!dataset.ok()) {
        return absl::Status(
            dataset.status().code(),
            absl::StrCat(SplitName(options.split), " split of ",
                         source->path_prefix().empty() ? "mock data" : source->path_prefix(), ": ",
                         dataset.status().message()));
      }
      out[i] = std::move(*dataset);
    }
    return out;
  }

  // The body shared by the --data-path and the per-split cases of
  // _build_blended_dataset_splits. `single_without_weights_only`: the --data-path case
  // builds plain datasets for one prefix only without weights; the per-split case for
  // one prefix whatever the weights.
  absl::StatusOr<SplitDatasets> BuildBlend(const GptDataBlend& blend, const SplitMatrix& matrix,
                                           const std::string& split_string, const Sizes& sizes,
                                           bool single_without_weights_only) {
    std::optional<std::vector<double>> weights;
    if (blend.weights.has_value()) weights = NormalizeWeights(*blend.weights);
    if (blend.prefixes.size() == 1 && (!weights.has_value() || !single_without_weights_only)) {
      MXMACA_ASSIGN_OR_RETURN(auto source, Open(blend.prefixes[0]));
      return BuildSplits(source, matrix, split_string, sizes);
    }
    const size_t k = blend.prefixes.size();
    // _get_size_per_split_per_dataset: target (no surplus) and buffer (with surplus).
    std::vector<Sizes> target(k), buffer(k);
    if (weights.has_value()) {
      for (size_t d = 0; d < k; ++d) {
        for (int i = 0; i < kNumSplits; ++i) {
          if (!matrix[i].has_value()) continue;
          if (!sizes[i].has_value()) {
            return absl::InvalidArgumentError(absl::StrCat(
                "dataset weights need a sample count for the ", SplitName(Split(i)), " split"));
          }
          const double t = std::ceil(static_cast<double>(*sizes[i]) * (*weights)[d]);
          target[d][i] = static_cast<int64_t>(t);
          buffer[d][i] =
              static_cast<int64_t>(std::ceil(t * (1.0 + config_.mid_level_dataset_surplus)));
        }
      }
    }
    std::vector<SplitDatasets> mids;
    for (size_t d = 0; d < k; ++d) {
      MXMACA_ASSIGN_OR_RETURN(auto source, Open(blend.prefixes[d]));
      MXMACA_ASSIGN_OR_RETURN(SplitDatasets splits,
                              BuildSplits(source, matrix, split_string, buffer[d]));
      mids.push_back(std::move(splits));
    }
    SplitDatasets out;
    for (int i = 0; i < kNumSplits; ++i) {
      if (!matrix[i].has_value()) continue;
      std::vector<double> weights_i;
      std::optional<int64_t> size_i;
      std::vector<std::unique_ptr<SampleDataset>> parts;
      for (size_t d = 0; d < k; ++d) parts.push_back(std::move(mids[d][i]));
      if (weights.has_value()) {
        weights_i = *weights;
        int64_t total = 0;
        for (size_t d = 0; d < k; ++d) total += *target[d][i];
        size_i = total;
      } else {
        int64_t total = 0;
        for (const auto& p : parts) {
          weights_i.push_back(static_cast<double>(p->size()));
          total += p->size();
        }
        if (sizes[i].has_value()) size_i = std::min(*sizes[i], total);
      }
      MXMACA_ASSIGN_OR_RETURN(out[i], BlendedDataset::Create(std::move(parts), weights_i, size_i));
    }
    return out;
  }

 private:
  const GptDataConfig& config_;
  std::map<std::string, std::shared_ptr<const TokenSource>> sources_;
};

}  // namespace

absl::StatusOr<std::optional<GptDataBlend>> ParseDataBlend(const std::vector<std::string>& words) {
  if (words.empty()) return std::optional<GptDataBlend>();
  GptDataBlend blend;
  std::vector<std::string> raw_prefixes = words;
  if (words.size() % 2 == 0) {
    std::vector<double> weights;
    int parsed = 0;
    std::vector<std::string> prefixes;
    for (size_t i = 0; i < words.size(); i += 2) {
      // Python float(): surrounding whitespace allowed, the whole rest must parse.
      const std::string w(absl::StripAsciiWhitespace(words[i]));
      char* end = nullptr;
      const double v = std::strtod(w.c_str(), &end);
      if (!w.empty() && end == w.c_str() + w.size()) {
        if (v < 0.0) {
          return absl::InvalidArgumentError(
              absl::StrCat("data path weight \"", words[i], "\" is negative"));
        }
        weights.push_back(v);
        ++parsed;
      }
      prefixes.push_back(words[i + 1]);
    }
    if (parsed == static_cast<int>(words.size() / 2)) {
      blend.weights = std::move(weights);
      raw_prefixes = std::move(prefixes);
    } else if (parsed != 0) {
      return absl::InvalidArgumentError(
          "data path mixes weights and prefixes: give a weight before every prefix or "
          "none at all");
    }
  }
  for (const std::string& p : raw_prefixes) {
    blend.prefixes.emplace_back(absl::StripAsciiWhitespace(p));
  }
  return std::optional<GptDataBlend>(std::move(blend));
}

absl::StatusOr<GptDatasetSplits> BuildGptDatasets(const GptDataConfig& config) {
  if (config.seq_length < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--seq-length must be at least 2, got ", config.seq_length));
  }
  bool any_per_split = false;
  for (const auto& b : config.blend_per_split) any_per_split |= b.has_value();
  if (config.blend.has_value() && any_per_split) {
    return absl::InvalidArgumentError(
        "--data-path cannot be combined with --train-data-path/--valid-data-path/"
        "--test-data-path");
  }
  Builder builder(config);
  SplitDatasets result;
  if (config.mock || (!config.blend.has_value() && !any_per_split)) {
    if (config.vocab_size > 0 && (config.eod_token >= config.vocab_size || config.eod_token < 0)) {
      return absl::InvalidArgumentError(absl::StrCat("mock data's eod token ", config.eod_token,
                                                     " is outside the vocabulary of ",
                                                     config.vocab_size));
    }
    // Megatron-Core 0.19 takes the tokens modulo the tokenizer's vocabulary size.
    auto source = std::make_shared<MockTokenSource>(config.eod_token, config.vocab_size);
    MXMACA_ASSIGN_OR_RETURN(const SplitMatrix matrix, ParseSplitMatrix("1,1,1"));
    GptDataConfig mock_config = config;
    mock_config.cache_path = "none";  // Megatron never caches mock indices.
    Builder mock_builder(mock_config);
    MXMACA_ASSIGN_OR_RETURN(result,
                            mock_builder.BuildSplits(source, matrix, "1,1,1", config.num_samples));
  } else if (config.blend.has_value()) {
    MXMACA_ASSIGN_OR_RETURN(const SplitMatrix matrix, ParseSplitMatrix(config.split));
    MXMACA_ASSIGN_OR_RETURN(
        result, builder.BuildBlend(*config.blend, matrix, config.split, config.num_samples, true));
  } else {
    for (int i = 0; i < kNumSplits; ++i) {
      if (!config.blend_per_split[i].has_value()) continue;
      SplitMatrix matrix;
      matrix[i] = std::make_pair(0.0, 1.0);
      Sizes sizes{int64_t{0}, int64_t{0}, int64_t{0}};
      sizes[i] = config.num_samples[i];
      MXMACA_ASSIGN_OR_RETURN(SplitDatasets splits, builder.BuildBlend(*config.blend_per_split[i],
                                                                       matrix, "", sizes, false));
      result[i] = std::move(splits[i]);
    }
  }
  GptDatasetSplits splits;
  splits.train = std::move(result[0]);
  splits.valid = std::move(result[1]);
  splits.test = std::move(result[2]);
  return splits;
}

}  // namespace mxmaca::data
