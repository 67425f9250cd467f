// data/gpt_dataset.cc: see gpt_dataset.h for the Megatron sources ported.
#include "data/gpt_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "data/gpt_index_cache.h"
#include "data/indexed_dataset.h"
#include "data/numpy_random_state.h"

namespace mxmaca::data {
namespace {

// IndexedTokenSource: TokenSource over an IndexedDataset (sequence lengths copied once).
class IndexedTokenSource : public TokenSource {
 public:
  IndexedTokenSource(std::unique_ptr<IndexedDataset> dataset, std::string prefix)
      : dataset_(std::move(dataset)),
        lengths_(dataset_->sequence_lengths()),
        prefix_(std::move(prefix)) {}
  absl::Span<const int32_t> sequence_lengths() const override { return lengths_; }
  absl::Status GetInto(int64_t seq, int64_t offset, absl::Span<int32_t> out) const override {
    return dataset_->GetInto(seq, offset, out);
  }
  std::string path_prefix() const override { return prefix_; }

 private:
  std::unique_ptr<IndexedDataset> dataset_;
  std::vector<int32_t> lengths_;
  std::string prefix_;
};

// EpochPlan: the numbers _build_document_sample_shuffle_indices derives before it
// draws anything.
struct EpochPlan {
  int64_t tokens_per_epoch = 0;
  int64_t num_epochs = 1;
  bool separate_final_epoch = false;
  int64_t num_samples_sans_final_epoch = 0;
  int64_t num_samples_built = 0;  // rows of sample_index - 1
};

absl::StatusOr<EpochPlan> PlanEpochs(absl::Span<const int32_t> sizes, int64_t begin, int64_t end,
                                     std::optional<int64_t> num_samples, int32_t seq_length) {
  if (seq_length < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("seq_length must be at least 2 (helpers.cpp), got ", seq_length));
  }
  if (begin < 0 || end > static_cast<int64_t>(sizes.size()) || begin >= end) {
    return absl::InvalidArgumentError(absl::StrCat("the split's sequence range [", begin, ", ", end,
                                                   ") is empty or outside the ", sizes.size(),
                                                   " sequences of the dataset"));
  }
  if (num_samples.has_value() && *num_samples < 0) {
    return absl::InvalidArgumentError(absl::StrCat("negative sample count ", *num_samples));
  }
  EpochPlan plan;
  for (int64_t i = begin; i < end; ++i) plan.tokens_per_epoch += sizes[i];
  if (plan.tokens_per_epoch < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequences [", begin, ", ", end, ") hold ", plan.tokens_per_epoch,
                     " tokens; a GPT dataset needs at least 2 (helpers.cpp build_sample_idx)"));
  }
  if (num_samples.has_value()) {
    // _get_num_epochs: smallest e with e * tokens >= num_samples * seq_length + 1.
    const int64_t requested = *num_samples * seq_length + 1;
    plan.num_epochs =
        std::max<int64_t>(1, (requested + plan.tokens_per_epoch - 1) / plan.tokens_per_epoch);
  }
  if (plan.num_epochs > 1) {
    const int64_t sans = ((plan.num_epochs - 1) * plan.tokens_per_epoch - 1) / seq_length;
    const int64_t from_final = *num_samples - sans;
    const int64_t per_epoch = (plan.tokens_per_epoch - 1) / seq_length;
    if (from_final < 0 || from_final > per_epoch + 1) {
      return absl::InternalError(absl::StrCat("epoch arithmetic broke: ", from_final,
                                              " samples from the final epoch of ", per_epoch));
    }
    // threshold = 0.80; Python int() truncates the float product.
    plan.separate_final_epoch =
        from_final < static_cast<int64_t>(0.80 * static_cast<double>(per_epoch));
    plan.num_samples_sans_final_epoch = sans;
  }
  plan.num_samples_built = (plan.num_epochs * plan.tokens_per_epoch - 1) / seq_length;
  return plan;
}

