// tests/multiprocess/allreduce_rank_main.cc: one rank of a launched job (launcher
// variables, transport/ucx/launch_env.h) that all-reduces a buffer of a chosen size over
// the world and checks every element — api/launch/ucx_rank_main with a payload large
// enough that the traffic it must put on the wire dwarfs the rendezvous and UCX wire-up
// (two_host_netns_test compares it with the veth's byte counters).
//
//   allreduce_rank_main --floats N      (N >= 1; default 1,048,576 = 4 MiB of fp32)
//
// Rank r contributes x[i] = (r + 1) * (1 + i % 7); the sum over n ranks is
// n (n + 1) / 2 * (1 + i % 7): small integers, exact in fp32 in any summation order.
// Prints "rank R of W: all-reduce of N floats ok" and exits 0; on any error prints it and
// exits 1 (2 for a usage error).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/synchronization/notification.h"
#include "transport/ucx/launch_env.h"
#include "transport/ucx/ucx_communicator.h"

int main(int argc, char** argv) {
  using namespace mxmaca::transport;
  int64_t floats = int64_t{1} << 20;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--floats" && i + 1 < argc && absl::SimpleAtoi(argv[i + 1], &floats) &&
        floats >= 1) {
      ++i;
      continue;
    }
    std::fprintf(stderr, "usage: allreduce_rank_main [--floats N >= 1] (bad argument \"%s\")\n",
                 flag.c_str());
    return 2;
  }
  auto env = ucx::DetectLaunchEnv();
  if (!env.ok()) {
    std::fprintf(stderr, "%s\n", env.status().ToString().c_str());
    return 1;
  }
  auto comm = ucx::UcxCommunicator::CreateFromLaunchEnv(*env, absl::Seconds(30), {});
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", env->rank, comm.status().ToString().c_str());
    return 1;
  }
  ProcessGroup world;
  world.id = static_cast<int64_t>(GroupKind::kWorld) * env->world_size;
  for (int r = 0; r < env->world_size; ++r) world.ranks.push_back(r);
  world.rank_in_group = env->rank;
  std::vector<float> x(static_cast<size_t>(floats));
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>((env->rank + 1) * (1 + static_cast<int>(i % 7)));
  }
  absl::Notification done;
  absl::Status result;
  (*comm)->AllReduceSum(world, x.data(), x.data(), floats,
                        [&](const CollectiveInfo&, absl::Status s) {
                          result = s;
                          done.Notify();
                        });
  done.WaitForNotification();
  const int n = env->world_size;
  for (size_t i = 0; i < x.size() && result.ok(); ++i) {
    const float want = static_cast<float>(n * (n + 1) / 2 * (1 + static_cast<int>(i % 7)));
    if (x[i] != want) {
      result = absl::InternalError(
          "element " + std::to_string(i) + " is " + std::to_string(x[i]) + ", expected " +
          std::to_string(want));
    }
  }
  absl::Status closed = (*comm)->Close();
  if (!result.ok() || !closed.ok()) {
    std::fprintf(stderr, "rank %d: %s %s\n", env->rank, result.ToString().c_str(),
                 closed.ToString().c_str());
    return 1;
  }
  std::printf("rank %d of %d: all-reduce of %lld floats ok\n", env->rank, n,
              static_cast<long long>(floats));
  return 0;
}
