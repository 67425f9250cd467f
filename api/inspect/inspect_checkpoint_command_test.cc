// api/inspect/inspect_checkpoint_command_test.cc: `mxmaca inspect-checkpoint` on a
// checkpoint of each format written here, and its errors.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <sstream>

#include "actors/checkpoint/checkpoint_writer.h"
#include "actors/checkpoint/megatron/megatron_checkpoint.h"
#include "api/inspect/inspect_checkpoint_command.h"

namespace mxmaca::api {
namespace {

namespace mg = actors::checkpoint::megatron;

std::string TempDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string templ = std::string(base != nullptr ? base : "/tmp") + "/inspect_XXXXXX";
  REQUIRE(mkdtemp(templ.data()) != nullptr);
  return templ;
}

TEST_CASE("inspect-checkpoint: Megatron legacy format") {
  const std::string dir = TempDir();
  mg::MegatronState st;
  st.iteration = 3;
  st.args = mg::PyObject("argparse.Namespace");
  st.args->Set("num_layers", mg::PyInt(2));
  st.args->Set("hidden_size", mg::PyInt(4));
  auto layout = mg::UniformLayout(2, 1, 1, 2);
  REQUIRE(layout.ok());
  st.layout = *layout;
  st.naming.spec = mg::LayerSpec::kLocal;
  std::vector<float> emb(8 * 4);
  for (size_t i = 0; i < emb.size(); ++i) emb[i] = 0.25f * static_cast<float>(i);
  st.tensors["model/embedding.word_embeddings.weight"] = {{8, 4}, emb};
  st.tensors["model/decoder.layers.1.input_layernorm.weight"] = {{4}, {1, 2, 3, 4}};
  st.tensors["model/decoder.final_layernorm.weight"] = {{4}, {1, 1, 1, 1}};
  REQUIRE(mg::WriteMegatronCheckpoint(dir, st).ok());
  std::ostringstream out;
  absl::Status s = RunInspectCheckpoint({dir, "--verify"}, out);
  INFO(s.ToString() << "\n" << out.str());
  REQUIRE(s.ok());
  const std::string text = out.str();
  REQUIRE(text.find("format: megatron-legacy") != std::string::npos);
  REQUIRE(text.find("iteration: 3") != std::string::npos);
  REQUIRE(text.find("layout: tensor 2 x pipeline 1 x expert 1") != std::string::npos);
  REQUIRE(text.find("mp_rank_01/model_optim_rng.pt") != std::string::npos);
  REQUIRE(text.find("model/embedding.word_embeddings.weight  float32 [4, 4] crc32 ") != std::string::npos);
  REQUIRE(text.find("model/decoder.layers.1.input_layernorm.weight  float32 [4]") != std::string::npos);
  REQUIRE(text.find("verify: every archive entry's CRC-32 matches") != std::string::npos);
  std::ostringstream by_iteration;
  REQUIRE(RunInspectCheckpoint({dir, "--iteration", "3"}, by_iteration).ok());
  REQUIRE(by_iteration.str().find("format: megatron-legacy") != std::string::npos);
}

TEST_CASE("inspect-checkpoint: MXMACA format and errors") {
  const std::string dir = TempDir();
  auto w = actors::checkpoint::CheckpointWriter::Begin(dir, 2);
  REQUIRE(w.ok());
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  REQUIRE(w->WriteShard("stage0", {{"model/output_layer.weight", {2, 3}, {0, 0}, {2, 3}, v.data()}}).ok());
  REQUIRE(w->Commit(nlohmann::json::object(), {{"consumed_train_samples", 8}}).ok());
  std::ostringstream out;
  REQUIRE(RunInspectCheckpoint({dir, "--verify"}, out).ok());
  REQUIRE(out.str().find("format: mxmaca-checkpoint") != std::string::npos);
  REQUIRE(out.str().find("model/output_layer.weight  F32 [2, 3] crc32c ") != std::string::npos);
  REQUIRE(out.str().find("state.consumed_train_samples: 8") != std::string::npos);
  std::ostringstream ignored;
  REQUIRE(absl::IsNotFound(RunInspectCheckpoint({dir + "/nope"}, ignored)));
  REQUIRE(absl::IsInvalidArgument(RunInspectCheckpoint({}, ignored)));
  REQUIRE(absl::IsInvalidArgument(RunInspectCheckpoint({dir, "--bogus"}, ignored)));
}

}  // namespace
}  // namespace mxmaca::api
