// actors/checkpoint/safetensors_python_test.cc: the format is checkable from outside.
// The test writes a sharded checkpoint with the C++ writer and, separately, each tensor's
// full values as raw float32; /usr/bin/python3 (json + numpy only, read_checkpoint.py)
// parses every shard file per the safetensors spec, assembles each tensor from
// metadata.json's offsets and must find exactly the bytes the test wrote.
#include <catch2/catch.hpp>

#include <stdio.h>
#include <sys/wait.h>

#include <fstream>
#include <list>
#include <map>
#include <string>
#include <vector>

#include "actors/checkpoint/checkpoint_writer.h"
#include "actors/checkpoint/test_util.h"

namespace mxmaca::actors::checkpoint {
namespace {

using testing::ExtractRegion;
using testing::MakeTempDir;
using testing::RandomBits;
using testing::RandomFloats;

struct Piece {
  std::string writer;
  std::vector<int64_t> offsets, shape;
};

std::string RunCommand(const std::string& cmd, int* exit_code) {
  std::string output;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  int status = pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

TEST_CASE("python (json + numpy) reads the checkpoint the C++ writer produced",
          "[checkpoint][parity]") {
  const std::string save = MakeTempDir();
  const std::string expected = MakeTempDir();
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> values;
    std::vector<Piece> pieces;
  };
  std::vector<Tensor> tensors = {
      {"model/decoder.layers.0.self_attention.linear_qkv.weight", {24, 16},
       RandomFloats(24 * 16, 1),
       {{"tp0", {0, 0}, {12, 16}}, {"tp1", {12, 0}, {12, 16}}}},  // column-parallel rows
      {"model/decoder.layers.0.self_attention.linear_proj.weight", {16, 8},
       RandomFloats(16 * 8, 2),
       {{"tp0", {0, 0}, {16, 4}}, {"tp1", {0, 4}, {16, 4}}}},  // row-parallel columns
      // SwiGLU fc1 [gate; up]: each TP rank holds two row boxes of the logical tensor.
      {"model/decoder.layers.0.mlp.linear_fc1.weight", {20, 8}, RandomFloats(20 * 8, 3),
       {{"tp0", {0, 0}, {5, 8}},
        {"tp1", {5, 0}, {5, 8}},
        {"tp0", {10, 0}, {5, 8}},
        {"tp1", {15, 0}, {5, 8}}}},
      {"optimizer/exp_avg/decoder.layers.0.mlp.linear_fc1.weight", {2, 3, 4},
       RandomBits(24, 4), {{"tp0", {0, 0, 0}, {2, 3, 2}}, {"tp1", {0, 0, 2}, {2, 3, 2}}}},
      {"model/decoder.final_layernorm.weight", {16}, RandomFloats(16, 5),
       {{"tp0", {0}, {16}}}},
      {"optimizer/loss_scale", {}, RandomFloats(1, 6), {{"tp1", {}, {}}}},
  };
  std::list<std::vector<float>> keep;
  std::map<std::string, std::vector<TensorShardView>> views;
  for (const Tensor& t : tensors) {
    for (const Piece& p : t.pieces) {
      keep.push_back(ExtractRegion(t.values, t.shape, p.offsets, p.shape));
      views[p.writer].push_back({t.name, t.shape, p.offsets, p.shape, keep.back().data()});
    }
    std::string path = expected + "/";  // name with '/' -> '__', see read_checkpoint.py
    for (char c : t.name) path += c == '/' ? std::string("__") : std::string(1, c);
    std::ofstream out(path + ".f32", std::ios::binary);
    out.write(reinterpret_cast<const char*>(t.values.data()), t.values.size() * 4);
  }
  auto writer = CheckpointWriter::Begin(save, 42);
  REQUIRE(writer.ok());
  for (const auto& [name, v] : views) REQUIRE(writer->WriteShard(name, v).ok());
  REQUIRE(writer->Commit({{"tensor_model_parallel_size", 2}}, {{"iteration", 42}}).ok());

  int code = -1;
  const std::string output = RunCommand(
      "/usr/bin/python3 actors/checkpoint/read_checkpoint.py " + save + " " + expected +
          " 2>&1",
      &code);
  INFO(output);
  CHECK(code == 0);
  CHECK(output == "OK " + std::to_string(tensors.size()) + "\n");
}

}  // namespace
}  // namespace mxmaca::actors::checkpoint
