// api/merge_datasets/merge_datasets_command.cc: see merge_datasets_command.h.
#include "api/merge_datasets/merge_datasets_command.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/args/subcommand_flags.h"
#include "base/status_macros.h"
#include "data/indexed_dataset.h"

namespace mxmaca::api {
namespace fs = std::filesystem;
namespace {

constexpr char kUsage[] = "usage: mxmaca merge-datasets --input DIR --output-prefix PREFIX";

}  // namespace

absl::StatusOr<std::vector<std::string>> MergeDatasetPrefixes(const std::string& input_dir) {
  std::error_code ec;
  if (!fs::is_directory(input_dir, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--input ", input_dir, " is not a directory or does not exist"));
  }
  std::set<std::string> names;  // std::string order = Python's sorted() of str here
  for (const fs::directory_entry& e : fs::directory_iterator(input_dir, ec)) {
    if (!e.is_regular_file(ec)) continue;
    const fs::path p = e.path();
    const std::string stem = p.stem().string(), ext = p.extension().string();
    if (names.count(stem)) continue;
    const std::string pair = ext == ".idx" ? ".bin" : ".idx";
    if (!fs::is_regular_file(fs::path(input_dir) / (stem + pair), ec)) {
      return absl::InvalidArgumentError(
          absl::StrCat(pair, " file not provided for ", (fs::path(input_dir) / stem).string()));
    }
    names.insert(stem);
  }
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat("--input ", input_dir, ": ", ec.message()));
  }
  if (names.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--input ", input_dir, " holds no .bin/.idx dataset"));
  }
  std::vector<std::string> out;
  for (const std::string& n : names) out.push_back((fs::path(input_dir) / n).string());
  return out;
}

absl::Status RunMergeDatasets(const std::vector<std::string>& argv) {
  std::string input, output;
  std::vector<std::string> unknown;
  for (FlagCursor c(argv); c.Next();) {
    const std::string& flag = c.flag();
    if (flag == "--multimodal") {
      return absl::InvalidArgumentError(
          "--multimodal: multimodal datasets (sequence modes) are not read by MXMACA");
    }
    std::string* target = flag == "--input"           ? &input
                          : flag == "--output-prefix" ? &output
                                                      : nullptr;
    if (target == nullptr) {
      unknown.push_back(c.arg());
      continue;
    }
    MXMACA_ASSIGN_OR_RETURN(*target, c.Value());
  }
  if (!unknown.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown argument(s) ", absl::StrJoin(unknown, " "), "; ", kUsage));
  }
  if (input.empty() || output.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kUsage, " (--input and --output-prefix are required)"));
  }
  std::error_code ec;
  const fs::path out_dir = fs::path(output).parent_path();
  if (!out_dir.empty() && !fs::is_directory(out_dir, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("--output-prefix ", output, ": ",
                                                   out_dir.string(),
                                                   " is not a directory or does not exist"));
  }
  MXMACA_ASSIGN_OR_RETURN(std::vector<std::string> prefixes, MergeDatasetPrefixes(input));
  std::unique_ptr<data::IndexedDatasetBuilder> builder;
  for (const std::string& prefix : prefixes) {
    MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<data::IndexedDataset> ds,
                            data::IndexedDataset::Open(prefix));
    if (builder == nullptr) {
      MXMACA_ASSIGN_OR_RETURN(builder, data::IndexedDatasetBuilder::Create(output, ds->dtype()));
    }
    const int64_t before_docs = builder->num_documents();
    const int64_t before_seqs = builder->num_sequences();
    absl::Status s = builder->AddIndex(prefix);
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(prefix, ": ", s.message()));
    std::printf("mxmaca merge-datasets: %s: %lld documents, %lld sequences\n", prefix.c_str(),
                static_cast<long long>(builder->num_documents() - before_docs),
                static_cast<long long>(builder->num_sequences() - before_seqs));
  }
  MXMACA_RETURN_IF_ERROR(builder->Finalize());
  std::printf(
      "mxmaca merge-datasets: wrote %s.bin/.idx: %zu datasets, %lld documents, %lld sequences, "
      "%lld bytes of tokens\n",
      output.c_str(), prefixes.size(), static_cast<long long>(builder->num_documents()),
      static_cast<long long>(builder->num_sequences()),
      static_cast<long long>(builder->bytes_written()));
  return absl::OkStatus();
}

}  // namespace mxmaca::api
