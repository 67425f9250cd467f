// actors/checkpoint/save_lock_test.cc: one job per --save directory: a second holder (another
// process, or this one again) is refused with the holder named; a lock left by a process that
// died (its flock gone with it, its line still in the file) and a line naming a dead or
// recycled pid are taken over; a line naming a live process here refuses even without flock.
#include "actors/checkpoint/save_lock.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "actors/checkpoint/test_util.h"
#include "base/process_info.h"

namespace mxmaca::actors::checkpoint {
namespace {

using Catch::Matchers::Contains;
using testing::MakeTempDir;

void WriteLine(const std::string& dir, const std::string& line) {
  std::ofstream(dir + "/" + kSaveLockFileName, std::ios::trunc) << line;
}

std::string HolderLine(pid_t pid, uint64_t ticks, const std::string& host) {
  return absl::StrCat("{\"host\":\"", host, "\",\"pid\":", pid, ",\"start_ticks\":", ticks,
                      ",\"started\":\"2026-01-01 00:00:00 UTC\"}\n");
}

// DeadPid: the pid of a child that has exited and been reaped.
pid_t DeadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TEST_CASE("the lock names its holder, refuses a second job and is released") {
  const std::string dir = MakeTempDir() + "/save";  // created by Acquire
  std::optional<SaveLockHolder> taken;
  {
    auto lock = SaveLock::Acquire(dir, &taken);
    REQUIRE(lock.ok());
    CHECK_FALSE(taken.has_value());
    auto holder = ReadSaveLockHolder(dir);
    REQUIRE(holder.ok());
    REQUIRE(holder->has_value());
    CHECK((*holder)->pid == ::getpid());
    CHECK((*holder)->host == base::HostName());
    CHECK((*holder)->start_ticks == base::ProcessStartTicks(::getpid()));
    CHECK(*SaveLockHeld(dir));

    // Another process (a second job) is refused, with host, pid and start named.
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      auto second = SaveLock::Acquire(dir);
      const std::string msg(second.status().message());
      const bool named = absl::IsFailedPrecondition(second.status()) &&
                         msg.find(absl::StrCat("pid ", ::getppid())) != std::string::npos &&
                         msg.find(absl::StrCat("host ", base::HostName())) != std::string::npos &&
                         msg.find("started ") != std::string::npos &&
                         msg.find("in use by another job") != std::string::npos;
      ::_exit(named ? 0 : 1);
    }
    int wstatus = 0;
    REQUIRE(::waitpid(child, &wstatus, 0) == child);
    CHECK(WIFEXITED(wstatus));
    CHECK(WEXITSTATUS(wstatus) == 0);

    // This process again (a second trainer in one process) is refused too.
    auto again = SaveLock::Acquire(dir);
    CHECK(absl::IsFailedPrecondition(again.status()));
    CHECK_THAT(std::string(again.status().message()), Contains(kSaveLockFileName));
    // The refused attempt did not erase the holder's line.
    CHECK((*ReadSaveLockHolder(dir))->pid == ::getpid());
  }
  // Released: the file stays, empty, and the next job takes it without a takeover.
  CHECK_FALSE(*SaveLockHeld(dir));
  CHECK_FALSE(ReadSaveLockHolder(dir)->has_value());
  auto next = SaveLock::Acquire(dir, &taken);
  REQUIRE(next.ok());
  CHECK_FALSE(taken.has_value());
}

TEST_CASE("a lock left by a killed job is taken over, naming the dead holder") {
  const std::string dir = MakeTempDir();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto lock = SaveLock::Acquire(dir);
    if (!lock.ok()) ::_exit(2);
    ::raise(SIGKILL);  // dies holding it: no destructor runs
    ::_exit(3);
  }
  int wstatus = 0;
  REQUIRE(::waitpid(child, &wstatus, 0) == child);
  REQUIRE(WIFSIGNALED(wstatus));
  REQUIRE((*ReadSaveLockHolder(dir))->pid == child);  // its line is still there
  std::optional<SaveLockHolder> taken;
  auto lock = SaveLock::Acquire(dir, &taken);
  REQUIRE(lock.ok());
  REQUIRE(taken.has_value());
  CHECK(taken->pid == child);
  CHECK((*ReadSaveLockHolder(dir))->pid == ::getpid());
}

TEST_CASE("a holder line alone: a dead or recycled pid is stale, a live one refuses") {
  const std::string dir = MakeTempDir();
  const std::string host = base::HostName();
  std::optional<SaveLockHolder> taken;
  SECTION("dead pid") {
    const pid_t dead = DeadPid();
    WriteLine(dir, HolderLine(dead, 1, host));
    auto lock = SaveLock::Acquire(dir, &taken);
    REQUIRE(lock.ok());
    REQUIRE(taken.has_value());
    CHECK(taken->pid == dead);
  }
  SECTION("recycled pid: alive, but started at another time") {
    const pid_t parent = ::getppid();
    WriteLine(dir, HolderLine(parent, *base::ProcessStartTicks(parent) + 1, host));
    auto lock = SaveLock::Acquire(dir, &taken);
    REQUIRE(lock.ok());
    CHECK(taken.has_value());
  }
  SECTION("a live holder on this host whose flock did not reach us") {
    const pid_t parent = ::getppid();
    WriteLine(dir, HolderLine(parent, *base::ProcessStartTicks(parent), host));
    auto lock = SaveLock::Acquire(dir, &taken);
    CHECK(absl::IsFailedPrecondition(lock.status()));
    CHECK_THAT(std::string(lock.status().message()), Contains(absl::StrCat("pid ", parent)));
    CHECK((*ReadSaveLockHolder(dir))->pid == parent);  // left as it was
  }
  SECTION("a garbled file names nobody and is taken") {
    WriteLine(dir, "not json");
    CHECK(absl::IsDataLoss(ReadSaveLockHolder(dir).status()));
    auto lock = SaveLock::Acquire(dir, &taken);
    REQUIRE(lock.ok());
    CHECK_FALSE(taken.has_value());
  }
}

}  // namespace
}  // namespace mxmaca::actors::checkpoint
