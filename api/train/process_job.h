// api/train/process_job.h: whether `mxmaca train` runs as one process of a multi-process
// job, and its UCX endpoint (docs/MULTIPROCESS.md "How training runs across processes").
//
// A process started by `mxmaca launch`, torchrun, Slurm `srun` or `mpirun` finds its rank
// and the job's size in its environment (transport/ucx/launch_env.h). When the job has more
// than one process, every process holds exactly one rank of the (tp, pp, dp) grid — rank =
// the launcher's RANK, in Megatron's order — and they meet at MASTER_ADDR:MASTER_PORT.
#ifndef MXMACA_API_TRAIN_PROCESS_JOB_H_
#define MXMACA_API_TRAIN_PROCESS_JOB_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "transport/ucx/launch_env.h"
#include "transport/ucx/ucx_communicator.h"

namespace mxmaca::api {

// ProcessJob: this process's place in a multi-process job and its endpoint.
struct ProcessJob {
  transport::ucx::LaunchEnv env;
  std::unique_ptr<transport::ucx::UcxCommunicator> comm;
};

// DetectProcessJob: the launcher's environment; nullopt for a one-process run (no launcher
// variables, or a world of 1). Errors: DetectLaunchEnv's (a malformed variable), and
// InvalidArgument when --world-size (`world_size_flag`, 0 = not given) disagrees with the
// launcher's WORLD_SIZE.
absl::StatusOr<std::optional<transport::ucx::LaunchEnv>> DetectProcessJob(int64_t world_size_flag);

// JoinProcessJob: meets the other processes at the rendezvous (waiting at most `timeout`
// for all to arrive) and creates the UCX communicator, whose collectives time out after
// `collective_timeout` and which notices a lost peer (UCX peer-failure mode). Errors: the
// rendezvous' (DeadlineExceeded naming the ranks that never arrived) and UCX's.
// `progress` (may be empty) gets the rendezvous' line every 10 s while ranks are missing
// (RendezvousOptions::progress), with " (--distributed-timeout-minutes)" after the timeout.
absl::StatusOr<ProcessJob> JoinProcessJob(
    const transport::ucx::LaunchEnv& env, absl::Duration timeout,
    absl::Duration collective_timeout,
    std::function<void(const std::string&)> progress = {});

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_PROCESS_JOB_H_
