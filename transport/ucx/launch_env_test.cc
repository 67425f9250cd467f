// transport/ucx/launch_env_test.cc: launcher variables of torchrun, Slurm and Open MPI, and
// Slurm's compressed hostlists (expected lists written from Slurm's documented syntax).
#include "transport/ucx/launch_env.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

namespace mxmaca::transport::ucx {
namespace {

// Env: a fake environment for DetectLaunchEnv.
GetEnv Env(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST_CASE("no launcher variables: a single process") {
  auto env = DetectLaunchEnv(Env({}));
  REQUIRE(env.ok());
  CHECK(env->rank == 0);
  CHECK(env->world_size == 1);
  CHECK(env->source == "none");
  CHECK(env->master_addr == "127.0.0.1");
  CHECK(env->master_port == kDefaultMasterPort);
}

TEST_CASE("torchrun variables") {
  auto env = DetectLaunchEnv(Env({{"RANK", "5"},
                                  {"WORLD_SIZE", "8"},
                                  {"LOCAL_RANK", "1"},
                                  {"MASTER_ADDR", "10.1.2.3"},
                                  {"MASTER_PORT", "6000"},
                                  // Slurm variables are present too (torchrun inside srun):
                                  // torchrun's win.
                                  {"SLURM_PROCID", "0"},
                                  {"SLURM_NTASKS", "2"}}));
  REQUIRE(env.ok());
  CHECK(env->rank == 5);
  CHECK(env->world_size == 8);
  CHECK(env->local_rank == 1);
  CHECK(env->master_addr == "10.1.2.3");
  CHECK(env->master_port == 6000);
  CHECK(env->source == "torchrun");
  CHECK(env->ToString() == "rank 5 of 8 (local 1) master 10.1.2.3:6000 from torchrun");
}

TEST_CASE("Slurm variables: master is the first host of the node list") {
  auto env = DetectLaunchEnv(Env({{"SLURM_PROCID", "6"},
                                  {"SLURM_NTASKS", "16"},
                                  {"SLURM_LOCALID", "2"},
                                  {"SLURM_JOB_NODELIST", "gpu-a[07-09,12],login3"}}));
  REQUIRE(env.ok());
  CHECK(env->rank == 6);
  CHECK(env->world_size == 16);
  CHECK(env->local_rank == 2);
  CHECK(env->master_addr == "gpu-a07");
  CHECK(env->master_port == kDefaultMasterPort);
  CHECK(env->source == "slurm");

  // A job script's MASTER_ADDR / MASTER_PORT override.
  auto overridden = DetectLaunchEnv(Env({{"SLURM_PROCID", "0"},
                                         {"SLURM_NTASKS", "2"},
                                         {"SLURM_JOB_NODELIST", "n[1-2]"},
                                         {"MASTER_ADDR", "head"},
                                         {"MASTER_PORT", "1234"}}));
  REQUIRE(overridden.ok());
  CHECK(overridden->master_addr == "head");
  CHECK(overridden->master_port == 1234);
}

TEST_CASE("Open MPI variables") {
  auto env = DetectLaunchEnv(Env({{"OMPI_COMM_WORLD_RANK", "3"},
                                  {"OMPI_COMM_WORLD_SIZE", "4"},
                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}}));
  REQUIRE(env.ok());
  CHECK(env->rank == 3);
  CHECK(env->world_size == 4);
  CHECK(env->local_rank == 3);
  CHECK(env->source == "openmpi");
  CHECK(env->master_addr == "127.0.0.1");
}

TEST_CASE("bad launcher variables name the variable and value") {
  auto message = [](const std::map<std::string, std::string>& vars) {
    auto env = DetectLaunchEnv(Env(vars));
    REQUIRE_FALSE(env.ok());
    CHECK(env.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(env.status().message());
  };
  CHECK_THAT(message({{"RANK", "x1"}, {"WORLD_SIZE", "2"}}),
             Catch::Contains("RANK=\"x1\" is not an integer"));
  CHECK_THAT(message({{"RANK", "2"}, {"WORLD_SIZE", "2"}}),
             Catch::Contains("RANK=2 is outside [0, WORLD_SIZE=2)"));
  CHECK_THAT(message({{"RANK", "0"}}), Catch::Contains("RANK is set but WORLD_SIZE is not"));
  CHECK_THAT(message({{"SLURM_NTASKS", "4"}}),
             Catch::Contains("SLURM_NTASKS is set but SLURM_PROCID is not"));
  CHECK_THAT(message({{"RANK", "0"}, {"WORLD_SIZE", "0"}}),
             Catch::Contains("WORLD_SIZE=0 must be at least 1"));
  CHECK_THAT(message({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "70000"}}),
             Catch::Contains("MASTER_PORT=70000 is outside 1..65535"));
  CHECK_THAT(
      message({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_JOB_NODELIST", "n[1-"}}),
      Catch::Contains("n[1-"));
}

TEST_CASE("Slurm hostlist expansion") {
  using V = std::vector<std::string>;
  auto expand = [](const char* s) {
    auto hosts = ExpandSlurmHostlist(s);
    REQUIRE(hosts.ok());
    return *hosts;
  };
  CHECK(expand("node[01-04,07]") == V{"node01", "node02", "node03", "node04", "node07"});
  CHECK(expand("login1") == V{"login1"});
  CHECK(expand("a1,b[2-3],c") == V{"a1", "b2", "b3", "c"});
  CHECK(expand("n[8-11]") == V{"n8", "n9", "n10", "n11"});
  CHECK(expand("n[08-10]") == V{"n08", "n09", "n10"});
  CHECK(expand("r[1-2]-n[1,3]") == V{"r1-n1", "r1-n3", "r2-n1", "r2-n3"});
  CHECK(expand("gpu[3]-ib") == V{"gpu3-ib"});

  for (const char* bad :
       {"n[1-", "n]1[", "n[[1]]", "n[4-2]", "n[a-b]", "n[]", "a,,b", "n[1-2-3]"}) {
    INFO(bad);
    auto hosts = ExpandSlurmHostlist(bad);
    REQUIRE_FALSE(hosts.ok());
    CHECK(hosts.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(hosts.status().message()), Catch::Contains("Slurm hostlist"));
  }
}

}  // namespace
}  // namespace mxmaca::transport::ucx
