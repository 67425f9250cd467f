// actors/checkpoint/megatron/megatron_checkpoint_test.cc: Megatron legacy checkpoints
// against an independent model of Megatron's layout (megatron_layout.py, torch):
//   read:    make_megatron_checkpoint.py torch.saves a sharded checkpoint of random logical
//            tensors; ReadMegatronCheckpoint gives back every logical tensor (weights, Adam
//            moments, buffers) bit for bit;
//   write:   WriteMegatronCheckpoint of what was read, in the same layout and resharded to
//            others, loads with torch.load with the keys (in order), shapes and dtypes
//            Megatron writes, and check_megatron_checkpoint.py merges it back to the same
//            logical tensors;
//   errors:  a missing rank file, a truncated one.
// Configurations: TE spec dense SwiGLU untied TP2 x PP2; local spec tied bf16 PP2;
// TE spec MoE (TEGroupedMLP) TP2 x EP2; local spec MoE (SequentialMLP) SwiGLU; the
// distributed optimizer's distrib_optim.pt in three layouts.
#include <catch2/catch.hpp>

#include <stdio.h>
#include <sys/wait.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/checkpoint/megatron/megatron_checkpoint.h"
#include "actors/checkpoint/test_util.h"

namespace mxmaca::actors::checkpoint::megatron {
namespace {

std::string Run(const std::string& cmd, int* code) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

const std::string kDir = "actors/checkpoint/megatron/";

std::vector<float> ReadBin(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), {});
  std::vector<float> v(s.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), s.data(), s.size());
  return v;
}

// Loads <dir>/<json> ({name: {shape, file}}) as logical tensors.
LogicalTensors LoadIndex(const std::string& dir, const std::string& json) {
  std::ifstream f(dir + "/" + json);
  const nlohmann::json j = nlohmann::json::parse(f);
  LogicalTensors out;
  for (const auto& [name, e] : j.items()) {
    out[name] = {e["shape"].get<std::vector<int64_t>>(), ReadBin(dir + "/" + e["file"].get<std::string>())};
  }
  return out;
}

void RequireSame(const LogicalTensors& got, const LogicalTensors& want) {
  std::vector<std::string> a, b;
  for (const auto& [k, v] : got) a.push_back(k);
  for (const auto& [k, v] : want) b.push_back(k);
  REQUIRE(a == b);
  for (const auto& [name, t] : want) {
    INFO(name);
    REQUIRE(got.at(name).shape == t.shape);
    REQUIRE(testing::BitEqual(got.at(name).data, t.data));
  }
}

std::string With(std::string config, const std::string& key, int value) {
  // Replaces (or appends) key=value in a "k=v k=v" config.
  const std::string k = key + "=";
  size_t pos = config.find(k);
  if (pos != std::string::npos && (pos == 0 || config[pos - 1] == ' ')) {
    const size_t end = config.find(' ', pos);
    config.erase(pos, end == std::string::npos ? std::string::npos : end - pos + 1);
  }
  while (!config.empty() && config.back() == ' ') config.pop_back();
  return config + " " + k + std::to_string(value);
}

struct Reshard {
  int tp, pp, ep;
};

void CheckConfig(const std::string& config, std::vector<Reshard> targets) {
  INFO(config);
  const std::string dir = testing::MakeTempDir();
  int code = 0;
  std::string log = Run("/usr/bin/python3 " + kDir + "make_megatron_checkpoint.py " + dir + " " + config, &code);
  INFO(log);
  REQUIRE(code == 0);
  REQUIRE(IsMegatronLegacyCheckpoint(dir));
  auto st = ReadMegatronCheckpoint(dir);
  INFO(st.status().ToString());
  REQUIRE(st.ok());
  const LogicalTensors expected = LoadIndex(dir, "expected.json");
  RequireSame(st->tensors, expected);
  REQUIRE(st->iteration == 5);
  REQUIRE(st->has_optimizer_state);
  REQUIRE(st->optimizer_step == 5);
  REQUIRE(st->args->Get("consumed_train_samples")->i == 40);
  REQUIRE(st->opt_param_scheduler->Get("num_steps")->i == 40);
  REQUIRE(st->num_floating_point_operations_so_far == 123.0);

  // Write it back in the same layout and in others; torch.load + an independent merge.
  targets.insert(targets.begin(), Reshard{st->layout.tp, st->layout.pp, st->layout.ep});
  for (const Reshard& r : targets) {
    INFO("write at tp " << r.tp << " pp " << r.pp << " ep " << r.ep);
    MegatronState out = *st;
    auto layout = UniformLayout(r.tp, r.pp, r.ep, 4);
    REQUIRE(layout.ok());
    out.layout = *layout;
    const std::string save = testing::MakeTempDir();
    absl::Status s = WriteMegatronCheckpoint(save, out);
    INFO(s.ToString());
    REQUIRE(s.ok());
    std::string target = With(With(With(config, "tp", r.tp), "pp", r.pp), "ep", r.ep);
    log = Run("/usr/bin/python3 " + kDir + "check_megatron_checkpoint.py " + save + " " + target, &code);
    INFO(log);
    REQUIRE(code == 0);
    RequireSame(LoadIndex(save, "merged.json"), expected);
    // And our reader agrees.
    auto again = ReadMegatronCheckpoint(save);
    REQUIRE(again.ok());
    RequireSame(again->tensors, expected);
  }
}

