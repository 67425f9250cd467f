// api/launch/launcher_watch.h: a rank of `mxmaca launch` dies with its launcher (issue 22,
// "nothing orphaned").
//
// When the launcher itself is killed without a chance to stop its children (SIGKILL from
// the OOM killer, `timeout -s KILL`, a node agent), the children would be re-parented to
// PID 1 and keep training and writing checkpoints. Two mechanisms end them instead:
//
//  1. The launcher's child sets prctl(PR_SET_PDEATHSIG, SIGKILL) between fork and exec:
//     the kernel kills the rank the moment the launcher exits (launch_command.cc).
//  2. The launcher passes its identity in the environment (kLauncherPidVariable,
//     kLauncherStartVariable: its pid and its /proc start time, so that a reused pid is not
//     mistaken for it), and every mxmaca subcommand started with them runs StartLauncherWatch:
//     a thread that checks every `period` that this very process is still alive. It covers
//     what (1) does not: a rank that was exec'd through a wrapper (e.g. `env`, `numactl`,
//     a shell) or re-parented, for which the death signal was reset or tied to another parent.
//
// Either way the rank ends within about a second of the launcher, with no chance to write
// anything further (no checkpoint save, no tracker update): a save that was in progress
// leaves only its temp directory, which the next save removes (docs/CHECKPOINTS.md).
#ifndef MXMACA_API_LAUNCH_LAUNCHER_WATCH_H_
#define MXMACA_API_LAUNCH_LAUNCHER_WATCH_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mxmaca::api {

// kLauncherPidVariable / kLauncherStartVariable: set by `mxmaca launch` in each child's
// environment: the launcher's pid and its start time (field 22 of /proc/<pid>/stat).
inline constexpr char kLauncherPidVariable[] = "MXMACA_LAUNCHER_PID";
inline constexpr char kLauncherStartVariable[] = "MXMACA_LAUNCHER_START_TICKS";

// kLauncherGoneExitCode: a rank's exit code when it ends because its launcher is gone
// (128 + SIGKILL, as if the launcher's death signal had killed it).
inline constexpr int kLauncherGoneExitCode = 137;

// LauncherIdentity: who started this process.
struct LauncherIdentity {
  pid_t pid = 0;
  std::optional<uint64_t> start_ticks;  // absent if the variable was not set
};

// LauncherFromEnvironment: the launcher named by the two variables; nullopt when
// kLauncherPidVariable is unset (not started by `mxmaca launch`). Errors (InvalidArgument,
// naming the variable and its value): a pid that is not a positive decimal integer, a start
// time that is not a decimal integer.
absl::StatusOr<std::optional<LauncherIdentity>> LauncherFromEnvironment();

// StartLauncherWatch: when this process was started by `mxmaca launch`
// (LauncherFromEnvironment), starts a detached thread that every `period` checks that the
// launcher is alive (base::ProcessAlive with its start time). When it is not, `on_gone`
// runs once on that thread; the default prints
//   mxmaca: the launcher (pid N) is gone; exiting at once, writing nothing further
// to stderr and ends the process with std::_Exit(kLauncherGoneExitCode) (no destructors,
// no flushing of half-written files). Returns whether a watch was started. When the
// launcher is already gone at the call, on_gone runs before StartLauncherWatch returns.
// Errors: LauncherFromEnvironment's.
absl::StatusOr<bool> StartLauncherWatch(absl::Duration period = absl::Milliseconds(250),
                                        std::function<void(pid_t launcher)> on_gone = {});

}  // namespace mxmaca::api

#endif  // MXMACA_API_LAUNCH_LAUNCHER_WATCH_H_
