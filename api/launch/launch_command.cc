// api/launch/launch_command.cc: argument parsing, fork/exec and supervision of the
// children of `mxmaca launch`.
#include "api/launch/launch_command.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "api/args/subcommand_flags.h"
#include "api/launch/launcher_watch.h"
#include "base/process_info.h"

namespace mxmaca::api {

absl::StatusOr<LaunchArgs> ParseLaunchArgs(const std::vector<std::string>& args) {
  LaunchArgs out;
  size_t i = args.size();
  bool separator = false;
  for (FlagCursor c(args); c.Next();) {
    if (c.arg() == "--") {
      separator = true;
      i = c.index() + 1;
      break;
    }
    if (!absl::StartsWith(c.arg(), "--")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument \"", c.arg(),
                       "\": launcher flags come first, then \"--\" and the "
                       "mxmaca subcommand"));
    }
    // torchrun's underscore spellings too (--nproc_per_node).
    const std::string flag = absl::StrReplaceAll(c.flag(), {{"_", "-"}});
    absl::StatusOr<std::string> got = c.Value();
    if (!got.ok()) return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
    const std::string value = *got;
    auto integer = [&](int* dst) -> absl::Status {
      if (!absl::SimpleAtoi(value, dst)) {
        return absl::InvalidArgumentError(absl::StrCat(flag, "=\"", value, "\" is not an integer"));
      }
      return absl::OkStatus();
    };
    absl::Status s;
    if (flag == "--nproc-per-node") {
      s = integer(&out.nproc_per_node);
    } else if (flag == "--nnodes") {
      s = integer(&out.nnodes);
    } else if (flag == "--node-rank") {
      s = integer(&out.node_rank);
    } else if (flag == "--master-addr") {
      out.master_addr = value;
    } else if (flag == "--master-port") {
      s = integer(&out.master_port);
    } else if (flag == "--max-restarts") {
      s = integer(&out.max_restarts);
    } else if (flag == "--exit-timeout") {
      int seconds = 0;
      s = integer(&seconds);
      if (s.ok() && seconds < 1) {
        s = absl::InvalidArgumentError(
            absl::StrCat("--exit-timeout must be at least 1 second (got ", seconds, ")"));
      }
      out.exit_timeout = absl::Seconds(seconds);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown launcher flag ", flag,
                       " (known: --nproc-per-node, --nnodes, --node-rank, "
                       "--master-addr, --master-port, --max-restarts, --exit-timeout)"));
    }
    if (!s.ok()) return s;
  }
  if (!separator || i >= args.size()) {
    return absl::InvalidArgumentError(
        "no command: write \"--\" and the mxmaca subcommand to run, e.g. "
        "mxmaca launch --nproc-per-node 2 -- train ...");
  }
  out.command.assign(args.begin() + static_cast<long>(i), args.end());
  if (out.nproc_per_node < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nproc-per-node must be at least 1 (got ", out.nproc_per_node, ")"));
  }
  if (out.nnodes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nnodes must be at least 1 (got ", out.nnodes, ")"));
  }
  if (out.node_rank < 0 || out.node_rank >= out.nnodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--node-rank ", out.node_rank, " outside [0, --nnodes ", out.nnodes, ")"));
  }
  if (out.master_port < 1 || out.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--master-port ", out.master_port, " outside 1..65535"));
  }
  if (out.max_restarts < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-restarts must be at least 0 (got ", out.max_restarts, ")"));
  }
  if (out.master_addr.empty()) return absl::InvalidArgumentError("--master-addr is empty");
  return out;
}

