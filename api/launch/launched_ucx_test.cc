// api/launch/launched_ucx_test.cc (tag multiprocess): the whole start-up chain — the
// launcher sets torchrun's variables, each child reads them (DetectLaunchEnv), meets the
// others at the rendezvous and all-reduces over UCX (ucx_rank_main.cc).
#include <catch2/catch.hpp>
#include <string>

#include "api/launch/launch_command.h"
#include "transport/ucx/multiprocess_testing.h"

namespace mxmaca::api {
namespace {

TEST_CASE("mxmaca launch -> launch_env -> rendezvous -> UCX all-reduce, 3 ranks") {
  LaunchArgs a;
  a.nproc_per_node = 3;
  a.master_port = transport::ucx::FreeTcpPort();
  // Runfiles: the test runs in the workspace root of its runfiles tree.
  CHECK(RunLaunched(a, "api/launch/ucx_rank_main") == 0);
}

TEST_CASE("a failing rank ends the launched job with its code") {
  LaunchArgs a;
  a.nproc_per_node = 2;
  a.master_port = 0;  // invalid port: every child fails in DetectLaunchEnv (exit 1)
  CHECK(RunLaunched(a, "api/launch/ucx_rank_main") == 1);
}

}  // namespace
}  // namespace mxmaca::api
