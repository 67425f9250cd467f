// api/launch/launch_command_test.cc (tag multiprocess): flag parsing, the torchrun
// variables each child sees, first-failure exit codes with the others stopped, SIGTERM
// forwarding, and --max-restarts — with /bin/sh children standing in for mxmaca.
#include "api/launch/launch_command.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace mxmaca::api {
namespace {

std::string TempDir() {
  std::string tmpl = absl::StrCat(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp",
                                  "/launchXXXXXX");
  return mkdtemp(tmpl.data());
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Lines: the non-empty lines of a file, sorted.
std::vector<std::string> Lines(const std::string& path) {
  std::vector<std::string> lines = absl::StrSplit(Slurp(path), '\n', absl::SkipEmpty());
  std::sort(lines.begin(), lines.end());
  return lines;
}

// WithStderrTo: runs `f` with file descriptor 2 redirected to `path`; returns f's result.
int WithStderrTo(const std::string& path, const std::function<int()>& f) {
  std::fflush(stderr);
  const int saved = dup(2);
  FILE* file = std::fopen(path.c_str(), "w");
  REQUIRE(file != nullptr);
  dup2(fileno(file), 2);
  const int result = f();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::fclose(file);
  return result;
}

// Alive: whether process `pid` still exists and is not a zombie awaiting its reaper
// (a reparented grandchild may stay a zombie for a moment after it was killed).
bool Alive(pid_t pid) {
  if (kill(pid, 0) != 0) return errno != ESRCH;
  const std::string stat = Slurp(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

// ExpectAllGone: every pid listed (one per line) in `path` has ended, allowing the
// reaper of reparented grandchildren up to 2 s.
void ExpectAllGone(const std::string& path) {
  const std::vector<std::string> pids = Lines(path);
  REQUIRE_FALSE(pids.empty());
  for (const std::string& text : pids) {
    int pid = 0;
    REQUIRE(absl::SimpleAtoi(text, &pid));
    bool alive = Alive(pid);
    for (int i = 0; i < 40 && alive; ++i) {
      absl::SleepFor(absl::Milliseconds(50));
      alive = Alive(pid);
    }
    INFO("pid " << pid);
    CHECK_FALSE(alive);
  }
}

TEST_CASE("parse launcher flags") {
  auto a =
      ParseLaunchArgs({"--nproc-per-node", "4", "--nnodes=2", "--node_rank", "1", "--master-addr",
                       "head", "--master-port=7000", "--", "train", "--num-layers", "2"});
  REQUIRE(a.ok());
  CHECK(a->nproc_per_node == 4);
  CHECK(a->nnodes == 2);
  CHECK(a->node_rank == 1);
  CHECK(a->master_addr == "head");
  CHECK(a->master_port == 7000);
  CHECK(a->command == std::vector<std::string>{"train", "--num-layers", "2"});

  CHECK(a->max_restarts == 0);

  auto env = ChildEnvironment(*a, 3);
  CHECK(env ==
        std::vector<std::pair<std::string, std::string>>{{"RANK", "7"},
                                                         {"WORLD_SIZE", "8"},
                                                         {"LOCAL_RANK", "3"},
                                                         {"LOCAL_WORLD_SIZE", "4"},
                                                         {"GROUP_RANK", "1"},
                                                         {"MASTER_ADDR", "head"},
                                                         {"MASTER_PORT", "7000"},
                                                         {"TORCHELASTIC_RESTART_COUNT", "0"},
                                                         {"TORCHELASTIC_MAX_RESTARTS", "0"}});

  auto r = ParseLaunchArgs({"--nproc-per-node", "2", "--max-restarts", "3", "--", "train"});
  REQUIRE(r.ok());
  CHECK(r->max_restarts == 3);
  r = ParseLaunchArgs({"--nproc_per_node=2", "--max_restarts=5", "--", "train"});
  REQUIRE(r.ok());
  CHECK(r->max_restarts == 5);
  auto env2 = ChildEnvironment(*r, 1, 4);
  CHECK(env2[0] == std::pair<std::string, std::string>{"RANK", "1"});
  CHECK(env2[7] == std::pair<std::string, std::string>{"TORCHELASTIC_RESTART_COUNT", "4"});
  CHECK(env2[8] == std::pair<std::string, std::string>{"TORCHELASTIC_MAX_RESTARTS", "5"});

  auto error = [](std::vector<std::string> args) {
    auto r = ParseLaunchArgs(args);
    REQUIRE_FALSE(r.ok());
    return std::string(r.status().message());
  };
  CHECK_THAT(error({"--nproc-per-node", "2"}), Catch::Contains("no command"));
  CHECK_THAT(error({"--nproc-per-node", "x", "--", "train"}),
             Catch::Contains("--nproc-per-node=\"x\" is not an integer"));
  CHECK_THAT(error({"--", "train"}), Catch::Contains("--nproc-per-node must be at least 1"));
  CHECK_THAT(error({"--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "2", "--", "t"}),
             Catch::Contains("--node-rank 2 outside [0, --nnodes 2)"));
  CHECK_THAT(error({"--nproc-per-node", "2", "--bogus", "1", "--", "t"}),
             Catch::Contains("unknown launcher flag --bogus"));
  CHECK_THAT(error({"--nproc-per-node", "2", "--master-port", "0", "--", "t"}),
             Catch::Contains("--master-port 0 outside 1..65535"));
  CHECK_THAT(error({"train"}), Catch::Contains("unexpected argument \"train\""));
  CHECK_THAT(error({"--nproc-per-node", "2", "--max-restarts", "-1", "--", "t"}),
             Catch::Contains("--max-restarts must be at least 0 (got -1)"));
  CHECK_THAT(error({"--nproc-per-node", "2", "--max-restarts", "two", "--", "t"}),
             Catch::Contains("--max-restarts=\"two\" is not an integer"));
  CHECK(a->exit_timeout == absl::Seconds(120));
  r = ParseLaunchArgs({"--nproc-per-node", "2", "--exit-timeout", "30", "--", "train"});
  REQUIRE(r.ok());
  CHECK(r->exit_timeout == absl::Seconds(30));
  CHECK_THAT(error({"--nproc-per-node", "2", "--exit-timeout", "0", "--", "t"}),
             Catch::Contains("--exit-timeout must be at least 1 second (got 0)"));
}

TEST_CASE("--exit-timeout: a child still running after another exited 0 fails the attempt") {
  LaunchArgs a;
  a.nproc_per_node = 2;
  a.grace = absl::Seconds(1);
  a.exit_timeout = absl::Seconds(1);
  SECTION("a child that stops itself (SIGSTOP) is killed; exit 1, not a hang") {
    const std::string dir = TempDir();
    // Rank 0 exits 0 at once; rank 1 stops itself: alive, silent, never exits.
    a.command = {"-c", absl::StrCat("echo $$ >> ", dir,
                                    "/pids; if [ \"$RANK\" = 1 ]; then kill -STOP $$; fi; exit 0")};
    const absl::Time start = absl::Now();
    CHECK(WithStderrTo(dir + "/stderr", [&] { return RunLaunched(a, "/bin/sh"); }) == 1);
    CHECK(absl::Now() - start < absl::Seconds(10));
    CHECK_THAT(Slurp(dir + "/stderr"),
               Catch::Contains("mxmaca launch: local rank 1 (pid ") &&
                   Catch::Contains(" still running 1s after local rank 0 exited 0; stopping it"));
    ExpectAllGone(dir + "/pids");
  }
  SECTION("with --max-restarts 1 the job restarts, and a clean second attempt exits 0") {
    const std::string dir = TempDir();
    a.max_restarts = 1;
    a.command = {"-c", absl::StrCat("if [ \"$RANK\" = 1 ] && [ ! -e ", dir, "/marker ]; then touch ",
                                    dir, "/marker; kill -STOP $$; fi; exit 0")};
    CHECK(WithStderrTo(dir + "/stderr", [&] { return RunLaunched(a, "/bin/sh"); }) == 0);
    CHECK_THAT(Slurp(dir + "/stderr"),
               Catch::Contains("child local rank 1 exited with code 1; restarting the job (1/1)"));
  }
  SECTION("a child that ends within the timeout is not stopped") {
    const std::string dir = TempDir();
    a.exit_timeout = absl::Seconds(5);
    a.command = {"-c", "if [ \"$RANK\" = 1 ]; then sleep 1; fi; exit 0"};
    CHECK(WithStderrTo(dir + "/stderr", [&] { return RunLaunched(a, "/bin/sh"); }) == 0);
    CHECK_THAT(Slurp(dir + "/stderr"), !Catch::Contains("still running"));
  }
}

TEST_CASE("children see torchrun's variables; all succeed -> 0") {
  const std::string dir = TempDir();
  LaunchArgs a;
  a.nproc_per_node = 3;
  a.master_port = 6123;
  a.command = {"-c", absl::StrCat("echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE "
                                  "$MASTER_ADDR $MASTER_PORT\" > ",
                                  dir, "/r$RANK")};
  CHECK(RunLaunched(a, "/bin/sh") == 0);
  for (int r = 0; r < 3; ++r) {
    CHECK(Slurp(absl::StrCat(dir, "/r", r)) == absl::StrCat(r, " 3 ", r, " 3 127.0.0.1 6123\n"));
  }
}

TEST_CASE("the first failure's exit code; the others are stopped") {
  LaunchArgs a;
  a.nproc_per_node = 3;
  a.grace = absl::Seconds(1);
  // Rank 1 fails at once with 7; the others would sleep 30 s (and ignore nothing).
  a.command = {"-c", "if [ \"$RANK\" = 1 ]; then exit 7; fi; sleep 30"};
  const absl::Time start = absl::Now();
  CHECK(RunLaunched(a, "/bin/sh") == 7);
  CHECK(absl::Now() - start < absl::Seconds(10));

  // A child that ignores SIGTERM is killed after the grace period.
  a.command = {"-c", "if [ \"$RANK\" = 0 ]; then exit 3; fi; trap '' TERM; sleep 30"};
  const absl::Time start2 = absl::Now();
  CHECK(RunLaunched(a, "/bin/sh") == 3);
  CHECK(absl::Now() - start2 < absl::Seconds(10));

  // A program that cannot be started: 127 from the child.
  a.command = {};
  CHECK(RunLaunched(a, "/nonexistent/mxmaca") == 127);
}

TEST_CASE("SIGTERM to the launcher reaches every child") {
  const std::string dir = TempDir();
  const pid_t launcher = fork();
  if (launcher == 0) {
    LaunchArgs a;
    a.nproc_per_node = 2;
    a.command = {"-c", absl::StrCat("trap 'echo term > ", dir,
                                    "/t$RANK; exit 5' TERM; "
                                    "touch ",
                                    dir, "/up$RANK; sleep 30 & wait")};
    _exit(RunLaunched(a, "/bin/sh"));
  }
  // Wait until both children have installed their trap.
  for (int i = 0; i < 100; ++i) {
    if (access((dir + "/up0").c_str(), F_OK) == 0 && access((dir + "/up1").c_str(), F_OK) == 0)
      break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  kill(launcher, SIGTERM);
  int wstatus = 0;
  waitpid(launcher, &wstatus, 0);
  REQUIRE(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == 5);
  CHECK(Slurp(dir + "/t0") == "term\n");
  CHECK(Slurp(dir + "/t1") == "term\n");
}

TEST_CASE("children get signal_grace, not grace, to finish after a forwarded SIGTERM") {
  // Each child takes 1 s after SIGTERM (a checkpoint save under --exit-signal-handler)
  // and then exits 0: longer than `grace`, well within `signal_grace`.
  const std::string dir = TempDir();
  const pid_t launcher = fork();
  if (launcher == 0) {
    LaunchArgs a;
    a.nproc_per_node = 2;
    a.grace = absl::Milliseconds(200);
    a.command = {"-c",
                 absl::StrCat("trap 'sleep 1; echo saved > ", dir, "/s$RANK; exit 0' TERM; touch ",
                              dir, "/up$RANK; sleep 30 & wait")};
    _exit(RunLaunched(a, "/bin/sh"));
  }
  for (int i = 0; i < 100; ++i) {
    if (access((dir + "/up0").c_str(), F_OK) == 0 && access((dir + "/up1").c_str(), F_OK) == 0)
      break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  kill(launcher, SIGTERM);
  int wstatus = 0;
  waitpid(launcher, &wstatus, 0);
  REQUIRE(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == 0);
  CHECK(Slurp(dir + "/s0") == "saved\n");
  CHECK(Slurp(dir + "/s1") == "saved\n");
}

TEST_CASE("--max-restarts: a job that fails once succeeds on its restart") {
  // Rank 0 fails with 9 on its first run (no marker yet) and succeeds once the marker
  // exists; rank 1 always succeeds. Each run appends "rank restart_count" to a log.
  auto command = [](const std::string& dir) -> std::vector<std::string> {
    return {"-c", absl::StrCat("echo \"$RANK $TORCHELASTIC_RESTART_COUNT "
                               "$TORCHELASTIC_MAX_RESTARTS\" >> ",
                               dir, "/log; echo $$ >> ", dir, "/pids; ",
                               "if [ \"$RANK\" = 0 ] && [ ! -e ", dir, "/marker ]; then touch ",
                               dir, "/marker; exit 9; fi; exit 0")};
  };
  LaunchArgs a;
  a.nproc_per_node = 2;
  a.grace = absl::Seconds(1);

  SECTION("with --max-restarts 1: restarted once, exit 0") {
    const std::string dir = TempDir();
    a.max_restarts = 1;
    a.command = command(dir);
    CHECK(WithStderrTo(dir + "/stderr", [&] { return RunLaunched(a, "/bin/sh"); }) == 0);
    CHECK_THAT(Slurp(dir + "/stderr"),
               Catch::Contains("mxmaca launch: child local rank 0 exited with code 9; "
                               "restarting the job (1/1)\n"));
    // Rank 1 of the first attempt may have been stopped before its echo (rank 0 can fail
    // first), so only the restarted attempt is checked in full.
    const std::vector<std::string> log = Lines(dir + "/log");
    CHECK(std::count(log.begin(), log.end(), "0 0 1") == 1);
    CHECK(std::count(log.begin(), log.end(), "0 1 1") == 1);
    CHECK(std::count(log.begin(), log.end(), "1 1 1") == 1);
    ExpectAllGone(dir + "/pids");
  }

  SECTION("with --max-restarts 0 (the default): the failure's code, no restart") {
    const std::string dir = TempDir();
    a.command = command(dir);
    CHECK(WithStderrTo(dir + "/stderr", [&] { return RunLaunched(a, "/bin/sh"); }) == 9);
    CHECK_THAT(Slurp(dir + "/stderr"), !Catch::Contains("restarting"));
    const std::vector<std::string> log = Lines(dir + "/log");
    CHECK(std::count(log.begin(), log.end(), "0 0 0") == 1);
    CHECK(std::none_of(log.begin(), log.end(), [](const std::string& l) { return l[2] != '0'; }));
    ExpectAllGone(dir + "/pids");
  }
}

TEST_CASE("--max-restarts 2: a job that always fails runs exactly 3 times") {
  const std::string dir = TempDir();
  LaunchArgs a;
  a.nproc_per_node = 2;
  a.max_restarts = 2;
  a.grace = absl::Seconds(1);
  // Rank 1 logs, starts a subprocess that ignores SIGTERM (it must be killed with the
  // group), says it is up and sleeps; rank 0 waits for that, logs and fails with 4. Every
  // run of either rank is one line in the log.
  const std::string script =
      absl::StrCat("up=", dir, "/up$TORCHELASTIC_RESTART_COUNT\n",  //
                   "echo $$ >> ", dir, "/pids\n",                   //
                   "if [ \"$RANK\" = 1 ]; then\n",                  //
                   "  echo \"1 $TORCHELASTIC_RESTART_COUNT\" >> ", dir, "/log\n",
                   "  (trap '' TERM; sleep 30) &\n",  //
                   "  echo $! >> ", dir, "/pids\n",   //
                   "  touch $up; wait; exit 0\n",     //
                   "fi\n",                            //
                   "while [ ! -e $up ]; do sleep 0.02; done\n",
                   "echo \"0 $TORCHELASTIC_RESTART_COUNT\" >> ", dir, "/log\n",  //
                   "exit 4\n");
  a.command = {"-c", script};
  const absl::Time start = absl::Now();
  CHECK(WithStderrTo(dir + "/stderr", [&] { return RunLaunched(a, "/bin/sh"); }) == 4);
  CHECK(absl::Now() - start < absl::Seconds(20));
  CHECK(Lines(dir + "/log") == std::vector<std::string>{"0 0", "0 1", "0 2", "1 0", "1 1", "1 2"});
  const std::string err = Slurp(dir + "/stderr");
  CHECK_THAT(err, Catch::Contains("child local rank 0 exited with code 4; restarting the job "
                                  "(1/2)"));
  CHECK_THAT(err, Catch::Contains("child local rank 0 exited with code 4; restarting the job "
                                  "(2/2)"));
  CHECK_THAT(err, !Catch::Contains("(3/2)"));
  ExpectAllGone(dir + "/pids");
}

TEST_CASE("--max-restarts: a launcher stopped by SIGTERM does not restart") {
  const std::string dir = TempDir();
  const pid_t launcher = fork();
  if (launcher == 0) {
    LaunchArgs a;
    a.nproc_per_node = 2;
    a.max_restarts = 3;
    a.grace = absl::Seconds(1);
    // Each run logs, says it is up, and exits 6 on SIGTERM (a failure that would
    // otherwise be restarted).
    a.command = {
        "-c", absl::StrCat("echo \"$RANK $TORCHELASTIC_RESTART_COUNT\" >> ", dir,
                           "/log; trap 'exit 6' TERM; touch ", dir, "/up$RANK; sleep 30 & wait")};
    _exit(RunLaunched(a, "/bin/sh"));
  }
  for (int i = 0; i < 100; ++i) {
    if (access((dir + "/up0").c_str(), F_OK) == 0 && access((dir + "/up1").c_str(), F_OK) == 0)
      break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  kill(launcher, SIGTERM);
  int wstatus = 0;
  waitpid(launcher, &wstatus, 0);
  REQUIRE(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == 6);
  CHECK(Lines(dir + "/log") == std::vector<std::string>{"0 0", "1 0"});
}

}  // namespace
}  // namespace mxmaca::api