std::vector<std::pair<std::string, std::string>> ChildEnvironment(const LaunchArgs& args,
                                                                  int local_rank,
                                                                  int restart_count) {
  const int world = args.nnodes * args.nproc_per_node;
  return {
      {"RANK", absl::StrCat(args.node_rank * args.nproc_per_node + local_rank)},
      {"WORLD_SIZE", absl::StrCat(world)},
      {"LOCAL_RANK", absl::StrCat(local_rank)},
      {"LOCAL_WORLD_SIZE", absl::StrCat(args.nproc_per_node)},
      {"GROUP_RANK", absl::StrCat(args.node_rank)},
      {"MASTER_ADDR", args.master_addr},
      {"MASTER_PORT", absl::StrCat(args.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", absl::StrCat(restart_count)},
      {"TORCHELASTIC_MAX_RESTARTS", absl::StrCat(args.max_restarts)},
  };
}

namespace {

// ExitCode: the shell's convention for a wait status.
int ExitCode(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return 1;
}

// AttemptResult: how one start of the whole group ended.
struct AttemptResult {
  int code = 0;              // first failure's exit code (128 + signal); 0 = all succeeded
  int failed_rank = -1;      // local rank of that first failure; -1 = none (or fork failed)
  bool interrupted = false;  // the launcher received SIGINT / SIGTERM during the attempt
};

// RunAttempt: starts the group once and supervises it until every child is reaped.
// `watched` (SIGINT, SIGTERM, SIGCHLD) is blocked in this thread; children get
// `original` back before exec.
AttemptResult RunAttempt(const LaunchArgs& args, const std::string& program, int restart_count,
                         const sigset_t& watched, const sigset_t& original) {
  AttemptResult result;
  std::fflush(nullptr);
  // The children learn who started them (launcher_watch.h): pid and start time.
  const pid_t launcher = ::getpid();
  const std::string launcher_pid = absl::StrCat(launcher);
  const std::optional<uint64_t> launcher_ticks = base::ProcessStartTicks(launcher);
  const std::string launcher_start = launcher_ticks ? absl::StrCat(*launcher_ticks) : "";
  std::vector<pid_t> children;
  for (int local = 0; local < args.nproc_per_node; ++local) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      // Own process group, so that the launcher's signals reach the child's subprocesses
      // too (and a terminal's Ctrl-C reaches only the launcher, which forwards it).
      ::setpgid(0, 0);
      // Die with the launcher: if it is killed outright (SIGKILL, the OOM killer), the
      // kernel sends this child SIGKILL rather than leaving it running under PID 1. The
      // launcher may have died between fork and prctl: then the parent is already another.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher) ::_exit(kLauncherGoneExitCode);
      // Default dispositions before unblocking: a SIGTERM that arrives before exec must
      // end this copy of the launcher, not run the launcher's (or a test's) handlers.
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      pthread_sigmask(SIG_SETMASK, &original, nullptr);
      for (const auto& [name, value] : ChildEnvironment(args, local, restart_count)) {
        ::setenv(name.c_str(), value.c_str(), 1);
      }
      ::setenv(kLauncherPidVariable, launcher_pid.c_str(), 1);
      if (launcher_ticks) {
        ::setenv(kLauncherStartVariable, launcher_start.c_str(), 1);
      } else {
        ::unsetenv(kLauncherStartVariable);
      }
      std::vector<char*> argv;
      std::string argv0 = program;
      argv.push_back(argv0.data());
      std::vector<std::string> copy = args.command;
      for (std::string& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(program.c_str(), argv.data());
      std::fprintf(stderr, "mxmaca launch: error: cannot run %s: %s\n", program.c_str(),
                   std::strerror(errno));
      ::_exit(127);
    }
    if (pid < 0) {
      std::fprintf(stderr, "mxmaca launch: error: fork failed: %s\n", std::strerror(errno));
      result.code = 1;
      break;
    }
    // Also here, so that the group exists before the first kill(-pid) whichever of parent
    // and child runs first (EACCES once the child has exec'd is harmless: it did it).
    ::setpgid(pid, pid);
    children.push_back(pid);
  }

  std::vector<bool> running(children.size(), true);
  size_t alive = children.size();
  bool stopping = result.code != 0;
  absl::Time kill_at = absl::InfiniteFuture();
  // After the first child that exited 0: the others' deadline (--exit-timeout).
  absl::Time exit_deadline = absl::InfiniteFuture();
  int first_success = -1;
  auto signal_all = [&](int sig) {
    for (size_t k = 0; k < children.size(); ++k) {
      if (running[k]) ::kill(-children[k], sig);
    }
  };
  if (stopping) {
    signal_all(SIGTERM);
    kill_at = absl::Now() + args.grace;
  }
  while (alive > 0) {
    // Reap whoever has ended. Of the failures reaped in one pass (children that ended
    // within the same 100 ms), a child killed by a signal is reported over those that
    // exited with an error: the others usually exited because they lost it (a kill -9 of
    // one rank makes its peers fail a moment later), and waitpid's order among them is
    // arbitrary.
    int wstatus = 0;
    pid_t pid;
    const bool first_pass_failure = result.code == 0;
    pid_t failed_pid = 0;
    while ((pid = ::waitpid(-1, &wstatus, WNOHANG)) > 0) {
      for (size_t k = 0; k < children.size(); ++k) {
        if (children[k] != pid || !running[k]) continue;
        running[k] = false;
        --alive;
        const int code = ExitCode(wstatus);
        const bool better =
            result.code == 0 || (first_pass_failure && result.code < 128 && code >= 128);
        if (code != 0 && better) {
          result.code = code;
          result.failed_rank = static_cast<int>(k);
          failed_pid = pid;
        }
        if (code == 0 && first_success < 0) {
          first_success = static_cast<int>(k);
          exit_deadline = absl::Now() + args.exit_timeout;
        }
      }
    }
    if (first_pass_failure && result.code != 0) {
      std::fprintf(stderr,
                   "mxmaca launch: local rank %d (pid %d) failed with exit code %d; "
                   "stopping the others\n",
                   result.failed_rank, static_cast<int>(failed_pid), result.code);
    }
    if (result.code != 0 && !stopping) {
      stopping = true;
      signal_all(SIGTERM);
      kill_at = absl::Now() + args.grace;
    }
    if (alive == 0) break;
    if (!stopping && absl::Now() >= exit_deadline) {
      // A child still running long after another exited 0: hung at its end (or stopped).
      for (size_t k = 0; k < children.size(); ++k) {
        if (!running[k]) continue;
        std::fprintf(stderr,
                     "mxmaca launch: local rank %d (pid %d) still running %s after local rank "
                     "%d exited 0; stopping it\n",
                     static_cast<int>(k), static_cast<int>(children[k]),
                     absl::FormatDuration(args.exit_timeout).c_str(), first_success);
        if (result.code == 0) {
          result.code = 1;
          result.failed_rank = static_cast<int>(k);
        }
      }
      stopping = true;
      signal_all(SIGTERM);
      kill_at = absl::Now() + args.grace;
    }
    if (absl::Now() >= kill_at) {
      signal_all(SIGKILL);
      kill_at = absl::InfiniteFuture();
    }
    timespec wait = {0, 100 * 1000 * 1000};
    const int sig = sigtimedwait(&watched, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) {
      // Forward; the children decide how to end (their exit codes are reported as usual).
      result.interrupted = true;
      signal_all(sig);
      if (!stopping) {
        stopping = true;
        kill_at = absl::Now() + args.signal_grace;
      }
    }
  }
  if (stopping) {
    // A stopped child's leftover subprocesses (e.g. ones that ignore SIGTERM and outlived
    // their parent) must not survive into the next attempt. A group id stays reserved
    // while any member lives, and pids are handed out cyclically, so an emptied group's
    // id is not someone else's this soon after the reap: this reaches only our groups.
    for (const pid_t child : children) ::kill(-child, SIGKILL);
  }
  return result;
}

// InterruptPending: consumes a SIGINT / SIGTERM that arrived after the last attempt's
// final wait (so still pending); true if there was one.
bool InterruptPending(const sigset_t& watched) {
  bool interrupted = false;
  timespec now = {0, 0};
  int sig;
  while ((sig = sigtimedwait(&watched, nullptr, &now)) > 0) {
    if (sig == SIGINT || sig == SIGTERM) interrupted = true;
  }
  return interrupted;
}

}  // namespace

int RunLaunched(const LaunchArgs& args, const std::string& program) {
  // Signals are taken synchronously (sigtimedwait) in this thread.
  sigset_t watched, original;
  sigemptyset(&watched);
  sigaddset(&watched, SIGINT);
  sigaddset(&watched, SIGTERM);
  sigaddset(&watched, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &watched, &original);

  AttemptResult last;
  for (int restart = 0;; ++restart) {
    last = RunAttempt(args, program, restart, watched, original);
    if (last.code == 0 || last.interrupted || InterruptPending(watched)) break;
    if (restart >= args.max_restarts || last.failed_rank < 0) break;
    std::fprintf(stderr,
                 "mxmaca launch: child local rank %d exited with code %d; restarting the job "
                 "(%d/%d)\n",
                 last.failed_rank, last.code, restart + 1, args.max_restarts);
  }
  pthread_sigmask(SIG_SETMASK, &original, nullptr);
  return last.code;
}

int RunLaunch(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(
        "usage: mxmaca launch --nproc-per-node N [--nnodes M --node-rank R --master-addr HOST "
        "--master-port PORT --max-restarts K --exit-timeout S] -- <mxmaca subcommand and its "
        "flags>\n"
        "Starts N processes of this binary on this node with torchrun's variables (RANK, "
        "WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT), "
        "forwards SIGINT/SIGTERM, and when a child fails stops the others; then starts the "
        "whole group again up to K times (default 0), else exits with the first failing "
        "child's code. Once a child exited 0, the others must exit within S seconds "
        "(default 120), or they are stopped and the attempt fails.\n",
        stdout);
    return 0;
  }
  auto parsed = ParseLaunchArgs(args);
  if (!parsed.ok()) {
    std::fprintf(stderr, "mxmaca launch: error: %s\n",
                 std::string(parsed.status().message()).c_str());
    return 2;
  }
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) {
    std::fprintf(stderr, "mxmaca launch: error: cannot find this binary (/proc/self/exe)\n");
    return 1;
  }
  self[n] = '\0';
  return RunLaunched(*parsed, self);
}

}  // namespace mxmaca::api
