// api/train/device_setup_test.cc: --device parsing, what the device backends refuse, and
// the CUDA-graph decision with its printed notice.
#include "api/train/device_setup.h"

#include <catch2/catch.hpp>
#include <string>

namespace mxmaca::api {
namespace {

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("--device values", "[device]") {
  CHECK(*ParseDevice(std::nullopt) == Device::kCpu);
  CHECK(*ParseDevice(std::string("cuda")) == Device::kCuda);
  CHECK(*ParseDevice(std::string("device-on-cpu")) == Device::kDeviceOnCpu);
  const absl::Status bad = ParseDevice(std::string("gpu")).status();
  CHECK(bad.code() == absl::StatusCode::kInvalidArgument);
  CHECK(Has(std::string(bad.message()), "--device gpu: expected cpu, cuda or device-on-cpu"));
}

TEST_CASE("the device backends refuse what they do not run, by flag", "[device]") {
  MegatronArgs a;
  CHECK(CheckDeviceArgs(a).ok());  // cpu: everything goes
  a.device = "device-on-cpu";
  CHECK(CheckDeviceArgs(a).ok());
  auto refused = [&](MegatronArgs args, const std::string& flag) {
    const absl::Status s = CheckDeviceArgs(args);
    INFO(s.message());
    CHECK(Has(std::string(s.message()), flag + " needs --device cpu"));
  };
  MegatronArgs tp = a;  // runs: its collectives pass through host memory
  tp.tensor_model_parallel_size = 2;
  tp.sequence_parallel = true;
  CHECK(CheckDeviceArgs(tp).ok());
  MegatronArgs cp = a;
  cp.context_parallel_size = 2;
  refused(cp, "--context-parallel-size 2");
  // The memory cap (on the slots' bytes), the dynamic pipeline (W out of forward order) and
  // moving layers between stages (new device stages, parameters copied by name on the host)
  // run on the device backends.
  MegatronArgs cap = a;
  cap.memory_cap_per_shard = "1G";
  CHECK(CheckDeviceArgs(cap).ok());
  MegatronArgs dynamic = a;
  dynamic.dynamic_pipeline = true;
  CHECK(CheckDeviceArgs(dynamic).ok());
  MegatronArgs rebalance = a;
  rebalance.dynamic_pipeline = true;
  rebalance.force_layer_move = "1:0:2";
  CHECK(CheckDeviceArgs(rebalance).ok());
  MegatronArgs synthetic = a;
  synthetic.synthetic_op_ms = "1,1,1";
  refused(synthetic, "--synthetic-op-ms");
  // Selective and full recomputation run on the device backends (layers/device:
  // device_stage_test compares them with the CPU backend bit for bit).
  MegatronArgs full = a;
  full.recompute_granularity = "full";
  CHECK(CheckDeviceArgs(full).ok());
  MegatronArgs selective = a;
  selective.recompute_granularity = "selective";
  CHECK(CheckDeviceArgs(selective).ok());
  MegatronArgs moe = a;
  moe.num_experts = 4;
  refused(moe, "--num-experts");
  // RoPE scaling, interpolation and interleaved pairs, zero-centred norm weights and q/k
  // layernorms run on the device backends (one GptStage on either backend;
  // device_stage_test compares them with the CPU backend bit for bit).
  MegatronArgs model = a;
  model.rotary_interleaved = true;
  model.use_rope_scaling = true;
  model.rotary_seq_len_interpolation_factor = 2;
  model.apply_layernorm_1p = true;
  model.qk_layernorm = true;
  CHECK(CheckDeviceArgs(model).ok());
}

TEST_CASE("CUDA graphs: on by default with cuda (dropout too), off elsewhere", "[device]") {
  MegatronArgs a;
  a.hidden_dropout = 0.0;
  a.attention_dropout = 0.0;
  std::string notice;
  auto cuda = CudaGraphConfigFor(a, Device::kCuda, &notice);
  REQUIRE(cuda.ok());
  CHECK(cuda->mode == kernels::CudaGraphMode::kLocal);
  CHECK(Has(notice, "the default with --device cuda"));

  MegatronArgs off = a;
  off.no_cuda_graph = true;
  CHECK(CudaGraphConfigFor(off, Device::kCuda, &notice)->mode == kernels::CudaGraphMode::kNone);
  CHECK(Has(notice, "CUDA graphs: off"));

  MegatronArgs cpu = a;
  cpu.enable_cuda_graph = true;
  CHECK(CudaGraphConfigFor(cpu, Device::kDeviceOnCpu, &notice)->mode ==
        kernels::CudaGraphMode::kNone);
  CHECK(Has(notice, "apply to --device cuda only"));
  CHECK(Has(notice, "deprecated"));

  MegatronArgs dropout = a;  // dropout keys live in device memory: graphs stay on
  dropout.hidden_dropout = 0.1;
  CHECK(CudaGraphConfigFor(dropout, Device::kCuda, &notice)->mode ==
        kernels::CudaGraphMode::kLocal);

  MegatronArgs conflict = a;
  conflict.no_cuda_graph = true;
  conflict.cuda_graph_impl = "local";
  CHECK(CudaGraphConfigFor(conflict, Device::kCuda, &notice).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mxmaca::api
