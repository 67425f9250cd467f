// scheduler/cluster_test.cc: presets and the cluster file parser, its errors included.
#include "scheduler/cluster.h"

#include <catch2/catch.hpp>

namespace mxmaca::scheduler {
namespace {

TEST_CASE("presets carry the spec-sheet numbers", "[cluster]") {
  // Expected values typed from the spec sheets cited in cluster.cc.
  auto h100 = ClusterPreset("h100-sxm");
  REQUIRE(h100.ok());
  CHECK(h100->gpu.bf16_dense_tflops == 989);
  CHECK(h100->gpu.hbm_gb_per_s == 3350);
  CHECK(h100->gpu.hbm_gib == 80);
  CHECK(h100->nvlink_gb_per_s == 450);
  CHECK(h100->internode_gb_per_s == 50);
  CHECK(h100->gpus_per_node == 8);
  auto h200 = ClusterPreset("h200-sxm");
  REQUIRE(h200.ok());
  CHECK(h200->gpu.hbm_gb_per_s == 4800);
  CHECK(h200->gpu.hbm_gib == 141);
  auto b200 = ClusterPreset("b200");
  REQUIRE(b200.ok());
  CHECK(b200->gpu.bf16_dense_tflops == 2250);
  CHECK(b200->nvlink_gb_per_s == 900);
  auto a100 = ClusterPreset("a100-sxm-80gb");
  REQUIRE(a100.ok());
  CHECK(a100->gpu.bf16_dense_tflops == 312);
  auto bad = ClusterPreset("h100");
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("h100-sxm") != std::string::npos);
}

TEST_CASE("a full cluster file parses", "[cluster]") {
  const char* text =
      "# my cluster\n"
      "gpu.name = Test GPU\n"
      "gpu.bf16_dense_tflops = 123.5   # trailing comment\n"
      "gpu.hbm_gb_per_s = 1000\n"
      "gpu.hbm_gib = 40\n"
      "\n"
      "gpus_per_node = 4\n"
      "nodes = 16\n"
      "nvlink_gb_per_s = 200\n"
      "nvlink_latency_us = 1.5\n"
      "internode_gb_per_s = 12.5\n"
      "internode_latency_us = 7\n"
      "gemm_efficiency = 0.6\n";
  auto spec = ParseClusterFile(text, "my.cluster");
  REQUIRE(spec.ok());
  CHECK(spec->gpu.name == "Test GPU");
  CHECK(spec->gpu.bf16_dense_tflops == 123.5);
  CHECK(spec->gpus_per_node == 4);
  CHECK(spec->nodes == 16);
  CHECK(spec->nvlink_latency_us == 1.5);
  CHECK(spec->internode_gb_per_s == 12.5);
  CHECK(spec->gemm_efficiency == 0.6);
  CHECK(spec->hbm_efficiency == 0.8);  // default kept
}

TEST_CASE("a preset file overrides fields", "[cluster]") {
  auto spec = ParseClusterFile("preset = h100-sxm\ngpus_per_node = 4\ninternode_gb_per_s = 25\n",
                               "f");
  REQUIRE(spec.ok());
  CHECK(spec->gpu.bf16_dense_tflops == 989);
  CHECK(spec->gpus_per_node == 4);
  CHECK(spec->internode_gb_per_s == 25);
}

std::string ErrorOf(const std::string& text) {
  auto spec = ParseClusterFile(text, "c.txt");
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

TEST_CASE("cluster file errors name file, line and what was expected", "[cluster]") {
  CHECK(ErrorOf("preset = h100-sxm\n\nfoo\n") == "c.txt:3: expected 'key = value', got 'foo'");
  CHECK(ErrorOf("preset = h100-sxm\nnvlink_gbps = 3\n").find("c.txt:2: unknown key 'nvlink_gbps'") ==
        0);
  CHECK(ErrorOf("preset = h100-sxm\ngpu.hbm_gib = 8x\n") ==
        "c.txt:2: gpu.hbm_gib = '8x': expected a number > 0");
  CHECK(ErrorOf("preset = h100-sxm\ngpus_per_node = 2.5\n") ==
        "c.txt:2: gpus_per_node = '2.5': expected an integer >= 1");
  CHECK(ErrorOf("preset = h100-sxm\ngemm_efficiency = 1.2\n") ==
        "c.txt:2: gemm_efficiency = '1.2': expected a number in (0, 1]");
  CHECK(ErrorOf("gpus_per_node = 8\npreset = h100-sxm\n") ==
        "c.txt:2: 'preset' must come before every other key");
  CHECK(ErrorOf("preset = x100\n").find("c.txt:1: unknown cluster preset 'x100'") == 0);
  CHECK(ErrorOf("preset = h100-sxm\nnodes =\n") == "c.txt:2: empty value for nodes");
  CHECK(ErrorOf("gpu.name = X\n").find("c.txt: missing ") == 0);
}

TEST_CASE("LoadCluster: preset or unreadable path", "[cluster]") {
  CHECK(LoadCluster("b200").ok());
  auto missing = LoadCluster("/nonexistent/cluster.txt");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace mxmaca::scheduler
