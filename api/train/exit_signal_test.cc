// api/train/exit_signal_test.cc: the --exit-signal-handler flag is set by the signal and
// the process survives it; uncatchable signals are refused; a restored default kills.
#include "api/train/exit_signal.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <functional>

namespace mxmaca::api {
namespace {

// InChild: runs `body` in a forked child whose exit code is body's result; returns the
// wait status. Keeps signal experiments that may end a process out of the test runner.
int InChild(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  return wstatus;
}

TEST_CASE("raise(SIGTERM) sets the flag and the process keeps running") {
  ResetExitSignalForTest();
  REQUIRE(InstallExitSignalHandler().ok());
  CHECK_FALSE(ExitSignalReceived());
  REQUIRE(raise(SIGTERM) == 0);
  // Still here: the handler replaced SIGTERM's default action (terminate).
  CHECK(ExitSignalReceived());
  CHECK(kill(getpid(), 0) == 0);

  // The flag stays set until reset; a second delivery is harmless.
  REQUIRE(raise(SIGTERM) == 0);
  CHECK(ExitSignalReceived());
  ResetExitSignalForTest();
  CHECK_FALSE(ExitSignalReceived());
  RestoreDefaultExitSignalHandlers();
}

TEST_CASE("a SIGTERM from another process does not interrupt a blocking call") {
  ResetExitSignalForTest();
  REQUIRE(InstallExitSignalHandler(SIGTERM).ok());
  // The child signals us while we block in waitpid; SA_RESTART resumes the wait, so it
  // returns the child's status instead of failing with EINTR.
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    kill(parent, SIGTERM);
    usleep(100 * 1000);
    _exit(7);
  }
  int wstatus = 0;
  CHECK(waitpid(pid, &wstatus, 0) == pid);
  CHECK(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == 7);
  CHECK(ExitSignalReceived());
  RestoreDefaultExitSignalHandlers();
  ResetExitSignalForTest();
}

TEST_CASE("another signal can be the exit signal; defaults come back on restore") {
  // Installed: SIGUSR1 sets the flag, the child exits normally with 0.
  int wstatus = InChild([] {
    if (!InstallExitSignalHandler(SIGUSR1).ok()) return 2;
    raise(SIGUSR1);
    return ExitSignalReceived() ? 0 : 3;
  });
  CHECK(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == 0);

  // Installed, then restored: SIGTERM's default action ends the child.
  wstatus = InChild([] {
    if (!InstallExitSignalHandler(SIGTERM).ok()) return 2;
    RestoreDefaultExitSignalHandlers();
    raise(SIGTERM);
    return 0;
  });
  CHECK(WIFSIGNALED(wstatus));
  CHECK(WTERMSIG(wstatus) == SIGTERM);
}

TEST_CASE("signals that cannot be caught or do not exist are refused") {
  for (const int bad : {SIGKILL, SIGSTOP, 0, -1, 1000}) {
    INFO("signal " << bad);
    const absl::Status s = InstallExitSignalHandler(bad);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  }
  CHECK_THAT(std::string(InstallExitSignalHandler(SIGKILL).message()),
             Catch::Contains("cannot be caught"));
  CHECK_THAT(std::string(InstallExitSignalHandler(1000).message()),
             Catch::Contains("exit signal 1000 is not a signal number"));
}

}  // namespace
}  // namespace mxmaca::api
