// Tests of checkpoint_retention.h: the tracker file, the published iter_* directories, and
// keeping only the newest (Megatron's cleanup_old_non_persistent_checkpoint).
#include "actors/checkpoint/checkpoint_retention.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "actors/checkpoint/checkpoint_format.h"

namespace mxmaca::actors::checkpoint {
namespace {

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

TEST_CASE("ReadTrackerIteration reads Megatron's tracker file") {
  const std::string dir = FreshDir("retention_tracker");
  CHECK(!ReadTrackerIteration(dir + "/missing").value().has_value());
  CHECK(!ReadTrackerIteration(dir).value().has_value());
  Write(dir + "/latest_checkpointed_iteration.txt", "120\n");
  CHECK(ReadTrackerIteration(dir).value() == 120);
  Write(dir + "/latest_checkpointed_iteration.txt", "12x");
  absl::StatusOr<std::optional<int64_t>> bad = ReadTrackerIteration(dir);
  REQUIRE(!bad.ok());
  CHECK(bad.status().code() == absl::StatusCode::kDataLoss);
  CHECK(std::string(bad.status().message()).find("\"12x\"") != std::string::npos);
  Write(dir + "/latest_checkpointed_iteration.txt", "release");
  CHECK(ReadTrackerIteration(dir).status().code() == absl::StatusCode::kUnimplemented);
}

TEST_CASE("RemoveOlderCheckpoints keeps the newest published iterations only") {
  const std::string dir = FreshDir("retention_remove");
  for (const char* name : {"iter_0000004", "iter_0000012", "iter_0000008",
                           "iter_0000016.tmp-1-2-3", "iter_12", "other"}) {
    std::filesystem::create_directories(dir + "/" + name);
    Write(dir + "/" + name + "/metadata.json", "{}");
  }
  Write(dir + "/iter_0000020", "a file, not a checkpoint");
  CHECK(CompleteIterations(dir) == std::vector<int64_t>{4, 8, 12});
  REQUIRE(RemoveOlderCheckpoints(dir, 1).ok());
  CHECK(CompleteIterations(dir) == std::vector<int64_t>{12});
  // A save in progress, unrelated entries and the file stay.
  CHECK(std::filesystem::exists(dir + "/iter_0000016.tmp-1-2-3"));
  CHECK(std::filesystem::exists(dir + "/iter_12"));
  CHECK(std::filesystem::exists(dir + "/other"));
  CHECK(std::filesystem::exists(dir + "/iter_0000020"));
  CHECK(RemoveOlderCheckpoints(dir + "/missing", 1).ok());
  REQUIRE(RemoveOlderCheckpoints(dir, 0).ok());
  CHECK(CompleteIterations(dir).empty());
}

TEST_CASE("ApplySaveRetainInterval follows Megatron's save sequence") {
  // --save-interval 2 --save-retain-interval 4, saves at 2, 4, 6, 8 and a final one at 9:
  // each save removes the one before it unless that is a multiple of 4 -> 4, 8, 9 remain.
  const std::string dir = FreshDir("retention_retain");
  std::optional<int64_t> tracker;
  std::vector<std::string> lines;
  for (int64_t it : {2, 4, 6, 8, 9}) {
    std::filesystem::create_directories(dir + "/" + IterDirName(it));
    const std::optional<int64_t> previous = tracker;
    tracker = it;
    const std::string line = ApplySaveRetainInterval(dir, previous, it, 4);
    if (!line.empty()) lines.push_back(line);
  }
  CHECK(CompleteIterations(dir) == std::vector<int64_t>{4, 8, 9});
  CHECK(lines == std::vector<std::string>{
                     "  successfully deleted checkpoint from iteration       2 at " + dir,
                     "  successfully deleted checkpoint from iteration       6 at " + dir});
  // Nothing to do: no previous save, the same iteration saved again, a retained one.
  CHECK(ApplySaveRetainInterval(dir, std::nullopt, 9, 4).empty());
  CHECK(ApplySaveRetainInterval(dir, 9, 9, 4).empty());
  CHECK(ApplySaveRetainInterval(dir, 8, 9, 4).empty());
  // A symbolic link is left alone.
  std::filesystem::create_directories(dir + "/target");
  std::filesystem::create_directory_symlink(dir + "/target", dir + "/" + IterDirName(10));
  CHECK(ApplySaveRetainInterval(dir, 10, 12, 4).find("symbolic link") != std::string::npos);
  CHECK(std::filesystem::is_symlink(dir + "/" + IterDirName(10)));
}

}  // namespace
}  // namespace mxmaca::actors::checkpoint
