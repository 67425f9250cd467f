// Every flag that Megatron-LM core_v0.19.0's own GPT, Llama, Mixtral, DeepSeek-V3 and GPT-OSS
// training scripts and its 220 GPT / MoE / Mixtral functional-test training configs pass
// (api/args/testdata/megatron_core_v0.19.0_script_flags.json, listed from those files by
// tools/megatron_flags/script_flags.py) is in the flag table; the ones MXMACA refuses are
// exactly the list below, each a feature or a number format this build does not have, and
// each has its reason in the table (docs/FLAGS.md). A flag implemented later leaves this
// list: the test fails until it is taken out. (//tests/integration:
// megatron_example_scripts_test runs four of these scripts.)
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "api/args/flag_table.h"

namespace mxmaca::api {
namespace {

constexpr const char* kScriptFlags = "api/args/testdata/megatron_core_v0.19.0_script_flags.json";

// The refused flags those sources pass. All select a model feature, number format,
// parallel layout or tool MXMACA does not have.
const std::set<std::string> kRefused = {
    // Model features.
    "--multi-latent-attention", "--mtp-num-layers", "--experimental-attention-variant",
    "--moe-shared-expert-gate", "--attention-output-gate", "--squared-relu", "--window-size",
    "--window-attn-skip-freq", "--softmax-type", "--quick-geglu", "--glu-linear-offset",
    "--enable-gpt-oss", "--use-mup", "--apply-wd-to-qk-layernorm",
    "--moe-router-force-load-balancing",
    // Number formats.
    "--fp16", "--fp8-format",
    // Parallel layouts and sharding.
    "--use-tp-pp-dp-mapping", "--num-distributed-optimizer-instances", "--use-megatron-fsdp",
    "--use-torch-fsdp2", "--hierarchical-context-parallel-sizes",
    // Training and data features.
    "--recompute-modules", "--step-batch-size-schedule", "--fim-data", "--export-kd-teacher-load",
    // Checkpoint and checking tools.
    "--check-weight-hash-across-dp-replicas-interval", "--verify-integrity"};

TEST_CASE("the flags of Megatron's scripts and functional tests are all in the table") {
  std::ifstream in(kScriptFlags);
  REQUIRE(in.good());
  const nlohmann::json sources = nlohmann::json::parse(in);
  REQUIRE(sources.size() == 225);  // 5 example scripts + 220 functional-test configs
  std::map<std::string, int> uses;
  std::set<std::string> refused;
  for (const auto& [source, flags] : sources.items()) {
    for (const std::string& option : flags) {
      INFO(source << ": " << option);
      const FlagSpec* flag = FindFlag(option);
      REQUIRE(flag != nullptr);  // never "unknown flag"
      CHECK(flag->origin != FlagOrigin::kMxmaca);
      ++uses[option];
      if (flag->cls == FlagClass::kUnsupported) {
        refused.insert(option);
        CHECK(std::string(flag->reason).size() > 0);  // docs/FLAGS.md says why
      }
    }
  }
  CHECK(uses.size() == 268);
  CHECK(refused == kRefused);
}

}  // namespace
}  // namespace mxmaca::api
