// api/train/cp_setup_test.cc: CheckContextParallelArgs accepts the layouts CP trains and
// rejects the others with messages that name the flags.
#include "api/train/cp_setup.h"

#include <catch2/catch.hpp>

#include <string>

namespace mxmaca::api {
namespace {

MegatronArgs Args(int64_t cp, int64_t seq) {
  MegatronArgs a;
  a.context_parallel_size = cp;
  a.seq_length = seq;
  a.attention_dropout = 0.0;
  a.hidden_dropout = 0.1;  // fine with CP: masks keyed by unsharded positions
  return a;
}

std::string Message(const MegatronArgs& a) {
  return std::string(CheckContextParallelArgs(a).message());
}

TEST_CASE("CheckContextParallelArgs accepts what CP trains") {
  CHECK(CheckContextParallelArgs(Args(1, 7)).ok());  // no CP: nothing to check
  CHECK(CheckContextParallelArgs(Args(2, 32)).ok());
  CHECK(CheckContextParallelArgs(Args(4, 16384)).ok());
  MegatronArgs a = Args(2, 24);
  a.tensor_model_parallel_size = 3;  // without SP the TP size does not split the sequence
  CHECK(CheckContextParallelArgs(a).ok());
  a.sequence_parallel = true;
  a.seq_length = 36;  // 2 x 2 x 3 = 12 divides 36
  CHECK(CheckContextParallelArgs(a).ok());
}

TEST_CASE("CheckContextParallelArgs names the flags it cannot honour") {
  CHECK(Message(Args(4, 36)).find("--seq-length 36 is not divisible by 2 x "
                                  "--context-parallel-size = 2 x 4 = 8") != std::string::npos);
  MegatronArgs a = Args(2, 24);
  a.tensor_model_parallel_size = 4;
  a.sequence_parallel = true;
  CHECK(Message(a).find("2 x --context-parallel-size x --tensor-model-parallel-size = 2 x 2 x "
                        "4 = 16") != std::string::npos);
  a = Args(2, 32);
  a.attention_dropout = 0.1;
  CHECK(Message(a).find("--attention-dropout 0") != std::string::npos);
  a = Args(2, 32);
  a.num_experts = 4;  // MoE composes with CP (the CP group is the MoE token group)
  CHECK(CheckContextParallelArgs(a).ok());
  a = Args(2, 32);
  a.dynamic_pipeline = true;
  CHECK(Message(a).find("--dynamic-pipeline") != std::string::npos);
  a = Args(2, 32);
  a.rebalance_threshold = 0.2;
  CHECK(Message(a).find("--rebalance-threshold") != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::api
