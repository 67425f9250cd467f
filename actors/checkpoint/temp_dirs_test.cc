// actors/checkpoint/temp_dirs_test.cc: temp entries of killed saves are found and removed by
// the next save once their writer is gone; a running writer's (another live process), this
// process's own and a moved-aside checkpoint are kept.
#include "actors/checkpoint/temp_dirs.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "actors/checkpoint/checkpoint_writer.h"
#include "actors/checkpoint/test_util.h"

namespace mxmaca::actors::checkpoint {
namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using testing::MakeTempDir;

const std::vector<int64_t> kShape = {2, 3};
const std::vector<float> kValues = {1, 2, 3, 4, 5, 6};

bool Exists(const std::string& p) { return fs::exists(p); }

// Suffix: a temp suffix for `pid` created at `when` on `host` ("" = the old format).
std::string Suffix(pid_t pid, absl::Time when, const std::string& host) {
  std::string s = absl::StrFormat("%d-0-%x", static_cast<int>(pid), absl::ToUnixNanos(when));
  if (!host.empty()) absl::StrAppend(&s, "-", host);
  return s;
}

// KilledSave: a child process begins a save of `iteration` in `dir`, writes its shard and
// is killed before Commit; returns the temp dir it left.
std::string KilledSave(const std::string& dir, int64_t iteration) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    auto w = CheckpointWriter::Begin(dir, iteration);
    if (!w.ok() ||
        !w->WriteShard("tp0", {{"model/w", kShape, {0, 0}, kShape, kValues.data()}}).ok()) {
      ::_exit(2);
    }
    const std::string temp = w->temp_dir();
    (void)::write(fds[1], temp.data(), temp.size());
    ::close(fds[1]);
    ::raise(SIGKILL);
  }
  ::close(fds[1]);
  std::string temp;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof(buf))) > 0) temp.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int wstatus = 0;
  REQUIRE(::waitpid(pid, &wstatus, 0) == pid);
  REQUIRE(WIFSIGNALED(wstatus));
  REQUIRE(Exists(temp));
  return temp;
}

TEST_CASE("the temp suffix names pid, time and host, and is read back") {
  const std::string dir = MakeTempDir();
  const std::string name = absl::StrCat("iter_0000007.tmp-", TempSuffix());
  fs::create_directory(dir + "/" + name);
  auto all = ListTempEntries(dir);
  REQUIRE(all.ok());
  REQUIRE(all->size() == 1);
  const TempEntry& e = all->front();
  CHECK(e.kind == TempEntry::Kind::kSave);
  CHECK(e.iteration == 7);
  CHECK(e.pid == ::getpid());
  CHECK_FALSE(e.host.empty());
  CHECK(e.created <= absl::Now());
  CHECK(e.created > absl::Now() - absl::Seconds(60));
  CHECK(e.writer_alive);
  CHECK_THAT(e.Describe(), Contains("a save of iteration 7 by pid"));
}

TEST_CASE("the next save removes the temp dir of a killed save") {
  const std::string dir = MakeTempDir();
  const std::string left = KilledSave(dir, 20);
  auto listed = ListTempEntries(dir);
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  CHECK_FALSE(listed->front().writer_alive);
  CHECK_THAT(listed->front().Describe(), Contains("writer gone"));

  auto w = CheckpointWriter::Begin(dir, 30);
  REQUIRE(w.ok());
  CHECK_FALSE(Exists(left));
  REQUIRE(w->removed_stale().size() == 1);
  CHECK_THAT(w->removed_stale().front(), Contains(fs::path(left).filename().string()));
  REQUIRE(w->WriteShard("tp0", {{"model/w", kShape, {0, 0}, kShape, kValues.data()}}).ok());
  REQUIRE(w->Commit({{"seed", 1}}, {{"it", 30}}).ok());
  CHECK(ListTempEntries(dir)->empty());
}

TEST_CASE("repeated killed saves do not pile up") {
  const std::string dir = MakeTempDir();
  for (int k = 0; k < 3; ++k) KilledSave(dir, 10 + k);  // each Begin removes the one before
  CHECK(ListTempEntries(dir)->size() == 1);
}

TEST_CASE("what the next save keeps: a live writer, this process, an aside, another host") {
  const std::string dir = MakeTempDir();
  // A live writer: another process (our parent: alive, started before "now").
  const pid_t parent = ::getppid();
  const std::string live = absl::StrCat(dir, "/iter_0000005.tmp-", Suffix(parent, absl::Now(), ""));
  // The same pid, but the name is older than the process: a recycled pid, so gone.
  const std::string recycled =
      absl::StrCat(dir, "/iter_0000004.tmp-", Suffix(parent, absl::FromUnixSeconds(1000), ""));
  const std::string tracker =
      absl::StrCat(dir, "/latest_checkpointed_iteration.txt.tmp-",
                   Suffix(parent, absl::FromUnixSeconds(1000), "localhost-x"));
  const std::string aside = absl::StrCat(dir, "/iter_0000003.tmp-old-", Suffix(1, absl::Now(), ""));
  const std::string other_host =
      absl::StrCat(dir, "/iter_0000002.tmp-", Suffix(1, absl::Now(), "some-other-host.example"));
  const std::string mine = absl::StrCat(dir, "/iter_0000006.tmp-", TempSuffix());
  for (const std::string& d : {live, recycled, aside, other_host, mine}) fs::create_directory(d);
  std::ofstream(tracker) << "4";

  auto removed = RemoveStaleTempEntries(dir, /*exclusive=*/false);
  REQUIRE(removed.ok());
  CHECK(removed->size() == 1);  // the recycled pid's (the tracker names another host)
  CHECK_FALSE(Exists(recycled));
  CHECK(Exists(live));
  CHECK(Exists(aside));
  CHECK(Exists(other_host));
  CHECK(Exists(mine));
  CHECK(Exists(tracker));

  // Holding the save lock (no other job writes here): all but ours and the aside go.
  removed = RemoveStaleTempEntries(dir, /*exclusive=*/true);
  REQUIRE(removed.ok());
  CHECK(removed->size() == 3);
  CHECK_FALSE(Exists(live));
  CHECK_FALSE(Exists(other_host));
  CHECK_FALSE(Exists(tracker));
  CHECK(Exists(aside));
  CHECK(Exists(mine));
}

}  // namespace
}  // namespace mxmaca::actors::checkpoint