TEST_CASE("TE spec, dense, SwiGLU, untied, TP2 x PP2") {
  CheckConfig("tp=2 pp=2 swiglu=1 tied=0", {{1, 4, 1}});
}

TEST_CASE("local spec, tied embeddings, bf16 weights with fp32 masters, PP2") {
  CheckConfig("tp=1 pp=2 spec=local bf16=1", {});
}

TEST_CASE("TE spec MoE (grouped GEMM), SwiGLU, TP2 x EP2") {
  CheckConfig("tp=2 pp=1 ep=2 swiglu=1 experts=4 grouped=1", {{1, 2, 4}});
}

TEST_CASE("local spec MoE (SequentialMLP), SwiGLU, PP2") {
  CheckConfig("tp=1 pp=2 spec=local swiglu=1 experts=4 grouped=0", {{2, 1, 2}});
}

// The distributed optimizer (--use-distributed-optimizer): Adam's moments and the fp32
// main params in distrib_optim.pt, laid out by megatron_layout.py's transcription of
// Megatron-Core's buffer layout (reverse order, 64-element starts, buckets of `bucket`
// elements on the first pipeline stage, the tied embedding's own bucket, padding dropped).
TEST_CASE("distributed optimizer: TE spec, tied, TP2 x PP2, DP2, buckets of 100") {
  CheckConfig("tp=2 pp=2 swiglu=1 distopt=1 dp=2 bucket=100", {{1, 1, 1}});
}

TEST_CASE("distributed optimizer: local spec, bf16 (fp32 masters in 'param'), DP4, one bucket") {
  CheckConfig("tp=1 pp=1 spec=local bf16=1 distopt=1 dp=4", {});
}

TEST_CASE("distributed optimizer: untied, PP2, DP3, NCCL bus-bandwidth padding, buckets of 300") {
  CheckConfig("tp=1 pp=2 tied=0 distopt=1 dp=3 bucket=300 busbw=1", {});
}

TEST_CASE("distributed optimizer: a file whose layout disagrees is an error naming it") {
  const std::string dir = testing::MakeTempDir();
  int code = 0;
  std::string log = Run("/usr/bin/python3 " + kDir + "make_megatron_checkpoint.py " + dir +
                            " tp=1 pp=1 distopt=1 dp=2 bucket=100",
                        &code);
  INFO(log);
  REQUIRE(code == 0);
  // The same state read with another bucket size: Megatron would lay it out differently.
  const std::string other = testing::MakeTempDir();
  log = Run("/usr/bin/python3 " + kDir + "make_megatron_checkpoint.py " + other +
                " tp=1 pp=1 distopt=1 dp=2 bucket=0",
            &code);
  REQUIRE(code == 0);
  const std::string victim = dir + "/iter_0000005/mp_rank_00/distrib_optim.pt";
  std::filesystem::copy_file(other + "/iter_0000005/mp_rank_00/distrib_optim.pt", victim,
                             std::filesystem::copy_options::overwrite_existing);
  auto st = ReadMegatronCheckpoint(dir);
  REQUIRE(!st.ok());
  INFO(st.status().ToString());
  CHECK(absl::IsDataLoss(st.status()));
  CHECK(std::string(st.status().message()).find(victim + ": buffer 0: numel_unpadded is") !=
        std::string::npos);
}

TEST_CASE("damaged checkpoints: errors name the file") {
  const std::string dir = testing::MakeTempDir();
  int code = 0;
  std::string log = Run("/usr/bin/python3 " + kDir + "make_megatron_checkpoint.py " + dir + " tp=2 pp=2", &code);
  REQUIRE(code == 0);
  const std::string victim = dir + "/iter_0000005/mp_rank_01_001/model_optim_rng.pt";
  SECTION("truncated rank file") {
    std::filesystem::resize_file(victim, std::filesystem::file_size(victim) / 2);
    auto st = ReadMegatronCheckpoint(dir);
    REQUIRE(!st.ok());
    REQUIRE(std::string(st.status().message()).find(victim) != std::string::npos);
  }
  SECTION("missing rank file") {
    std::filesystem::remove_all(dir + "/iter_0000005/mp_rank_01_001");
    auto st = ReadMegatronCheckpoint(dir);
    REQUIRE(absl::IsNotFound(st.status()));
    REQUIRE(std::string(st.status().message()).find("mp_rank_01_001/model_optim_rng.pt") != std::string::npos);
  }
  SECTION("missing iteration") {
    auto st = ReadMegatronCheckpoint(dir, 7);
    REQUIRE(absl::IsNotFound(st.status()));
    REQUIRE(std::string(st.status().message()).find("iter_0000007") != std::string::npos);
  }
}

}  // namespace
}  // namespace mxmaca::actors::checkpoint::megatron
