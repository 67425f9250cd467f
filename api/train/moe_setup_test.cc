// api/train/moe_setup_test.cc: --moe-layer-freq forms and the MoE flag errors.
#include "api/train/moe_setup.h"

#include <catch2/catch.hpp>

#include "layers/moe/moe_layer.h"

namespace mxmaca::api {
namespace {

TEST_CASE("--moe-layer-freq: an int N marks every N-th layer from 0") {
  auto v = ParseMoeLayerFreq("2", 5);
  REQUIRE(v.ok());
  CHECK(*v == std::vector<bool>{true, false, true, false, true});
  CHECK(*ParseMoeLayerFreq("1", 3) == std::vector<bool>{true, true, true});
  CHECK(!ParseMoeLayerFreq("0", 3).ok());
}

TEST_CASE("--moe-layer-freq: list literals and Megatron's pattern expressions") {
  CHECK(*ParseMoeLayerFreq("[1,0,0,1]", 4) == std::vector<bool>{true, false, false, true});
  CHECK(*ParseMoeLayerFreq("([1]*1+[0]*2)*2", 6) ==
        std::vector<bool>{true, false, false, true, false, false});
  CHECK(*ParseMoeLayerFreq(" [0] + [1] * 3 ", 4) == std::vector<bool>{false, true, true, true});
}

TEST_CASE("--moe-layer-freq: errors name the value") {
  auto wrong_length = ParseMoeLayerFreq("[1,0]", 3);
  REQUIRE(!wrong_length.ok());
  CHECK(std::string(wrong_length.status().message()).find("2 entries") != std::string::npos);
  for (const char* bad : {"[1,2]", "[1,0", "(1)", "[1]*", "abc", "[1]+"}) {
    auto r = ParseMoeLayerFreq(bad, 1);
    INFO(bad);
    REQUIRE(!r.ok());
    CHECK(std::string(r.status().message()).find(bad) != std::string::npos);
  }
}

TEST_CASE("AddMoEConfig: fills the router and experts; rejects what is not supported") {
  MegatronArgs a;
  layers::GptConfig c;
  c.num_layers = 4;
  c.hidden_size = 16;
  c.ffn_hidden_size = 64;
  REQUIRE(AddMoEConfig(a, &c).ok());  // dense: nothing
  CHECK(c.moe == nullptr);
  a.num_experts = 8;
  a.moe_router_topk = 2;
  a.moe_layer_freq = "2";
  a.moe_ffn_hidden_size = 32;
  a.moe_aux_loss_coeff = {0.01};
  REQUIRE(AddMoEConfig(a, &c).ok());
  REQUIRE(c.moe != nullptr);
  CHECK(c.is_moe_layer(0));
  CHECK(!c.is_moe_layer(1));
  CHECK(c.moe->router.num_experts == 8);
  CHECK(c.moe->expert.ffn_hidden_size == 32);
  a.moe_router_topk = 9;
  CHECK(!AddMoEConfig(a, &c).ok());  // top-k > experts
  a.moe_router_topk = 2;
  a.moe_router_score_function = "relu";
  CHECK(!AddMoEConfig(a, &c).ok());
  a.moe_router_score_function = "softmax";
  a.expert_model_parallel_size = 2;
  auto ep = AddMoEConfig(a, &c);
  REQUIRE(!ep.ok());
  CHECK(std::string(ep.message()).find("--expert-model-parallel-size 2") != std::string::npos);
  // EP = TP with SP: expert tensor parallelism (Megatron's default ETP = TP) is refused by
  // name; with --expert-tensor-parallel-size 1 the layer gets EP 2 and the dispatcher type.
  a.tensor_model_parallel_size = 2;
  a.sequence_parallel = true;
  auto etp = AddMoEConfig(a, &c);
  REQUIRE(!etp.ok());
  CHECK(std::string(etp.message()).find("--expert-tensor-parallel-size 2") != std::string::npos);
  a.expert_tensor_parallel_size = 1;
  a.moe_token_dispatcher_type = "alltoall";
  REQUIRE(AddMoEConfig(a, &c).ok());
  CHECK(c.moe->expert_model_parallel_size == 2);
  CHECK(c.moe->token_dispatcher_type == "alltoall");
  a.sequence_parallel = false;  // Megatron: MoE with TP needs SP
  CHECK(!AddMoEConfig(a, &c).ok());
  a.sequence_parallel = true;
  a.moe_router_load_balancing_type = {"seq_aux_loss"};
  CHECK(!AddMoEConfig(a, &c).ok());
}

}  // namespace
}  // namespace mxmaca::api
