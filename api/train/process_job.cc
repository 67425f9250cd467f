// api/train/process_job.cc: see process_job.h.
#include "api/train/process_job.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace mxmaca::api {

absl::StatusOr<std::optional<transport::ucx::LaunchEnv>> DetectProcessJob(
    int64_t world_size_flag) {
  absl::StatusOr<transport::ucx::LaunchEnv> env = transport::ucx::DetectLaunchEnv();
  if (!env.ok()) return env.status();
  if (env->world_size <= 1) return std::nullopt;
  if (world_size_flag > 0 && world_size_flag != env->world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--world-size ", world_size_flag, " but the launcher started ", env->world_size,
        " processes (", env->ToString(), "); drop --world-size or make them agree"));
  }
  return *env;
}

absl::StatusOr<ProcessJob> JoinProcessJob(const transport::ucx::LaunchEnv& env,
                                          absl::Duration timeout,
                                          absl::Duration collective_timeout,
                                          std::function<void(const std::string&)> progress) {
  transport::ucx::UcxCommunicator::Options options;
  options.progress = std::move(progress);
  options.timeout_hint = " (--distributed-timeout-minutes)";
  options.timeout = collective_timeout;
  options.detect_peer_failure = true;
  absl::StatusOr<std::unique_ptr<transport::ucx::UcxCommunicator>> comm =
      transport::ucx::UcxCommunicator::CreateFromLaunchEnv(env, timeout, options);
  if (!comm.ok()) {
    return absl::Status(comm.status().code(),
                        absl::StrCat("joining the job as ", env.ToString(), ": ",
                                     comm.status().message()));
  }
  ProcessJob job;
  job.env = env;
  job.comm = std::move(*comm);
  return job;
}

}  // namespace mxmaca::api