// _build_document_index.
std::vector<int32_t> BuildDocumentIndex(int64_t begin, int64_t end, int64_t num_epochs,
                                        NumpyRandomState* rs, bool separate_final_epoch) {
  if (!separate_final_epoch || num_epochs == 1) {
    std::vector<int32_t> index;
    index.reserve(num_epochs * (end - begin));
    for (int64_t e = 0; e < num_epochs; ++e) {
      for (int64_t d = begin; d < end; ++d) index.push_back(static_cast<int32_t>(d));
    }
    rs->Shuffle(absl::MakeSpan(index));
    return index;
  }
  std::vector<int32_t> first = BuildDocumentIndex(begin, end, num_epochs - 1, rs, false);
  std::vector<int32_t> last = BuildDocumentIndex(begin, end, 1, rs, false);
  first.insert(first.end(), last.begin(), last.end());
  return first;
}

// _build_shuffle_index.
std::vector<int64_t> BuildShuffleIndex(int64_t num_samples, int64_t total_size,
                                       NumpyRandomState* rs) {
  std::vector<int64_t> index(num_samples);
  std::iota(index.begin(), index.end(), int64_t{0});
  rs->Shuffle(absl::MakeSpan(index));
  if (num_samples == total_size) return index;
  std::vector<int64_t> last(total_size - num_samples);
  std::iota(last.begin(), last.end(), num_samples);
  rs->Shuffle(absl::MakeSpan(last));
  index.insert(index.end(), last.begin(), last.end());
  return index;
}

// helpers.py: int32 sample index unless a document-index position or a length needs more.
NpyDtype SampleIndexDtype(absl::Span<const int32_t> sizes, int64_t document_index_size) {
  int64_t max_value = document_index_size;
  for (int32_t s : sizes) max_value = std::max<int64_t>(max_value, s);
  return max_value <= std::numeric_limits<int32_t>::max() ? NpyDtype::kInt32 : NpyDtype::kInt64;
}

// _build_shuffle_index: uint32 unless total_size >= 2^32 - 2.
NpyDtype ShuffleIndexDtype(int64_t total_size) {
  return total_size >= static_cast<int64_t>(std::numeric_limits<uint32_t>::max()) - 1
             ? NpyDtype::kInt64
             : NpyDtype::kUint32;
}

// LoadCachedIndices: reads and checks one cache entry; any problem is returned as a
// status whose message becomes the "rebuilt (...)" reason.
absl::StatusOr<GptIndices> LoadCachedIndices(const std::string& base,
                                             const std::string& description,
                                             absl::Span<const int32_t> sizes, int64_t begin,
                                             int64_t end, const EpochPlan& plan) {
  auto text = ReadWholeFile(base + "description.txt");
  if (!text.ok()) return text.status();
  if (*text != description) {
    return absl::DataLossError(base + "description.txt differs from this configuration");
  }
  auto doc = ReadNpy(base + "document_index.npy");
  if (!doc.ok()) return doc.status();
  auto sample = ReadNpy(base + "sample_index.npy");
  if (!sample.ok()) return sample.status();
  auto shuffle = ReadNpy(base + "shuffle_index.npy");
  if (!shuffle.ok()) return shuffle.status();

  const int64_t doc_len = plan.num_epochs * (end - begin);
  const int64_t rows = plan.num_samples_built + 1;
  auto fail = [&](const std::string& file, const std::string& why) {
    return absl::DataLossError(absl::StrCat(base, file, ": ", why));
  };
  if (doc->dtype != NpyDtype::kInt32 || doc->shape != std::vector<int64_t>{doc_len}) {
    return fail("document_index.npy", absl::StrCat("expected <i4 of shape (", doc_len, ",)"));
  }
  if (sample->dtype != SampleIndexDtype(sizes, doc_len) ||
      sample->shape != std::vector<int64_t>{rows, 2}) {
    return fail("sample_index.npy",
                absl::StrCat("expected ", NpyDescr(SampleIndexDtype(sizes, doc_len)), " of shape (",
                             rows, ", 2)"));
  }
  if (shuffle->dtype != ShuffleIndexDtype(rows - 1) ||
      shuffle->shape != std::vector<int64_t>{rows - 1}) {
    return fail("shuffle_index.npy",
                absl::StrCat("expected ", NpyDescr(ShuffleIndexDtype(rows - 1)), " of shape (",
                             rows - 1, ",)"));
  }
  GptIndices indices;
  indices.document_index.reserve(doc_len);
  for (int64_t i = 0; i < doc_len; ++i) {
    const int64_t v = doc->values[i];
    if (v < begin || v >= end) {
      return fail("document_index.npy",
                  absl::StrCat("entry ", i, " = ", v, " outside [", begin, ", ", end, ")"));
    }
    indices.document_index.push_back(static_cast<int32_t>(v));
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t d = sample->values[2 * r];
    const int64_t off = sample->values[2 * r + 1];
    const bool in_range =
        d >= 0 && d < doc_len && off >= 0 && off <= sizes[indices.document_index[d]];
    const bool ordered = r == 0 || d > sample->values[2 * r - 2] ||
                         (d == sample->values[2 * r - 2] && off > sample->values[2 * r - 1]);
    if (!in_range || !ordered || (r == 0 && (d != 0 || off != 0))) {
      return fail("sample_index.npy", absl::StrCat("row ", r, " = (", d, ", ", off,
                                                   ") is out of range or out of order"));
    }
  }
  std::vector<bool> seen(rows - 1, false);
  for (int64_t i = 0; i < rows - 1; ++i) {
    const int64_t v = shuffle->values[i];
    if (v < 0 || v >= rows - 1 || seen[v]) {
      return fail("shuffle_index.npy",
                  absl::StrCat("entry ", i, " = ", v, " breaks the permutation"));
    }
    seen[v] = true;
  }
  indices.sample_index = std::move(sample->values);
  indices.shuffle_index = std::move(shuffle->values);
  indices.num_tokens_per_epoch = plan.tokens_per_epoch;
  indices.num_epochs = plan.num_epochs;
  indices.separate_final_epoch = plan.separate_final_epoch;
  return indices;
}

