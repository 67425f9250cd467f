// Tests for memory admission (api/train/memory_admission.h, issue 22 finding 2): the
// cgroup / physical limit read from fake cgroup trees, the estimate of a tiny GPT against
// its parameter count worked out by hand (the estimate is not pessimistic: it counts
// what the model holds), sums over in-process ranks, and the refusal of the sizes of the
// finding (--hidden-size 1000000, --seq-length 10000000, --micro-batch-size 100000) with
// the estimate, the limit and the flags named.
#include "api/train/memory_admission.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "api/args/megatron_args.h"
#include "api/train/parallel_setup.h"
#include "api/train/train_setup.h"

namespace mxmaca::api {
namespace {

std::string TempDir(const std::string& name) {
  const char* base = getenv("TEST_TMPDIR");
  const std::string dir = std::string(base ? base : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void Write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

// Setup: validated args, model config and parallel setup for `extra` on top of a
// 2-layer, hidden-64 GPT (NullTokenizer, 1000 + 1 tokens: padded to 1024).
struct Setup {
  MegatronArgs args;
  layers::GptConfig model;
  ParallelSetup parallel;
};

Setup MakeSetup(std::vector<std::string> extra, int world_size = 1) {
  std::vector<std::string> argv = {
      "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
      "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size", "2",
      "--train-iters", "10", "--lr", "1e-3", "--tokenizer-type", "NullTokenizer",
      "--vocab-size", "1000", "--mock-data"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  absl::StatusOr<MegatronArgs> args = ParseMegatronArgs(argv);
  REQUIRE(args.ok());
  absl::Status valid = ValidateAndDeriveArgs(&*args, world_size);
  INFO(valid.ToString());
  REQUIRE(valid.ok());
  absl::StatusOr<layers::GptConfig> model = GptConfigFromArgs(*args, 1001);
  REQUIRE(model.ok());
  absl::StatusOr<ParallelSetup> parallel = BuildParallelSetup(*args, *model);
  REQUIRE(parallel.ok());
  return {*args, *model, *parallel};
}

TEST_CASE("HostMemoryLimitFrom: the smallest of physical memory and the cgroup limits") {
  const std::string root = TempDir("cgroup_fake");
  const int64_t physical = int64_t{64} << 30;
  SECTION("no cgroup files: physical memory") {
    MemoryLimit l = HostMemoryLimitFrom(root, root + "/none", physical);
    CHECK(l.bytes == physical);
    CHECK(l.source == "physical memory");
  }
  SECTION("cgroup v2 max is no limit; a number is") {
    Write(root + "/memory.max", "max\n");
    CHECK(HostMemoryLimitFrom(root, root + "/none", physical).bytes == physical);
    Write(root + "/memory.max", "25769803776\n");
    MemoryLimit l = HostMemoryLimitFrom(root, root + "/none", physical);
    CHECK(l.bytes == 25769803776);
    CHECK(absl::StrContains(l.source, "cgroup v2"));
    CHECK(absl::StrContains(l.source, "memory.max"));
  }
  SECTION("this process's nested v2 cgroup") {
    Write(root + "/memory.max", "max\n");
    Write(root + "/job/step/memory.max", "1073741824\n");
    Write(root + "/self", "0::/job/step\n");
    CHECK(HostMemoryLimitFrom(root, root + "/self", physical).bytes == 1073741824);
  }
  SECTION("cgroup v1: unlimited is no limit, a number is") {
    Write(root + "/memory/memory.limit_in_bytes", "9223372036854771712\n");
    CHECK(HostMemoryLimitFrom(root, root + "/none", physical).bytes == physical);
    Write(root + "/memory/slurm/memory.limit_in_bytes", "2147483648\n");
    Write(root + "/self", "12:memory:/slurm\n5:cpu,cpuacct:/slurm\n");
    MemoryLimit l = HostMemoryLimitFrom(root, root + "/self", physical);
    CHECK(l.bytes == 2147483648);
    CHECK(absl::StrContains(l.source, "cgroup v1"));
  }
  SECTION("physical memory below the cgroup limit wins") {
    Write(root + "/memory.max", "137438953472\n");
    CHECK(HostMemoryLimitFrom(root, root + "/none", physical).bytes == physical);
  }
  CHECK(HostMemoryLimit().bytes > 0);  // this machine's
}

TEST_CASE("the estimate of a tiny GPT counts its parameters exactly and fits this machine") {
  const Setup s = MakeSetup({});
  // By hand (Megatron's GPT with LayerNorm, biases, learned positions, tied embeddings):
  // per layer 2 x 2h norms + (3h^2 + 3h) qkv + (h^2 + h) proj + (4h^2 + 4h) fc1 +
  // (4h^2 + h) fc2 = 49,984 at h = 64; embeddings 1024 x 64 + 32 x 64; final norm 2h.
  const double params = 2 * 49984.0 + 1024 * 64 + 32 * 64 + 128;
  const ProcessMemoryEstimate e = EstimateProcessMemory(s.parallel, s.model, s.args, -1, false);
  CHECK(e.ranks == 1);
  CHECK(e.parameter_bytes == 4 * params);
  CHECK(e.gradient_bytes == 4 * params);
  CHECK(e.optimizer_bytes == 8 * params);
  CHECK(e.activation_bytes > 0);
  CHECK(e.host_bytes ==
        e.parameter_bytes + e.gradient_bytes + e.optimizer_bytes + e.activation_bytes);
  CHECK(e.host_bytes < 8.0 * (1 << 20));  // a few MB: nothing pessimistic
  CHECK(CheckMemoryAdmission(e, HostMemoryLimit(), std::nullopt, s.args).ok());
}

TEST_CASE("in-process ranks add up; one process per rank counts its own") {
  const Setup one = MakeSetup({});
  const Setup four = MakeSetup({"--global-batch-size", "8"}, 4);  // DP 4
  const ProcessMemoryEstimate a = EstimateProcessMemory(one.parallel, one.model, one.args, -1, false);
  const ProcessMemoryEstimate b =
      EstimateProcessMemory(four.parallel, four.model, four.args, -1, false);
  CHECK(b.ranks == 4);
  CHECK(b.parameter_bytes == 4 * a.parameter_bytes);
  const ProcessMemoryEstimate own =
      EstimateProcessMemory(four.parallel, four.model, four.args, 3, false);
  CHECK(own.ranks == 1);
  CHECK(own.parameter_bytes == a.parameter_bytes);
  // The distributed optimizer shards Adam's state over DP.
  const Setup dist = MakeSetup({"--global-batch-size", "8", "--use-distributed-optimizer"}, 4);
  const ProcessMemoryEstimate d = EstimateProcessMemory(dist.parallel, dist.model, dist.args, -1, false);
  CHECK(d.optimizer_bytes == Approx(b.optimizer_bytes / 4));
  // --device cuda: activations, the weights, gradients and (the state on the device) Adam's
  // moments on the GPU; the host copies of the weights and moments that checkpoints are
  // written from on the host.
  const ProcessMemoryEstimate c = EstimateProcessMemory(one.parallel, one.model, one.args, -1, true);
  CHECK(c.device_bytes == a.activation_bytes + 2 * a.parameter_bytes + a.optimizer_bytes);
  CHECK(c.host_bytes == a.parameter_bytes + a.optimizer_bytes);
  // --optimizer-cpu-offload: a working copy and the gradients on the GPU, master weights and
  // Adam on the host.
  const Setup off = MakeSetup({"--optimizer-cpu-offload", "--use-precision-aware-optimizer"});
  const ProcessMemoryEstimate o =
      EstimateProcessMemory(off.parallel, off.model, off.args, -1, true);
  CHECK(o.device_bytes == a.activation_bytes + 2 * a.parameter_bytes);
  CHECK(o.host_bytes == a.parameter_bytes + a.optimizer_bytes);
}

TEST_CASE("impossible sizes are refused with the estimate, the limit and the flags") {
  const MemoryLimit limit{int64_t{24} << 30, "cgroup v2 /sys/fs/cgroup/memory.max"};
  struct Case {
    std::vector<std::string> extra;
    const char* flag;
  };
  const Case cases[] = {
      {{"--hidden-size", "1000000", "--num-attention-heads", "8"}, "--hidden-size 1000000"},
      {{"--seq-length", "10000000", "--max-position-embeddings", "10000000"},
       "--seq-length 10000000"},
      {{"--micro-batch-size", "100000"}, "--micro-batch-size 100000"},
  };
  for (const Case& c : cases) {
    const Setup s = MakeSetup(c.extra);
    const ProcessMemoryEstimate e = EstimateProcessMemory(s.parallel, s.model, s.args, -1, false);
    const absl::Status st = CheckMemoryAdmission(e, limit, std::nullopt, s.args);
    INFO(st.ToString());
    CHECK(st.code() == absl::StatusCode::kResourceExhausted);
    const std::string m(st.message());
    CHECK(absl::StrContains(m, c.flag));
    CHECK(absl::StrContains(m, "more than the 24.00 GiB it may use (cgroup v2"));
    CHECK(absl::StrContains(m, "--memory-admission off"));
  }
  // The GPU's memory for --device cuda.
  const Setup s = MakeSetup({"--micro-batch-size", "20000"});
  const ProcessMemoryEstimate e = EstimateProcessMemory(s.parallel, s.model, s.args, -1, true);
  const absl::Status st = CheckMemoryAdmission(e, limit, MemoryLimit{int64_t{1} << 30, "cuda device 0 free memory"}, s.args);
  CHECK(st.code() == absl::StatusCode::kResourceExhausted);
  CHECK(absl::StrContains(st.message(), "of GPU memory"));
  CHECK(absl::StrContains(st.message(), "cuda device 0 free memory"));
}

TEST_CASE("--memory-admission and MXMACA_MEMORY_ADMISSION") {
  unsetenv("MXMACA_MEMORY_ADMISSION");
  CHECK(*MemoryAdmissionEnabled(MakeSetup({}).args));
  CHECK_FALSE(*MemoryAdmissionEnabled(MakeSetup({"--memory-admission", "off"}).args));
  setenv("MXMACA_MEMORY_ADMISSION", "off", 1);
  CHECK_FALSE(*MemoryAdmissionEnabled(MakeSetup({}).args));
  CHECK(*MemoryAdmissionEnabled(MakeSetup({"--memory-admission", "on"}).args));  // flag wins
  setenv("MXMACA_MEMORY_ADMISSION", "maybe", 1);
  absl::StatusOr<bool> bad = MemoryAdmissionEnabled(MakeSetup({}).args);
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(bad.status().message(), "MXMACA_MEMORY_ADMISSION maybe"));
  unsetenv("MXMACA_MEMORY_ADMISSION");
}

}  // namespace
}  // namespace mxmaca::api
