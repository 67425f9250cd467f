// api/launch/launch_command.h: `mxmaca launch`, a torchrun-style launcher for one node
// (docs/ARCHITECTURE.md "What users do" 3).
//
//   mxmaca launch --nproc-per-node N [--nnodes M --node-rank K --master-addr A
//                 --master-port P --max-restarts R --exit-timeout S]
//                 -- <mxmaca subcommand and its flags>
//
// starts N copies of this mxmaca binary running the subcommand, each with torchrun's
// variables: RANK = K*N + local rank, WORLD_SIZE = M*N, LOCAL_RANK, LOCAL_WORLD_SIZE = N,
// GROUP_RANK = K, MASTER_ADDR, MASTER_PORT (read back by transport/ucx/launch_env.h),
// TORCHELASTIC_RESTART_COUNT (0 on the first attempt) and TORCHELASTIC_MAX_RESTARTS = R.
// Each child runs in its own process group (torchrun's start_new_session), and every
// signal below goes to the whole group, so a child's own subprocesses stop with it.
// Children die with the launcher (launcher_watch.h): each gets PR_SET_PDEATHSIG = SIGKILL
// and the launcher's pid and start time (MXMACA_LAUNCHER_PID, MXMACA_LAUNCHER_START_TICKS),
// which every mxmaca subcommand watches; a SIGKILL of the launcher ends every rank within
// about a second, without a further checkpoint.
//
// Supervision of one attempt: SIGINT / SIGTERM received by the launcher are forwarded to
// the children, which get signal_grace (30 s, torchrun's close timeout) to finish, e.g.
// to save a checkpoint under `train --exit-signal-handler`, before SIGKILL; when a child
// fails (non-zero exit or a signal) the launcher stops the others (SIGTERM, then SIGKILL
// after `grace`) and reaps every one. Once a child has exited 0, the others must end
// within --exit-timeout seconds (default 120): a child that does not (hung in its
// teardown, stopped by SIGSTOP) is stopped the same way and counts as a failure with exit
// code 1 (`mxmaca launch: local rank L (pid P) still running 120 s after local rank K
// exited 0; stopping it`), so the launcher neither waits forever nor reports success
// for a rank whose end it never saw (with --max-restarts the job restarts and, its last
// checkpoint being the final one, ends at once).
//
// Restarts (torchrun's --max-restarts; default 0): after a failed attempt, if fewer than R
// restarts were done, the launcher prints
//   mxmaca launch: child local rank L exited with code C; restarting the job (k/R)
// and starts the whole group again with the same command and environment, with
// TORCHELASTIC_RESTART_COUNT = k. Pair it with --save / --load on `train` so the new
// attempt resumes from the last checkpoint. A launcher that received SIGINT / SIGTERM
// never restarts.
//
// Exit code: the last attempt's first failure's code (128 + signal for a signal), 0 when
// every child of the last attempt succeeded.
// Flags take "--flag value" or "--flag=value"; torchrun's underscore spellings
// (--nproc_per_node, ...) are accepted too.
#ifndef MXMACA_API_LAUNCH_LAUNCH_COMMAND_H_
#define MXMACA_API_LAUNCH_LAUNCH_COMMAND_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mxmaca::api {

// LaunchArgs: the parsed command line.
struct LaunchArgs {
  int nproc_per_node = 0;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // max_restarts: how many times the whole group is started again after a failure.
  int max_restarts = 0;
  std::vector<std::string> command;  // what follows "--"
  // grace: how long children stopped after a failure get between SIGTERM and SIGKILL.
  absl::Duration grace = absl::Seconds(5);
  // signal_grace: the same after a SIGINT / SIGTERM forwarded from the launcher.
  absl::Duration signal_grace = absl::Seconds(30);
  // exit_timeout (--exit-timeout, seconds): how long the other children may still run
  // after one exited 0.
  absl::Duration exit_timeout = absl::Seconds(120);
};

// ParseLaunchArgs: errors (InvalidArgument) name the flag: unknown flag, missing or
// non-integer value, --nproc-per-node missing or < 1, --nnodes < 1, --node-rank outside
// [0, nnodes), --master-port outside 1..65535, --max-restarts < 0, --exit-timeout < 1,
// nothing after "--".
absl::StatusOr<LaunchArgs> ParseLaunchArgs(const std::vector<std::string>& args);

// ChildEnvironment: the variables set for local rank `local_rank` in attempt
// `restart_count` (0 = the first run), as (name, value), in torchrun's order
// (torch/distributed/elastic/agent/server/local_elastic_agent.py, _start_workers).
std::vector<std::pair<std::string, std::string>> ChildEnvironment(const LaunchArgs& args,
                                                                  int local_rank,
                                                                  int restart_count = 0);

// RunLaunched: starts args.nproc_per_node children `program args.command...` (environment
// inherited plus ChildEnvironment), supervises them and restarts the group as described
// above. Returns the exit code for the launcher (a failed fork: 1, with a message on
// stderr; a program that cannot be executed: 127 from the child, which counts as a
// failure and is restarted like any other).
int RunLaunched(const LaunchArgs& args, const std::string& program);

// RunLaunch: the subcommand — ParseLaunchArgs, then RunLaunched with this binary
// (/proc/self/exe). Usage errors print "mxmaca launch: error: ..." and return 2.
int RunLaunch(const std::vector<std::string>& args);

}  // namespace mxmaca::api

#endif  // MXMACA_API_LAUNCH_LAUNCH_COMMAND_H_
