// api/launch/launch_command.h: `mxmaca launch`, a torchrun-style launcher for one node
// (DESIGN.md "What users do" 3).
//
//   mxmaca launch --nproc-per-node N [--nnodes M --node-rank K --master-addr A
//                 --master-port P] -- <mxmaca subcommand and its flags>
//
// starts N copies of this mxmaca binary running the subcommand, each with torchrun's
// variables: RANK = K*N + local rank, WORLD_SIZE = M*N, LOCAL_RANK, LOCAL_WORLD_SIZE = N,
// GROUP_RANK = K, MASTER_ADDR, MASTER_PORT (read back by transport/ucx/launch_env.h). It
// forwards SIGINT / SIGTERM to the children; when a child fails (non-zero exit or a
// signal) it stops the others (SIGTERM, then SIGKILL after a grace period) and exits with
// that first failure's code (128 + signal for a signal); 0 when every child succeeds.
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
  std::vector<std::string> command;  // what follows "--"
  // grace: how long stopped children get between SIGTERM and SIGKILL.
  absl::Duration grace = absl::Seconds(5);
};

// ParseLaunchArgs: errors (InvalidArgument) name the flag: unknown flag, missing or
// non-integer value, --nproc-per-node missing or < 1, --nnodes < 1, --node-rank outside
// [0, nnodes), --master-port outside 1..65535, nothing after "--".
absl::StatusOr<LaunchArgs> ParseLaunchArgs(const std::vector<std::string>& args);

// ChildEnvironment: the variables set for local rank `local_rank`, as (name, value).
std::vector<std::pair<std::string, std::string>> ChildEnvironment(const LaunchArgs& args,
                                                                  int local_rank);

// RunLaunched: starts args.nproc_per_node children `program args.command...` (environment
// inherited plus ChildEnvironment) and supervises them as described above. Returns the
// exit code for the launcher (a failure to start a child: 1, with a message on stderr).
int RunLaunched(const LaunchArgs& args, const std::string& program);

// RunLaunch: the subcommand — ParseLaunchArgs, then RunLaunched with this binary
// (/proc/self/exe). Usage errors print "mxmaca launch: error: ..." and return 2.
int RunLaunch(const std::vector<std::string>& args);

}  // namespace mxmaca::api

#endif  // MXMACA_API_LAUNCH_LAUNCH_COMMAND_H_
