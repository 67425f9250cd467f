// api/launch/launcher_watch_test.cc: a process whose launcher (named in the environment,
// as `mxmaca launch` names it) is killed ends within a second, even when it is not the
// launcher's child (so only the watch, not the parent-death signal, can notice).
#include "api/launch/launcher_watch.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/process_info.h"

namespace mxmaca::api {
namespace {

// WaitExit: the wait status of `pid` once it exits, or -1 if it still runs after `limit`.
int WaitExit(pid_t pid, absl::Duration limit) {
  const absl::Time until = absl::Now() + limit;
  while (absl::Now() < until) {
    int wstatus = 0;
    if (::waitpid(pid, &wstatus, WNOHANG) == pid) return wstatus;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return -1;
}

TEST_CASE("no launcher variable: no watch") {
  ::unsetenv(kLauncherPidVariable);
  ::unsetenv(kLauncherStartVariable);
  auto started = StartLauncherWatch();
  REQUIRE(started.ok());
  CHECK_FALSE(*started);
}

TEST_CASE("a malformed launcher variable is an error naming it") {
  ::setenv(kLauncherPidVariable, "12x", 1);
  auto started = StartLauncherWatch();
  CHECK(absl::IsInvalidArgument(started.status()));
  CHECK(std::string(started.status().message()).find("MXMACA_LAUNCHER_PID=\"12x\"") !=
        std::string::npos);
  ::setenv(kLauncherPidVariable, absl::StrCat(::getpid()).c_str(), 1);
  ::setenv(kLauncherStartVariable, "soon", 1);
  CHECK(absl::IsInvalidArgument(StartLauncherWatch().status()));
  ::unsetenv(kLauncherPidVariable);
  ::unsetenv(kLauncherStartVariable);
}

TEST_CASE("a rank whose launcher is SIGKILLed exits within a second") {
  // The "launcher": a child that sleeps until killed.
  const pid_t launcher = ::fork();
  REQUIRE(launcher >= 0);
  if (launcher == 0) {
    for (;;) ::pause();
  }
  const auto ticks = base::ProcessStartTicks(launcher);
  REQUIRE(ticks.has_value());
  // The "rank": a sibling of the launcher (so no parent-death signal ties them), told
  // the launcher's identity as mxmaca launch tells it; it would run for a minute.
  const pid_t rank = ::fork();
  REQUIRE(rank >= 0);
  if (rank == 0) {
    ::setenv(kLauncherPidVariable, absl::StrCat(launcher).c_str(), 1);
    ::setenv(kLauncherStartVariable, absl::StrCat(*ticks).c_str(), 1);
    auto started = StartLauncherWatch(absl::Milliseconds(100));
    if (!started.ok() || !*started) ::_exit(3);
    ::sleep(60);
    ::_exit(0);
  }
  absl::SleepFor(absl::Milliseconds(300));
  CHECK(base::ProcessAlive(rank));  // still running while the launcher lives
  ::kill(launcher, SIGKILL);
  REQUIRE(::waitpid(launcher, nullptr, 0) == launcher);
  const int wstatus = WaitExit(rank, absl::Seconds(2));
  if (wstatus == -1) ::kill(rank, SIGKILL), ::waitpid(rank, nullptr, 0);
  REQUIRE(wstatus != -1);
  REQUIRE(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == kLauncherGoneExitCode);
}

TEST_CASE("a reused launcher pid (another start time) counts as gone") {
  const pid_t rank = ::fork();
  REQUIRE(rank >= 0);
  if (rank == 0) {
    // Our parent's pid, but a start time it does not have: another process.
    const auto ticks = base::ProcessStartTicks(::getppid());
    if (!ticks) ::_exit(4);
    ::setenv(kLauncherPidVariable, absl::StrCat(::getppid()).c_str(), 1);
    ::setenv(kLauncherStartVariable, absl::StrCat(*ticks + 7).c_str(), 1);
    auto started = StartLauncherWatch(absl::Milliseconds(100));
    if (!started.ok()) ::_exit(3);
    ::sleep(60);
    ::_exit(0);
  }
  const int wstatus = WaitExit(rank, absl::Seconds(2));
  if (wstatus == -1) ::kill(rank, SIGKILL), ::waitpid(rank, nullptr, 0);
  REQUIRE(wstatus != -1);
  REQUIRE(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == kLauncherGoneExitCode);
}

}  // namespace
}  // namespace mxmaca::api
