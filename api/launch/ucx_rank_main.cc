// api/launch/ucx_rank_main.cc: a test program for launched_ucx_test — one rank of a job
// started by `mxmaca launch`: reads its rank from the launcher's environment
// (DetectLaunchEnv), joins the UCX communicator and all-reduces a vector whose sum it can
// check (rank r contributes r + 1 everywhere, so the sum is n(n+1)/2 exactly in fp32).
// Exit 0 on success; prints the error and exits 1 otherwise.
#include <cstdio>
#include <vector>

#include "absl/synchronization/notification.h"
#include "transport/ucx/launch_env.h"
#include "transport/ucx/ucx_communicator.h"

int main() {
  using namespace mxmaca::transport;
  auto env = ucx::DetectLaunchEnv();
  if (!env.ok()) {
    std::fprintf(stderr, "%s\n", env.status().ToString().c_str());
    return 1;
  }
  auto comm = ucx::UcxCommunicator::CreateFromLaunchEnv(*env, absl::Seconds(20), {});
  if (!comm.ok()) {
    std::fprintf(stderr, "%s\n", comm.status().ToString().c_str());
    return 1;
  }
  ProcessGroup world;
  world.id = static_cast<int64_t>(GroupKind::kWorld) * env->world_size;
  for (int r = 0; r < env->world_size; ++r) world.ranks.push_back(r);
  world.rank_in_group = env->rank;
  std::vector<float> x(1000, static_cast<float>(env->rank + 1));
  absl::Notification done;
  absl::Status result;
  (*comm)->AllReduceSum(world, x.data(), x.data(), static_cast<int64_t>(x.size()),
                        [&](const CollectiveInfo&, absl::Status s) {
                          result = s;
                          done.Notify();
                        });
  done.WaitForNotification();
  const float want = env->world_size * (env->world_size + 1) / 2.0f;
  for (float v : x) {
    if (result.ok() && v != want) result = absl::InternalError("wrong sum");
  }
  absl::Status closed = (*comm)->Close();
  if (!result.ok() || !closed.ok()) {
    std::fprintf(stderr, "rank %d: %s %s\n", env->rank, result.ToString().c_str(),
                 closed.ToString().c_str());
    return 1;
  }
  std::printf("rank %d of %d (%s): sum %g ok\n", env->rank, env->world_size, env->source.c_str(),
              static_cast<double>(want));
  return 0;
}
