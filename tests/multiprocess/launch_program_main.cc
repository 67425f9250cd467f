// tests/multiprocess/launch_program_main.cc: `mxmaca launch` for a program that is not an
// mxmaca subcommand. The launcher (api/launch/launch_command.h) re-runs its own binary
// (/proc/self/exe) with the subcommand; test programs such as api/launch:ucx_rank_main are
// separate binaries, so this driver runs the same launcher code (ParseLaunchArgs +
// RunLaunched) on a program named after "--", as torchrun runs a script:
//
//   launch_program --nproc-per-node N [--nnodes M --node-rank K --master-addr A
//                  --master-port P] -- <program> [program args...]
//
// Each child runs `<program> [program args...]` with torchrun's variables. Exit code:
// RunLaunched's (0 when every child succeeds, else the first failure's code); 2 with
// "launch_program: error: ..." on stderr for a usage error (ParseLaunchArgs's message).
#include <cstdio>
#include <string>
#include <vector>

#include "api/launch/launch_command.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = mxmaca::api::ParseLaunchArgs(args);
  if (!parsed.ok()) {
    std::fprintf(stderr, "launch_program: error: %s\n",
                 std::string(parsed.status().message()).c_str());
    return 2;
  }
  // ParseLaunchArgs guarantees a non-empty command; its first word is the program.
  const std::string program = parsed->command.front();
  parsed->command.erase(parsed->command.begin());
  return mxmaca::api::RunLaunched(*parsed, program);
}
