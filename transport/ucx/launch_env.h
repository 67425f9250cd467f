// transport/ucx/launch_env.h: which rank this process is, read from the launcher's
// environment (docs/ARCHITECTURE.md "What users do": `mxmaca launch`, torchrun, Slurm `srun`, `mpirun`).
//
// Sources, first match wins:
//   torchrun   RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (torch.distributed's
//              env:// rendezvous; `mxmaca launch` sets the same variables).
//   Slurm      SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; the master is the first host of
//              SLURM_JOB_NODELIST (compressed hostlist syntax, e.g. "node[01-04,07]").
//   Open MPI   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK.
//   none       a single process: rank 0 of 1.
// MASTER_ADDR / MASTER_PORT, when set, override the master under every source (as with
// Megatron under Slurm, where a job script exports them); otherwise the master address is
// the first Slurm host, or 127.0.0.1, and the port kDefaultMasterPort (torchrun's 29500).
#ifndef MXMACA_TRANSPORT_UCX_LAUNCH_ENV_H_
#define MXMACA_TRANSPORT_UCX_LAUNCH_ENV_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mxmaca::transport::ucx {

// kDefaultMasterPort: torchrun's default rendezvous port.
inline constexpr int kDefaultMasterPort = 29500;

// LaunchEnv: this process's place in the job.
struct LaunchEnv {
  int rank = 0;                           // global rank, 0 <= rank < world_size
  int world_size = 1;                     // number of processes in the job
  int local_rank = 0;                     // rank among the processes on this host
  std::string master_addr = "127.0.0.1";  // host of rank 0's rendezvous listener
  int master_port = kDefaultMasterPort;   // TCP port, 1..65535
  // source: "torchrun", "slurm", "openmpi" or "none" — which variables were read.
  std::string source = "none";

  // ToString: e.g. "rank 3 of 8 (local 3) master 10.0.0.1:29500 from torchrun".
  std::string ToString() const;
};

// GetEnv: looks up one environment variable; nullptr when unset. Tests pass a map lookup.
using GetEnv = std::function<const char*(const char* name)>;

// DetectLaunchEnv: reads the variables above through `getenv` (default: ::getenv).
// Errors (InvalidArgument, naming the variable and its value): a value that is not a
// decimal integer, rank outside [0, world_size), world_size < 1, local_rank < 0, a port
// outside 1..65535, a variable of a source set without its partner (e.g. RANK without
// WORLD_SIZE), or an unparsable SLURM_JOB_NODELIST.
absl::StatusOr<LaunchEnv> DetectLaunchEnv(const GetEnv& getenv = {});

// ExpandSlurmHostlist: expands Slurm's compressed hostlist syntax, in order:
// "node[01-04,07],gpu7,r[1-2]-n[1-2]" -> node01 node02 node03 node04 node07 gpu7 r1-n1 r1-n2
// r2-n1 r2-n2. Numbers keep the zero padding of the range's first bound ("[08-10]" -> 08,
// 09, 10). Commas inside brackets separate ranges; outside they separate host
// expressions; several bracket groups in one expression multiply out (last fastest).
// Errors: InvalidArgument for unbalanced or nested brackets, an empty range, a descending
// range, or a non-numeric bound, naming the offending text.
absl::StatusOr<std::vector<std::string>> ExpandSlurmHostlist(absl::string_view hostlist);

}  // namespace mxmaca::transport::ucx

#endif  // MXMACA_TRANSPORT_UCX_LAUNCH_ENV_H_