absl::Status SaveIndices(const std::string& dir, const std::string& base,
                         const std::string& description, absl::Span<const int32_t> sizes,
                         const GptIndices& indices) {
  MXMACA_RETURN_IF_ERROR(MakeDirs(dir));
  const int64_t doc_len = static_cast<int64_t>(indices.document_index.size());
  std::vector<int64_t> doc(indices.document_index.begin(), indices.document_index.end());
  MXMACA_RETURN_IF_ERROR(
      WriteNpyAtomic(base + "document_index.npy", NpyDtype::kInt32, {doc_len}, doc));
  const int64_t rows = indices.num_samples() + 1;
  MXMACA_RETURN_IF_ERROR(WriteNpyAtomic(base + "sample_index.npy", SampleIndexDtype(sizes, doc_len),
                                        {rows, 2}, indices.sample_index));
  MXMACA_RETURN_IF_ERROR(WriteNpyAtomic(base + "shuffle_index.npy", ShuffleIndexDtype(rows - 1),
                                        {rows - 1}, indices.shuffle_index));
  // The description goes last: its presence marks a complete entry.
  return WriteFileAtomic(base + "description.txt", description);
}

nlohmann::json SplitMatrixJson(const SplitMatrix& matrix) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& bookends : matrix) {
    if (bookends.has_value()) {
      out.push_back({bookends->first, bookends->second});
    } else {
      out.push_back(nullptr);
    }
  }
  return out;
}

