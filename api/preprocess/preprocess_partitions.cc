// api/preprocess/preprocess_partitions.cc: partition, encode each, merge with AddIndex.
#include "api/preprocess/preprocess_partitions.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/preprocess/partition_writer.h"
#include "api/preprocess/preprocess_command.h"
#include "api/preprocess/python_glob.h"
#include "base/status_macros.h"
#include "data/indexed_dataset.h"

namespace mxmaca::api {
namespace {

using Clock = std::chrono::steady_clock;

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;  // os.path.exists
}

bool IsEmptyFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0;
}

// Whether `path` is the same file as one of `files` (device and inode).
bool IsOneOf(const std::string& path, const std::vector<std::string>& files) {
  struct stat a, b;
  if (::stat(path.c_str(), &a) != 0) return false;
  for (const std::string& file : files) {
    if (::stat(file.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
      return true;
    }
  }
  return false;
}

// Whether `path` has the form of a partition file of `input`: {name}_{digits}{ext}.
bool LooksLikePartitionFile(const std::string& path, const std::string& input) {
  const auto [name, ext] = SplitExtension(input);
  if (path.size() < name.size() + ext.size() + 2) return false;
  if (path.compare(0, name.size(), name) != 0) return false;
  if (path.compare(path.size() - ext.size(), ext.size(), ext) != 0) return false;
  const std::string middle = path.substr(name.size(), path.size() - name.size() - ext.size());
  return middle.size() >= 2 && middle[0] == '_' &&
         middle.find_first_not_of("0123456789", 1) == std::string::npos;
}

// Removes the per-partition datasets when the run ends, successful or not.
class PartitionOutputs {
 public:
  ~PartitionOutputs() {
    for (const std::string& prefix : prefixes_) {
      std::remove((prefix + ".bin").c_str());
      std::remove((prefix + ".idx").c_str());
    }
  }
  void Add(const std::string& prefix) { prefixes_.push_back(prefix); }

 private:
  std::vector<std::string> prefixes_;
};

}  // namespace

