// actors/checkpoint/checkpoint_retention.cc: see checkpoint_retention.h.
#include "actors/checkpoint/checkpoint_retention.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "actors/checkpoint/checkpoint_format.h"

namespace mxmaca::actors::checkpoint {

absl::StatusOr<std::optional<int64_t>> ReadTrackerIteration(const std::string& dir) {
  const std::string path = dir + "/latest_checkpointed_iteration.txt";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::optional<int64_t>();
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string value(absl::StripAsciiWhitespace(text.str()));
  if (value == "release") {
    return absl::UnimplementedError(
        absl::StrCat(path, " says \"release\": Megatron release checkpoints are not readable"));
  }
  int64_t iteration = -1;
  if (!absl::SimpleAtoi(value, &iteration) || iteration < 0) {
    return absl::DataLossError(
        absl::StrCat(path, " holds \"", value, "\": expected an iteration number"));
  }
  return std::optional<int64_t>(iteration);
}

std::vector<int64_t> CompleteIterations(const std::string& dir) {
  std::vector<int64_t> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 12 || name.rfind("iter_", 0) != 0 || !entry.is_directory(ec)) continue;
    int64_t iteration = -1;
    const std::string digits = name.substr(5);
    if (!std::all_of(digits.begin(), digits.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) ||
        !absl::SimpleAtoi(digits, &iteration) || IterDirName(iteration) != name) {
      continue;
    }
    out.push_back(iteration);
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::Status RemoveOlderCheckpoints(const std::string& dir, int keep) {
  const std::vector<int64_t> iterations = CompleteIterations(dir);
  const int64_t remove = static_cast<int64_t>(iterations.size()) - std::max(keep, 0);
  for (int64_t i = 0; i < remove; ++i) {
    const std::string path = dir + "/" + IterDirName(iterations[static_cast<size_t>(i)]);
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("removing the old non-persistent checkpoint ", path, ": ", ec.message()));
    }
  }
  return absl::OkStatus();
}

std::string ApplySaveRetainInterval(const std::string& dir, std::optional<int64_t> previous,
                                    int64_t iteration, int64_t retain) {
  if (!previous.has_value() || *previous <= 0 || *previous == iteration || retain <= 0 ||
      *previous % retain == 0) {
    return "";
  }
  const std::filesystem::path path = std::filesystem::path(dir) / IterDirName(*previous);
  std::error_code ec;
  if (std::filesystem::is_symlink(path, ec)) {
    return absl::StrFormat(
        "  skipping deleting checkpoint from iteration %7d at %s since it is a symbolic link",
        *previous, dir);
  }
  std::filesystem::remove_all(path, ec);
  if (ec) {
    return absl::StrFormat(
        "  encountered exception \"%s\" when trying to delete checkpoint from iteration %7d "
        "at %s",
        ec.message(), *previous, dir);
  }
  return absl::StrFormat("  successfully deleted checkpoint from iteration %7d at %s", *previous,
                         dir);
}

}  // namespace mxmaca::actors::checkpoint