// numpy pairwise_sum for float64 (numpy/core/src/umath/loops_utils.h.src).
double PairwiseSum(const double* a, int64_t n) {
  if (n < 8) {
    double res = 0.;
    for (int64_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    int64_t i;
    for (i = 8; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  int64_t n2 = n / 2;
  n2 -= n2 % 8;
  return PairwiseSum(a, n2) + PairwiseSum(a + n2, n - n2);
}

}  // namespace

const char* SplitName(Split split) {
  switch (split) {
    case Split::kTrain:
      return "train";
    case Split::kValid:
      return "valid";
    case Split::kTest:
      return "test";
  }
  return "?";
}

double NumpySum(absl::Span<const double> values) {
  // add.reduce of a contiguous float64 array is one pairwise sum over all of it
  // (checked against numpy 1.24 in gpt_dataset_test.cc).
  return PairwiseSum(values.data(), static_cast<int64_t>(values.size()));
}

std::vector<double> NormalizeWeights(absl::Span<const double> weights) {
  const double total = NumpySum(weights);
  std::vector<double> out;
  out.reserve(weights.size());
  for (double w : weights) out.push_back(w / total);
  return out;
}

absl::StatusOr<std::shared_ptr<const TokenSource>> OpenIndexedTokenSource(
    const std::string& prefix) {
  auto dataset = IndexedDataset::Open(prefix);
  if (!dataset.ok()) return dataset.status();
  return std::shared_ptr<const TokenSource>(
      std::make_shared<IndexedTokenSource>(std::move(*dataset), prefix));
}

absl::StatusOr<SplitMatrix> ParseSplitMatrix(const std::string& split) {
  // re.findall(r"[.0-9]+", split), then float() of each.
  std::vector<double> vector;
  for (size_t i = 0; i < split.size();) {
    const auto is_num = [](char c) { return c == '.' || (c >= '0' && c <= '9'); };
    if (!is_num(split[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < split.size() && is_num(split[j])) ++j;
    const std::string token = split.substr(i, j - i);
    char* parse_end = nullptr;
    const double v = std::strtod(token.c_str(), &parse_end);
    if (parse_end != token.c_str() + token.size() || token == ".") {
      return absl::InvalidArgumentError(absl::StrCat("--split \"", split, "\": \"", token,
                                                     "\" at character ", i, " is not a number"));
    }
    vector.push_back(v);
    i = j;
  }
  if (vector.empty() || vector.size() > kNumSplits) {
    return absl::InvalidArgumentError(
        absl::StrCat("--split \"", split,
                     "\": expected 1 to 3 weights (train, valid, test), found ", vector.size()));
  }
  vector.resize(kNumSplits, 0.0);
  if (NumpySum(vector) <= 0.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--split \"", split, "\": the weights sum to 0"));
  }
  vector = NormalizeWeights(vector);
  // convert_split_vector_to_split_matrix with vector_b = vector_a.
  SplitMatrix matrix;
  double start = 0.0;
  for (int i = 0; i < kNumSplits; ++i) {
    const double stop = start + vector[i];
    if (stop <= start) {
      matrix[i] = std::nullopt;
    } else {
      matrix[i] = std::make_pair(start, stop);
    }
    start = stop;
  }
  return matrix;
}

std::pair<int64_t, int64_t> SplitSequenceRange(const std::pair<double, double>& bookends,
                                               int64_t num_sequences) {
  const double n = static_cast<double>(num_sequences);
  // Python round(): half to even, as nearbyint in the default rounding mode.
  return {static_cast<int64_t>(std::nearbyint(bookends.first * n)),
          static_cast<int64_t>(std::nearbyint(bookends.second * n))};
}

absl::StatusOr<std::vector<int64_t>> BuildSampleIndex(absl::Span<const int32_t> sizes,
                                                      absl::Span<const int32_t> document_index,
                                                      int32_t seq_length, int64_t num_epochs,
                                                      int64_t tokens_per_epoch) {
  if (seq_length < 2 || num_epochs < 1 || tokens_per_epoch < 2 || document_index.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "build_sample_idx needs seq_length > 1, num_epochs > 0, tokens_per_epoch > 1 and "
        "documents; got ",
        seq_length, ", ", num_epochs, ", ", tokens_per_epoch, ", ", document_index.size()));
  }
  for (int32_t d : document_index) {
    if (d < 0 || d >= static_cast<int64_t>(sizes.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("document index entry ", d, " outside the ", sizes.size(), " sequences"));
    }
  }
  const int64_t num_samples = (num_epochs * tokens_per_epoch - 1) / seq_length;
  std::vector<int64_t> sample_index(2 * (num_samples + 1));
  const int64_t last = static_cast<int64_t>(document_index.size()) - 1;
  int64_t document_idx_index = 0;
  int64_t doc_offset = 0;
  sample_index[0] = 0;
  sample_index[1] = 0;
  for (int64_t row = 1; row <= num_samples; ++row) {
    int64_t remaining = static_cast<int64_t>(seq_length) + 1;
    while (remaining != 0) {
      const int64_t document_length = sizes[document_index[document_idx_index]] - doc_offset;
      remaining -= document_length;
      if (remaining <= 0) {
        doc_offset += remaining + document_length - 1;
        remaining = 0;
      } else {
        if (document_idx_index == last) {
          doc_offset = sizes[document_index[document_idx_index]] - 1;
          break;
        }
        ++document_idx_index;
        doc_offset = 0;
      }
    }
    sample_index[2 * row] = document_idx_index;
    sample_index[2 * row + 1] = doc_offset;
  }
  return sample_index;
}