absl::Status PreprocessPartitions(const PreprocessOptions& options, std::FILE* log,
                                  PreprocessStats* stats) {
  const Clock::time_point start = Clock::now();
  const int64_t n = options.partitions;
  if (n < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("PreprocessPartitions: --partitions must be >= 2, got ", n));
  }
  // The output directory before any partition file is written (Megatron finds out only at
  // the merge, after the partitions exist; a rerun would then reuse them).
  {
    const std::filesystem::path dir = std::filesystem::path(options.output_prefix).parent_path();
    std::error_code ec;
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
      return absl::NotFoundError(absl::StrCat("preprocess: the --output-prefix directory ",
                                              dir.string(), " does not exist"));
    }
  }
  std::vector<PartitionNames> names;
  std::vector<std::string> partition_files;
  bool present = true;
  for (int64_t i = 0; i < n; ++i) {
    names.push_back(PartitionNamesFor(options.input, options.output_prefix, i));
    partition_files.push_back(names.back().partition);
    present = present && Exists(names.back().partition);
  }
  if (present) {
    if (log != nullptr) {
      std::fprintf(log,
                   "Partitions already present: reusing %s .. %s as they are (delete them to "
                   "re-partition)\n",
                   partition_files.front().c_str(), partition_files.back().c_str());
    }
  }
  std::vector<std::string> inputs;
  if (!present) {
    for (const std::string& path : PythonGlob(options.input)) {
      // The glob can match this run's own partition files (a pattern such as "kjv*.jsonl"
      // matches "kjv*_0.jsonl"): some are left from an interrupted or other run, and
      // they are about to be rewritten, so they are not inputs (Megatron truncates them
      // and reads them back while writing).
      if (IsOneOf(path, partition_files)) {
        if (log != nullptr) {
          std::fprintf(log, "Skipping %s: a partition file of this run\n", path.c_str());
        }
        continue;
      }
      if (LooksLikePartitionFile(path, options.input) && log != nullptr) {
        std::fprintf(log,
                     "Warning: --input matches %s, which looks like a partition file of an "
                     "earlier run with other --partitions; its lines are read as input\n",
                     path.c_str());
      }
      inputs.push_back(path);
    }
    if (inputs.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "preprocess: --input \"", options.input,
          "\" matches no file (with --partitions ", n, " --input is a glob pattern)"));
    }
  }
  // The tokenizer after the cheap checks above, before any partition file is written.
  MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> tokenizer,
                          BuildPreprocessTokenizer(options));
  const double tokenizer_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!present) {
    if (log != nullptr) {
      const size_t shown = std::min<size_t>(inputs.size(), 5);
      std::string list = absl::StrJoin(inputs.begin(), inputs.begin() + shown, ", ");
      if (shown < inputs.size()) absl::StrAppend(&list, ", ... (", inputs.size(), " in all)");
      std::fprintf(log, "Partitioning %zu file(s) (%s) into %lld partitions%s\n", inputs.size(),
                   list.c_str(), static_cast<long long>(n),
                   options.keep_sequential_samples ? " (sequential blocks)" : " (round-robin)");
    }
    MXMACA_ASSIGN_OR_RETURN(std::vector<int64_t> lines,
                            WritePartitions(inputs, partition_files,
                                            options.keep_sequential_samples));
    if (log != nullptr) {
      for (int64_t i = 0; i < n; ++i) {
        std::fprintf(log, "  %s: %lld lines\n", partition_files[i].c_str(),
                     static_cast<long long>(lines[i]));
      }
    }
  }

  PartitionOutputs partition_outputs;  // removed at the end, as the merge is all we keep
  std::vector<bool> encoded(static_cast<size_t>(n), false);
  PreprocessStats total;
  for (int64_t i = 0; i < n; ++i) {
    if (IsEmptyFile(names[i].partition)) continue;  // its dataset would be empty
    PreprocessOptions part = options;
    part.partitions = 1;
    part.input = names[i].partition;
    part.output_prefix = names[i].output_prefix;
    for (const std::string& key : options.json_keys) {
      partition_outputs.Add(OutputPrefix(part.output_prefix, key));
    }
    PreprocessStats part_stats;
    const bool first = std::find(encoded.begin(), encoded.end(), true) == encoded.end();
    MXMACA_RETURN_IF_ERROR(
        PreprocessFile(part, *tokenizer, log, &part_stats, first ? tokenizer_seconds : 0));
    encoded[i] = true;
    total.documents += part_stats.documents;
    total.tokens += part_stats.tokens;
    total.input_bytes += part_stats.input_bytes;
  }

  const data::DType dtype = data::DTypeForVocab(tokenizer->vocab_size());
  for (const std::string& key : options.json_keys) {
    const std::string prefix = OutputPrefix(options.output_prefix, key);
    MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<data::IndexedDatasetBuilder> builder,
                            data::IndexedDatasetBuilder::Create(prefix, dtype));
    for (int64_t i = 0; i < n; ++i) {
      if (encoded[i]) {
        MXMACA_RETURN_IF_ERROR(builder->AddIndex(OutputPrefix(names[i].output_prefix, key)));
      }
    }
    MXMACA_RETURN_IF_ERROR(builder->Finalize());
    if (log != nullptr) {
      std::fprintf(log, "Merged %lld partitions into %s.{bin,idx}\n", static_cast<long long>(n),
                   prefix.c_str());
    }
  }
  total.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (log != nullptr) {
    std::fprintf(log, "Done (all partitions): %lld documents, %lld tokens in %.3f s\n",
                 static_cast<long long>(total.documents), static_cast<long long>(total.tokens),
                 total.seconds);
    std::fflush(log);
  }
  if (stats != nullptr) *stats = total;
  return absl::OkStatus();
}

}  // namespace mxmaca::api
