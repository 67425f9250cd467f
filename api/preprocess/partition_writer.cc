// api/preprocess/partition_writer.cc: Megatron's partition files (preprocess_data.py main).
#include "api/preprocess/partition_writer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/jsonl_reader.h"

namespace mxmaca::api {
namespace {

absl::Status OsError(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// Checks that `path` is a readable regular file that preprocess can take; sets *empty
// when it has no bytes (the line reader refuses empty files; here they hold 0 lines).
absl::Status CheckInput(const std::string& path, bool* empty) {
  if (absl::EndsWith(path, ".gz")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "preprocess: --input file ", path,
        " is gzip-compressed, which MXMACA does not read (decompress it first: gunzip -k)"));
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? absl::NotFoundError(absl::StrCat("cannot open ", path, ": ",
                                                              std::strerror(errno)))
                           : OsError("cannot open", path);
  }
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("preprocess: --input matched ", path, ", which is a directory"));
  }
  *empty = S_ISREG(st.st_mode) && st.st_size == 0;
  return absl::OkStatus();
}

bool IsBlank(const std::string& line) {
  return line.find_first_not_of(" \t\r\n") == std::string::npos;
}

// Calls on_line(line, file, line_number) for every line of every input, in order.
template <typename OnLine>
absl::Status ForEachLine(const std::vector<std::string>& inputs, OnLine on_line) {
  std::string line;
  for (const std::string& input : inputs) {
    bool empty = false;
    MXMACA_RETURN_IF_ERROR(CheckInput(input, &empty));
    if (empty) continue;
    MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<data::JsonlLineReader> reader,
                            data::JsonlLineReader::Open(input));
    while (true) {
      MXMACA_ASSIGN_OR_RETURN(bool more, reader->Next(&line));
      if (!more) break;
      MXMACA_RETURN_IF_ERROR(on_line(line, input, reader->line_number()));
    }
  }
  return absl::OkStatus();
}

// The open temporary partition files; removed unless Commit() renamed them.
class TempFiles {
 public:
  explicit TempFiles(const std::vector<std::string>& finals) : finals_(finals) {}
  ~TempFiles() {
    for (size_t i = 0; i < files_.size(); ++i) {
      if (files_[i] != nullptr) std::fclose(files_[i]);
      if (!committed_) std::remove(Temp(i).c_str());
    }
  }
  absl::Status Open() {
    for (size_t i = 0; i < finals_.size(); ++i) {
      files_.push_back(std::fopen(Temp(i).c_str(), "wb"));
      if (files_.back() == nullptr) return OsError("cannot write partition file", Temp(i));
    }
    return absl::OkStatus();
  }
  absl::Status Write(size_t i, const std::string& line) {
    if (std::fwrite(line.data(), 1, line.size(), files_[i]) != line.size() ||
        std::fputc('\n', files_[i]) == EOF) {
      return OsError("cannot write partition file", Temp(i));
    }
    return absl::OkStatus();
  }
  absl::Status Commit() {
    for (size_t i = 0; i < files_.size(); ++i) {
      const int rc = std::fclose(files_[i]);
      files_[i] = nullptr;
      if (rc != 0) return OsError("cannot write partition file", Temp(i));
    }
    for (size_t i = 0; i < files_.size(); ++i) {
      if (std::rename(Temp(i).c_str(), finals_[i].c_str()) != 0) {
        return OsError("cannot rename partition file to", finals_[i]);
      }
    }
    committed_ = true;
    return absl::OkStatus();
  }

 private:
  std::string Temp(size_t i) const { return finals_[i] + ".partial"; }
  std::vector<std::string> finals_;
  std::vector<std::FILE*> files_;
  bool committed_ = false;
};

}  // namespace

std::pair<std::string, std::string> SplitExtension(const std::string& path) {
  const size_t sep = path.rfind('/');
  const size_t dot = path.rfind('.');
  const size_t name_start = sep == std::string::npos ? 0 : sep + 1;
  if (dot == std::string::npos || dot < name_start) return {path, ""};
  for (size_t i = name_start; i < dot; ++i) {
    if (path[i] != '.') return {path.substr(0, dot), path.substr(dot)};
  }
  return {path, ""};
}

PartitionNames PartitionNamesFor(const std::string& input, const std::string& output_prefix,
                                 int64_t index) {
  const auto [name, ext] = SplitExtension(input);
  return {absl::StrCat(name, "_", index, ext), absl::StrCat(output_prefix, "_", index)};
}

absl::StatusOr<std::vector<int64_t>> WritePartitions(const std::vector<std::string>& inputs,
                                                     const std::vector<std::string>& partitions,
                                                     bool keep_sequential) {
  const int64_t n = static_cast<int64_t>(partitions.size());
  if (n < 2) return absl::InvalidArgumentError("WritePartitions: needs at least 2 partitions");
  // Megatron counts the lines first with --keep-sequential-samples.
  int64_t total = 0;
  if (keep_sequential) {
    MXMACA_RETURN_IF_ERROR(
        ForEachLine(inputs, [&total](const std::string&, const std::string&, int64_t) {
          ++total;
          return absl::OkStatus();
        }));
  }
  const int64_t block = std::max<int64_t>(1, (total + n - 1) / n);  // ceil(total / N)
  TempFiles files(partitions);
  MXMACA_RETURN_IF_ERROR(files.Open());
  std::vector<int64_t> lines(static_cast<size_t>(n), 0);
  int64_t index = 0, count = 0;
  MXMACA_RETURN_IF_ERROR(ForEachLine(
      inputs, [&](const std::string& line, const std::string& file, int64_t line_number) {
        if (IsBlank(line)) {
          return absl::InvalidArgumentError(absl::StrCat(
              file, ":", line_number,
              ": blank line, expected a JSON object (Megatron's json.loads rejects it too)"));
        }
        if (index >= n) {
          return absl::FailedPreconditionError(
              absl::StrCat("preprocess: ", file, " changed while it was being partitioned"));
        }
        MXMACA_RETURN_IF_ERROR(files.Write(static_cast<size_t>(index), line));
        ++lines[static_cast<size_t>(index)];
        if (keep_sequential) {
          if (++count % block == 0) ++index;
        } else {
          index = (index + 1) % n;
        }
        return absl::OkStatus();
      }));
  if (std::all_of(lines.begin(), lines.end(), [](int64_t l) { return l == 0; })) {
    return absl::InvalidArgumentError(
        "preprocess: the --input files hold no lines (expected JSON lines)");
  }
  MXMACA_RETURN_IF_ERROR(files.Commit());
  return lines;
}

}  // namespace mxmaca::api