absl::StatusOr<GptIndices> BuildGptIndices(absl::Span<const int32_t> sizes, int64_t begin,
                                           int64_t end, std::optional<int64_t> num_samples,
                                           int32_t seq_length, uint32_t seed) {
  MXMACA_ASSIGN_OR_RETURN(const EpochPlan plan,
                          PlanEpochs(sizes, begin, end, num_samples, seq_length));
  NumpyRandomState rs(seed);
  GptIndices indices;
  indices.num_tokens_per_epoch = plan.tokens_per_epoch;
  indices.num_epochs = plan.num_epochs;
  indices.separate_final_epoch = plan.separate_final_epoch;
  indices.document_index =
      BuildDocumentIndex(begin, end, plan.num_epochs, &rs, plan.separate_final_epoch);
  MXMACA_ASSIGN_OR_RETURN(indices.sample_index,
                          BuildSampleIndex(sizes, indices.document_index, seq_length,
                                           plan.num_epochs, plan.tokens_per_epoch));
  const int64_t total = indices.num_samples();
  indices.shuffle_index = BuildShuffleIndex(
      plan.separate_final_epoch ? plan.num_samples_sans_final_epoch : total, total, &rs);
  return indices;
}

absl::StatusOr<std::unique_ptr<GptDataset>> GptDataset::Build(
    std::shared_ptr<const TokenSource> source, int64_t begin, int64_t end,
    const GptDatasetOptions& options) {
  const absl::Span<const int32_t> sizes = source->sequence_lengths();
  MXMACA_ASSIGN_OR_RETURN(const EpochPlan plan,
                          PlanEpochs(sizes, begin, end, options.num_samples, options.seq_length));
  std::unique_ptr<GptDataset> ds(new GptDataset());
  ds->source_ = std::move(source);
  ds->begin_ = begin;
  ds->end_ = end;
  ds->options_ = options;

  nlohmann::ordered_json desc;
  desc["class"] = "GPTDataset";
  desc["format"] = "mxmaca-gpt-indices-1";
  desc["dataset_path"] = ds->source_->path_prefix();
  desc["num_sequences_in_dataset"] = sizes.size();
  desc["sequence_range"] = {begin, end};
  desc["num_tokens_in_range"] = plan.tokens_per_epoch;
  if (options.num_samples.has_value()) {
    desc["num_samples"] = *options.num_samples;
  } else {
    desc["num_samples"] = nullptr;
  }
  desc["index_split"] = SplitName(options.split);
  desc["random_seed"] = options.seed;
  desc["sequence_length"] = options.seq_length;
  desc["split"] = options.split_string;
  desc["split_matrix"] = SplitMatrixJson(options.split_matrix);
  desc["add_extra_token_to_sequence"] = true;
  desc["drop_last_partial_sequence"] = true;
  ds->description_ = desc.dump(4);

  std::string cache_dir = options.cache_dir;
  if (cache_dir.empty() && !ds->source_->path_prefix().empty()) {
    cache_dir = ds->source_->path_prefix() + "/cache/GPTDataset_indices";
  }
  if (cache_dir.empty() || cache_dir == "none") {
    MXMACA_ASSIGN_OR_RETURN(ds->indices_, BuildGptIndices(sizes, begin, end, options.num_samples,
                                                          options.seq_length, options.seed));
    ds->cache_report_ = "disabled";
    return ds;
  }
  const std::string base = absl::StrCat(cache_dir, "/", Fnv1a64Hex(ds->description_),
                                        "-GPTDataset-", SplitName(options.split), "-");
  auto cached = LoadCachedIndices(base, ds->description_, sizes, begin, end, plan);
  if (cached.ok()) {
    ds->indices_ = std::move(*cached);
    ds->cache_report_ = "hit " + cache_dir;
    return ds;
  }
  MXMACA_ASSIGN_OR_RETURN(ds->indices_, BuildGptIndices(sizes, begin, end, options.num_samples,
                                                        options.seq_length, options.seed));
  const absl::Status saved = SaveIndices(cache_dir, base, ds->description_, sizes, ds->indices_);
  if (!saved.ok()) {
    // As Megatron: failing to write the cache is an error, with a way out.
    return absl::Status(saved.code(),
                        absl::StrCat("cannot write the GPT dataset index cache: ", saved.message(),
                                     "; pass --data-cache-path with a writable directory"));
  }
  if (absl::IsNotFound(cached.status())) {
    ds->cache_report_ = "built " + cache_dir;
  } else {
    ds->cache_report_ = absl::StrCat("rebuilt ", cache_dir, " (", cached.status().message(), ")");
  }
  return ds;
}

