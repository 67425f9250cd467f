// data/gpt_dataset.h: Megatron-Core's GPTDataset: train/valid/test splits over the
// sequences of a low-level dataset, the document / sample / shuffle indices, and the
// samples of seq_length + 1 tokens they define.
//
// Source: megatron/core/datasets/gpt_dataset.py (GPTDataset,
// _build_document_sample_shuffle_indices, _get_num_epochs, _build_document_index,
// _build_shuffle_index), helpers.cpp (build_sample_idx), helpers.py (index dtypes),
// blended_megatron_dataset_config.py (parse_and_normalize_split,
// convert_split_vector_to_split_matrix) and blended_megatron_dataset_builder.py
// (_build_megatron_dataset_splits), core_v0.15.0. With the same sequence lengths, seed,
// seq_length and sample count, every index is identical to Megatron's and sample i holds
// the same tokens (add_extra_token_to_sequence = True, drop_last_partial_sequence =
// True: Megatron's defaults).
//
// Terms: a "sequence" is one entry of the .idx (GPTDataset calls it a document); a
// split owns the sequence range [begin, end). An epoch is one pass over that range.
#ifndef MXMACA_DATA_GPT_DATASET_H_
#define MXMACA_DATA_GPT_DATASET_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace mxmaca::data {

// Split: Megatron's Split enum (utils.py); the value is the position in split strings.
enum class Split { kTrain = 0, kValid = 1, kTest = 2 };
inline constexpr int kNumSplits = 3;
// SplitName: "train", "valid", "test" (Split.name).
const char* SplitName(Split split);

// SampleDataset: a finite list of samples, each `sample_length()` token ids (int32).
// Implementations are immutable after construction and safe to read from many threads.
class SampleDataset {
 public:
  virtual ~SampleDataset() = default;
  // size: number of samples.
  virtual int64_t size() const = 0;
  // sample_length: tokens per sample (seq_length + 1).
  virtual int64_t sample_length() const = 0;
  // GetSample: writes sample i's tokens into `out` [sample_length()]. Errors:
  // OutOfRange if i is not in [0, size()); InvalidArgument if out has the wrong size;
  // errors of the token storage.
  virtual absl::Status GetSample(int64_t i, absl::Span<int32_t> out) const = 0;
  // Describe: a few human-readable lines (documents, samples, epochs, cache use) for
  // `mxmaca inspect-data` and logs; each line ends in '\n'. Default: empty.
  virtual std::string Describe() const { return std::string(); }
};

// TokenSource: the low-level dataset a GptDataset samples from (Megatron's
// IndexedDataset or MockGPTLowLevelDataset). Immutable; safe to read from many threads.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // sequence_lengths: [N] int32 tokens per sequence.
  virtual absl::Span<const int32_t> sequence_lengths() const = 0;
  // GetInto: tokens [offset, offset + out.size()) of sequence `seq`. Errors: OutOfRange
  // for a bad range; the storage's own errors.
  virtual absl::Status GetInto(int64_t seq, int64_t offset, absl::Span<int32_t> out) const = 0;
  // path_prefix: the dataset prefix on disk ("" for in-memory and mock sources); it
  // names the dataset in the cache description and locates the default cache.
  virtual std::string path_prefix() const = 0;
};

// OpenIndexedTokenSource: a TokenSource over the Megatron .bin/.idx pair at `prefix`
// (data/indexed_dataset.h). Errors: those of IndexedDataset::Open.
absl::StatusOr<std::shared_ptr<const TokenSource>> OpenIndexedTokenSource(
    const std::string& prefix);

// NumpySum: numpy.sum of a float64 array, bit for bit: numpy's pairwise sum (a plain
// loop under 8 values, 8 accumulators over blocks of up to 128, halves above).
double NumpySum(absl::Span<const double> values);

// NormalizeWeights: Megatron's utils.normalize: w / numpy.sum(w), float64.
std::vector<double> NormalizeWeights(absl::Span<const double> weights);

// SplitBookends: [begin, end) fractions of each split, or nullopt for an empty split
// (Megatron's split_matrix).
using SplitMatrix = std::array<std::optional<std::pair<double, double>>, kNumSplits>;

// ParseSplitMatrix: parse_and_normalize_split + convert_split_vector_to_split_matrix:
// the numbers of `split` (regex [.0-9]+, so "969,30,1", "98 2" and "1,1" all parse;
// missing trailing splits are 0) are normalised to sum 1 (numpy float64 sum) and turned
// into cumulative bookends; a split of weight 0 is nullopt. Errors: InvalidArgument
// naming the string when it has no numbers, more than 3, a token that is not a number,
// or weights summing to 0.
absl::StatusOr<SplitMatrix> ParseSplitMatrix(const std::string& split);

// SplitSequenceRange: [round(b0 * n), round(b1 * n)) with Python's round (half to even),
// as _build_megatron_dataset_splits computes each split's sequence range.
std::pair<int64_t, int64_t> SplitSequenceRange(const std::pair<double, double>& bookends,
                                               int64_t num_sequences);

