// Tests for kernels/cuda_graph_flags.h: every Megatron-Core 0.15 spelling maps to the
// documented mode, conflicts name both flags, bad values are rejected with the value.
#include "kernels/cuda_graph_flags.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace mxmaca::kernels {
namespace {

CudaGraphConfig ParseOk(const std::vector<std::string>& args) {
  const auto config = ParseCudaGraphArgv(args);
  INFO(config.status().ToString());
  REQUIRE(config.ok());
  return *config;
}

std::string ParseError(const std::vector<std::string>& args) {
  const auto config = ParseCudaGraphArgv(args);
  REQUIRE_FALSE(config.ok());
  return std::string(config.status().message());
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST_CASE("no flag: graphs off, Megatron's default", "[cuda_graph_flags]") {
  const CudaGraphConfig c = ParseOk({"--num-layers", "4", "--bf16"});
  CHECK(c.mode == CudaGraphMode::kNone);
  CHECK(c.scope == "full");
  CHECK(c.warmup_steps == kDefaultCudaGraphWarmupSteps);
  CHECK(Contains(c.note, "default --cuda-graph-impl none"));
}

TEST_CASE("each implementation name maps to its mode", "[cuda_graph_flags]") {
  CHECK(ParseOk({"--cuda-graph-impl", "local"}).mode == CudaGraphMode::kLocal);
  CHECK(ParseOk({"--cuda-graph-impl=local"}).mode == CudaGraphMode::kLocal);
  CHECK(ParseOk({"--cuda-graph-impl", "none"}).mode == CudaGraphMode::kNone);
  const CudaGraphConfig te = ParseOk({"--cuda-graph-impl", "transformer_engine"});
  CHECK(te.mode == CudaGraphMode::kLocal);
  CHECK(Contains(te.note, "no Transformer Engine"));
  const CudaGraphConfig enable = ParseOk({"--enable-cuda-graph"});
  CHECK(enable.mode == CudaGraphMode::kLocal);
  CHECK(Contains(enable.note, "--enable-cuda-graph is deprecated"));
  CHECK(Contains(enable.note, "--cuda-graph-impl local"));
  const CudaGraphConfig external = ParseOk({"--external-cuda-graph"});
  CHECK(external.mode == CudaGraphMode::kLocal);
  CHECK(Contains(external.note, "--cuda-graph-impl transformer_engine"));
  CHECK(ParseOk({"--no-cuda-graph"}).mode == CudaGraphMode::kNone);
  // Consistent redundancy is fine; argparse keeps the last value of a repeated flag.
  CHECK(ParseOk({"--no-cuda-graph", "--cuda-graph-impl", "none"}).mode == CudaGraphMode::kNone);
  CHECK(ParseOk({"--cuda-graph-impl", "none", "--cuda-graph-impl", "local"}).mode ==
        CudaGraphMode::kLocal);
}

TEST_CASE("conflicting flags are an error naming both", "[cuda_graph_flags]") {
  std::string e = ParseError({"--no-cuda-graph", "--cuda-graph-impl", "local"});
  CHECK(Contains(e, "--no-cuda-graph"));
  CHECK(Contains(e, "--cuda-graph-impl local"));
  e = ParseError({"--cuda-graph-impl=transformer_engine", "--no-cuda-graph"});
  CHECK(Contains(e, "--no-cuda-graph"));
  CHECK(Contains(e, "--cuda-graph-impl transformer_engine"));
  e = ParseError({"--enable-cuda-graph", "--no-cuda-graph"});
  CHECK(Contains(e, "--no-cuda-graph"));
  CHECK(Contains(e, "--enable-cuda-graph"));
  e = ParseError({"--enable-cuda-graph", "--external-cuda-graph"});
  CHECK(Contains(e, "--enable-cuda-graph"));
  CHECK(Contains(e, "--external-cuda-graph"));
  e = ParseError({"--external-cuda-graph", "--cuda-graph-impl", "none"});
  CHECK(Contains(e, "--external-cuda-graph"));
  CHECK(Contains(e, "--cuda-graph-impl none"));
}

TEST_CASE("scope: Megatron's choices and pairing rules", "[cuda_graph_flags]") {
  CHECK(ParseOk({"--cuda-graph-impl", "local", "--cuda-graph-scope", "full_iteration"}).scope ==
        "full_iteration");
  CHECK(ParseOk({"--enable-cuda-graph", "--cuda-graph-scope", "full"}).scope == "full");
  const CudaGraphConfig attn =
      ParseOk({"--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", "attn"});
  CHECK(attn.mode == CudaGraphMode::kLocal);
  CHECK(Contains(attn.note, "no attention-only capture"));
  std::string e = ParseError({"--cuda-graph-impl", "local", "--cuda-graph-scope", "attn"});
  CHECK(Contains(e, "--cuda-graph-scope attn"));
  CHECK(Contains(e, "--cuda-graph-impl local"));
  e = ParseError({"--external-cuda-graph", "--cuda-graph-scope=full_iteration"});
  CHECK(Contains(e, "--cuda-graph-scope full_iteration"));
  CHECK(Contains(e, "--external-cuda-graph"));
  e = ParseError({"--cuda-graph-scope", "layer"});
  CHECK(Contains(e, "'layer'"));
  CHECK(Contains(e, "full_iteration"));
  // With graphs off, the scope is accepted and said to be ignored.
  CHECK(Contains(ParseOk({"--cuda-graph-scope", "attn"}).note, "ignored"));
}

TEST_CASE("warm-up steps: default 1, explicit N honoured, bad values rejected",
          "[cuda_graph_flags]") {
  const CudaGraphConfig d = ParseOk({"--cuda-graph-impl", "local"});
  CHECK(d.warmup_steps == 1);
  CHECK(Contains(d.note, "default is 3"));
  CHECK(ParseOk({"--cuda-graph-impl", "local", "--cuda-graph-warmup-steps", "3"}).warmup_steps ==
        3);
  CHECK(ParseOk({"--enable-cuda-graph", "--cuda-graph-warmup-steps=0"}).warmup_steps == 0);
  CHECK(Contains(ParseError({"--cuda-graph-warmup-steps", "-1"}), "-1"));
  CHECK(Contains(ParseError({"--cuda-graph-warmup-steps", "2x"}), "'2x'"));
  CHECK(Contains(ParseError({"--cuda-graph-warmup-steps"}), "expected one value"));
  CHECK(Contains(ParseError({"--cuda-graph-impl", "--bf16"}), "expected one value"));
  CHECK(Contains(ParseError({"--cuda-graph-impl", "cudnn"}), "'cudnn'"));
  CHECK(Contains(ParseError({"--no-cuda-graph=1"}), "takes no value"));
}

TEST_CASE("the struct entry point agrees with the argv one", "[cuda_graph_flags]") {
  CudaGraphFlagValues v;
  v.cuda_graph_impl = "transformer_engine";
  v.cuda_graph_warmup_steps = 2;
  const auto c = ParseCudaGraphFlags(v);
  REQUIRE(c.ok());
  const CudaGraphConfig a = ParseOk(
      {"--cuda-graph-impl", "transformer_engine", "--cuda-graph-warmup-steps", "2"});
  CHECK(c->mode == a.mode);
  CHECK(c->warmup_steps == a.warmup_steps);
  CHECK(c->note == a.note);
}

}  // namespace
}  // namespace mxmaca::kernels
