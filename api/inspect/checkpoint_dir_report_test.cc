// api/inspect/checkpoint_dir_report_test.cc: `mxmaca inspect-checkpoint` on directories
// built here with the checkpoint writer: complete and half-written iterations, the tracker,
// the --save lock (held, left by a dead job, free) and the temp dir of a killed save.
#include "api/inspect/inspect_checkpoint_command.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "actors/checkpoint/checkpoint_writer.h"
#include "actors/checkpoint/save_lock.h"

namespace mxmaca::api {
namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
namespace ckpt = actors::checkpoint;

std::string FreshDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string templ = std::string(base != nullptr ? base : "/tmp") + "/inspect_XXXXXX";
  REQUIRE(::mkdtemp(templ.data()) != nullptr);
  return templ;
}

const std::vector<float> kValues = {1, 2, 3, 4};

void Save(const std::string& dir, int64_t it) {
  auto w = ckpt::CheckpointWriter::Begin(dir, it);
  REQUIRE(w.ok());
  REQUIRE(w->WriteShard("tp0", {{"model/w", {2, 2}, {0, 0}, {2, 2}, kValues.data()}}).ok());
  REQUIRE(w->Commit({{"seed", 1}}, {{"it", it}}).ok());
}

std::string Inspect(const std::string& dir) {
  std::ostringstream out;
  absl::Status s = RunInspectCheckpoint({"--load", dir}, out);
  INFO(s.ToString());
  REQUIRE(s.ok());
  return out.str();
}

TEST_CASE("iterations, tracker, a held lock, then a dead job's lock and temp dir") {
  const std::string dir = FreshDir();
  Save(dir, 10);
  Save(dir, 20);
  fs::create_directory(dir + "/iter_0000030");  // half-written
  {
    auto lock = ckpt::SaveLock::Acquire(dir);
    REQUIRE(lock.ok());
    const std::string text = Inspect(dir);
    CHECK_THAT(text, Contains("tracker latest_checkpointed_iteration.txt: iteration 20\n"));
    CHECK_THAT(text, Contains("iterations: 3\n"));
    CHECK_THAT(text, Contains("  iter_0000010  complete, 1 shard file, "));
    CHECK_THAT(text, Contains("  <- latest\n"));
    CHECK_THAT(text, Contains("  iter_0000030  half-written (no metadata.json), 0 shard files"));
    CHECK_THAT(text, Contains(absl::StrCat("save lock mxmaca-save.lock: held by a running job "
                                           "(host ")));
    CHECK_THAT(text, Contains(absl::StrCat("pid ", ::getpid())));
    CHECK_THAT(text, Contains("temp entries (saves that did not commit): 0\n"));
  }
  // A job killed mid-save, holding the lock: both are left behind.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto lock = ckpt::SaveLock::Acquire(dir);
    auto w = ckpt::CheckpointWriter::Begin(dir, 40);
    if (!lock.ok() || !w.ok()) ::_exit(2);
    ::raise(SIGKILL);
  }
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  const std::string text = Inspect(dir);
  CHECK_THAT(text, Contains(absl::StrCat("save lock mxmaca-save.lock: free; last held by a job "
                                         "that is gone (host ")));
  CHECK_THAT(text, Contains(absl::StrCat("pid ", child)));
  CHECK_THAT(text, Contains("temp entries (saves that did not commit): 1\n"));
  CHECK_THAT(text, Contains(absl::StrCat("  iter_0000040.tmp-", child, "-")));
  CHECK_THAT(text, Contains(absl::StrCat("(a save of iteration 40 by pid ", child)));
  CHECK_THAT(text, Contains("writer gone): the next save removes it\n"));
  // ... and the next save does.
  Save(dir, 50);
  CHECK_THAT(Inspect(dir), Contains("temp entries (saves that did not commit): 0\n"));
}

TEST_CASE("an empty directory, a missing one, bad flags") {
  const std::string dir = FreshDir();
  const std::string text = Inspect(dir);
  CHECK_THAT(text, Contains("tracker latest_checkpointed_iteration.txt: none\n"));
  CHECK_THAT(text, Contains("iterations: 0\n"));
  CHECK_THAT(text, Contains("save lock mxmaca-save.lock: free\n"));
  std::ostringstream out;
  absl::Status missing = RunInspectCheckpoint({"--save=" + dir + "/nope"}, out);
  CHECK(absl::IsNotFound(missing));
  CHECK_THAT(std::string(missing.message()), Contains(dir + "/nope does not exist"));
  CHECK(absl::IsInvalidArgument(RunInspectCheckpoint({}, out)));
  CHECK(absl::IsInvalidArgument(RunInspectCheckpoint({"--loda", dir}, out)));
  CHECK(absl::IsInvalidArgument(RunInspectCheckpoint({"--load", dir, "--save", dir}, out)));
  CHECK(absl::IsInvalidArgument(RunInspectCheckpoint({"--load"}, out)));
}

}  // namespace
}  // namespace mxmaca::api