absl::Status GptDataset::GetSample(int64_t i, absl::Span<int32_t> out) const {
  if (i < 0 || i >= size()) {
    return absl::OutOfRangeError(absl::StrCat("GPTDataset ", SplitName(options_.split), ": sample ",
                                              i, " outside [0, ", size(), ")"));
  }
  if (static_cast<int64_t>(out.size()) != sample_length()) {
    return absl::InvalidArgumentError(absl::StrCat("GetSample: output holds ", out.size(),
                                                   " tokens, a sample is ", sample_length()));
  }
  const absl::Span<const int32_t> sizes = source_->sequence_lengths();
  const int64_t j = indices_.shuffle_index[i];
  const int64_t beg = indices_.sample_index[2 * j];
  const int64_t beg_offset = indices_.sample_index[2 * j + 1];
  const int64_t last = indices_.sample_index[2 * j + 2];
  const int64_t last_offset = indices_.sample_index[2 * j + 3];
  int64_t pos = 0;
  for (int64_t k = beg; k <= last; ++k) {
    const int32_t doc = indices_.document_index[k];
    const int64_t offset = k == beg ? beg_offset : 0;
    const int64_t length = k < last ? sizes[doc] - offset : last_offset + 1 - offset;
    if (length < 0 || pos + length > static_cast<int64_t>(out.size())) {
      return absl::InternalError(
          absl::StrCat("sample ", i, " overruns its ", out.size(), " tokens at sequence ", doc));
    }
    MXMACA_RETURN_IF_ERROR(source_->GetInto(doc, offset, out.subspan(pos, length)));
    pos += length;
  }
  if (pos != static_cast<int64_t>(out.size())) {
    return absl::InternalError(
        absl::StrCat("sample ", i, " holds ", pos, " tokens, expected ", out.size()));
  }
  return absl::OkStatus();
}

std::string GptDataset::Describe() const {
  std::string out = absl::StrFormat(
      "GPTDataset %s: %s sequences [%d, %d) (%d sequences, %d tokens per epoch)\n",
      SplitName(options_.split),
      source_->path_prefix().empty() ? std::string("(in memory)") : source_->path_prefix(), begin_,
      end_, end_ - begin_, indices_.num_tokens_per_epoch);
  absl::StrAppendFormat(&out, "  samples: %d (requested %s), epochs: %d%s\n", size(),
                        options_.num_samples.has_value() ? absl::StrCat(*options_.num_samples)
                                                         : std::string("one epoch"),
                        indices_.num_epochs,
                        indices_.separate_final_epoch ? " (final epoch shuffled separately)" : "");
  absl::StrAppend(&out, "  index cache: ", cache_report_, "\n");
  return out;
}

}  // namespace mxmaca::data