// GptIndices: the three Megatron indices of one split plus the numbers that shaped them.
struct GptIndices {
  // document_index: [num_epochs * (end - begin)] int32 sequence ids, each epoch's ids
  // shuffled (the last epoch separately when separate_final_epoch).
  std::vector<int32_t> document_index;
  // sample_index: [num_samples + 1, 2] row-major (index into document_index, token
  // offset into that sequence) where each sample starts; row num_samples ends the last.
  std::vector<int64_t> sample_index;
  // shuffle_index: [num_samples] a permutation of [0, num_samples) (two independently
  // shuffled ranges when separate_final_epoch).
  std::vector<int64_t> shuffle_index;
  int64_t num_tokens_per_epoch = 0;
  int64_t num_epochs = 0;
  bool separate_final_epoch = false;
  // num_samples: rows of sample_index - 1 (>= the requested count).
  int64_t num_samples() const { return static_cast<int64_t>(sample_index.size() / 2) - 1; }
};

// BuildSampleIndex: helpers.cpp build_sample_idx with drop_last_partial_sequence = true
// and add_extra_token_to_sequence = 1: [num_samples + 1, 2] where num_samples =
// (num_epochs * tokens_per_epoch - 1) / seq_length. `sizes` [N] are all sequence
// lengths, `document_index` indexes them. Errors: InvalidArgument if seq_length < 2,
// tokens_per_epoch < 2 or the indices are out of range of `sizes`.
absl::StatusOr<std::vector<int64_t>> BuildSampleIndex(absl::Span<const int32_t> sizes,
                                                      absl::Span<const int32_t> document_index,
                                                      int32_t seq_length, int64_t num_epochs,
                                                      int64_t tokens_per_epoch);

// BuildGptIndices: the whole of _build_document_sample_shuffle_indices for sequences
// [begin, end) of `sizes` (all sequence lengths [N]): epochs = smallest e with
// e * tokens_per_epoch >= num_samples * seq_length + 1 (1 when num_samples is nullopt);
// the final epoch is shuffled separately when it contributes fewer than
// int(0.8 * samples_per_epoch) samples; one numpy.random.RandomState(seed) shuffles the
// document index, then the shuffle index. Errors: InvalidArgument when the range is
// empty or holds fewer than 2 tokens, seq_length < 2, num_samples < 0, or the range
// is outside `sizes`.
absl::StatusOr<GptIndices> BuildGptIndices(absl::Span<const int32_t> sizes, int64_t begin,
                                           int64_t end, std::optional<int64_t> num_samples,
                                           int32_t seq_length, uint32_t seed);

// GptDatasetOptions: what identifies one split's dataset (Megatron's config fields).
struct GptDatasetOptions {
  Split split = Split::kTrain;
  // num_samples: samples requested; nullopt builds exactly one epoch.
  std::optional<int64_t> num_samples;
  int32_t seq_length = 0;
  uint32_t seed = 0;
  // split_string / split_matrix: recorded in the cache description only.
  std::string split_string;
  SplitMatrix split_matrix;
  // cache_dir: where indices are cached; "" = Megatron's default
  // "{path_prefix}/cache/GPTDataset_indices" (no cache for sources without a prefix);
  // "none" disables caching.
  std::string cache_dir;
};

// GptDataset: one split of one low-level dataset (Megatron GPTDataset). Sample i is
// the seq_length + 1 tokens that start at sample_index[shuffle_index[i]] and run through
// consecutive entries of document_index, consecutive samples overlapping by one token.
class GptDataset : public SampleDataset {
 public:
  // Build: builds the indices for sequences [begin, end) of `source`, or loads them
  // from the cache. Cached files are `{hash}-GPTDataset-{split}-{description.txt,
  // document_index.npy,sample_index.npy,shuffle_index.npy}` (numpy .npy, Megatron's
  // dtypes). A cache entry is used only if its description matches and every file parses
  // with the expected dtype and shape and holds in-range values; otherwise it is rebuilt.
  // Files are written to temporaries and renamed, the description last. Errors: those of
  // BuildGptIndices; the OS error (with the path) if the cache cannot be written.
  static absl::StatusOr<std::unique_ptr<GptDataset>> Build(
      std::shared_ptr<const TokenSource> source, int64_t begin, int64_t end,
      const GptDatasetOptions& options);

  int64_t size() const override { return indices_.num_samples(); }
  int64_t sample_length() const override { return options_.seq_length + 1; }
  absl::Status GetSample(int64_t i, absl::Span<int32_t> out) const override;
  std::string Describe() const override;

  const GptIndices& indices() const { return indices_; }
  int64_t num_sequences() const { return end_ - begin_; }
  // cache_report: "disabled", "hit <dir>", "built <dir>" or "rebuilt <dir> (<reason>)".
  const std::string& cache_report() const { return cache_report_; }
  // unique_description: the JSON text that keys the cache.
  const std::string& unique_description() const { return description_; }

 private:
  GptDataset() = default;

  std::shared_ptr<const TokenSource> source_;
  int64_t begin_ = 0;
  int64_t end_ = 0;
  GptDatasetOptions options_;
  GptIndices indices_;
  std::string description_;
  std::string cache_report_;
};

}  // namespace mxmaca::data

#endif  // MXMACA_DATA_GPT_DATASET_H_
