// api/launch/launch_command_test.cc (tag multiprocess): flag parsing, the torchrun
// variables each child sees, first-failure exit codes with the others stopped, and
// SIGTERM forwarding — with /bin/sh children standing in for mxmaca.
#include "api/launch/launch_command.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
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

  auto env = ChildEnvironment(*a, 3);
  CHECK(env == std::vector<std::pair<std::string, std::string>>{{"RANK", "7"},
                                                                {"WORLD_SIZE", "8"},
                                                                {"LOCAL_RANK", "3"},
                                                                {"LOCAL_WORLD_SIZE", "4"},
                                                                {"GROUP_RANK", "1"},
                                                                {"MASTER_ADDR", "head"},
                                                                {"MASTER_PORT", "7000"}});

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

}  // namespace
}  // namespace mxmaca::api
