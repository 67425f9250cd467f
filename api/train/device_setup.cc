// api/train/device_setup.cc: see device_setup.h.
#include "api/train/device_setup.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "layers/device/cpu_device_kernels.h"
#include "layers/device/cuda_device_kernels.h"
#include "layers/device/emulated_device_kernels.h"

namespace mxmaca::api {

absl::StatusOr<Device> ParseDevice(const std::optional<std::string>& value) {
  if (!value || *value == "cpu") return Device::kCpu;
  if (*value == "cuda") return Device::kCuda;
  if (*value == "device-on-cpu") return Device::kDeviceOnCpu;
  return absl::InvalidArgumentError(
      absl::StrCat("--device ", *value, ": expected cpu, cuda or device-on-cpu"));
}

absl::Status CheckDeviceArgs(const MegatronArgs& a) {
  absl::StatusOr<Device> device = ParseDevice(a.device);
  if (!device.ok()) return device.status();
  if (*device == Device::kCpu) return absl::OkStatus();
  const std::string which = absl::StrCat("--device ", *a.device);
  auto refuse = [&](const std::string& what) {
    return absl::UnimplementedError(
        absl::StrCat(which, " runs dense GPT models with pipeline, data and tensor parallelism only; ",
                     what, " needs --device cpu for now (docs/CUDA.md)"));
  };
  if (a.context_parallel_size > 1) {
    return refuse(absl::StrCat("--context-parallel-size ", a.context_parallel_size));
  }
  if (a.expert_model_parallel_size > 1) {
    return refuse(absl::StrCat("--expert-model-parallel-size ", a.expert_model_parallel_size));
  }
  if (a.num_experts.has_value() && *a.num_experts > 0) return refuse("--num-experts");
  if (a.synthetic_op_ms) return refuse("--synthetic-op-ms");  // synthetic stages: no device
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<layers::device::DeviceKernels>> MakeDeviceKernels(
    Device device, int gpu, int num_threads, kernels::Precision precision) {
  if (device == Device::kCuda) {
    absl::StatusOr<std::unique_ptr<layers::device::CudaDeviceKernels>> k =
        layers::device::CudaDeviceKernels::Create(gpu, nullptr, precision);
    if (!k.ok()) {
      return absl::Status(k.status().code(), absl::StrCat("--device cuda: ", k.status().message()));
    }
    return std::unique_ptr<layers::device::DeviceKernels>(std::move(*k));
  }
  kernels::ExecContext ctx;
  ctx.num_threads = num_threads;
  ctx.precision = precision;
  if (device == Device::kDeviceOnCpu) {
    // The emulated device: the CPU kernels on memory the host cannot touch outside the
    // interface, with counted copies (layers/device/emulated_device_kernels.h).
    return std::unique_ptr<layers::device::DeviceKernels>(
        std::make_unique<layers::device::EmulatedDeviceKernels>(ctx));
  }
  return std::unique_ptr<layers::device::DeviceKernels>(
      std::make_unique<layers::device::CpuDeviceKernels>(ctx));
}

absl::StatusOr<kernels::CudaGraphConfig> CudaGraphConfigFor(const MegatronArgs& a, Device device,
                                                            std::string* notice) {
  kernels::CudaGraphFlagValues v;
  v.cuda_graph_impl = a.cuda_graph_impl;
  if (a.cuda_graph_scope.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--cuda-graph-scope ", absl::StrJoin(a.cuda_graph_scope, " "),
        ": MXMACA reads one scope (full, attn or full_iteration); Megatron-Core 0.19's "
        "per-module lists are --cuda-graph-modules, which MXMACA accepts with a notice"));
  }
  if (!a.cuda_graph_scope.empty()) v.cuda_graph_scope = a.cuda_graph_scope.front();
  v.cuda_graph_warmup_steps = a.cuda_graph_warmup_steps;
  v.enable_cuda_graph = a.enable_cuda_graph;
  v.external_cuda_graph = a.external_cuda_graph;
  v.no_cuda_graph = a.no_cuda_graph;
  const bool given =
      a.cuda_graph_impl || a.enable_cuda_graph || a.external_cuda_graph || a.no_cuda_graph;
  if (!given && device == Device::kCuda) v.cuda_graph_impl = "local";
  absl::StatusOr<kernels::CudaGraphConfig> config = kernels::ParseCudaGraphFlags(v);
  if (!config.ok()) return config.status();
  std::string what;
  if (device != Device::kCuda) {
    if (config->mode != kernels::CudaGraphMode::kNone) {
      what = absl::StrCat("CUDA graphs apply to --device cuda only; the ",
                          device == Device::kCpu ? "cpu" : "device-on-cpu",
                          " backend runs every op eagerly");
    }
    config->mode = kernels::CudaGraphMode::kNone;
  } else if (config->mode == kernels::CudaGraphMode::kNone) {
    what = "CUDA graphs: off (every op segment runs eagerly)";
  } else {
    what = absl::StrCat(
        "CUDA graphs: each op segment (F, B, W per micro-batch slot and shape) "
        "captured after ",
        config->warmup_steps, " eager run(s) and replayed",
        given ? ""
              : " (the default with --device cuda; --no-cuda-graph turns "
                "it off)");
  }
  if (!config->note.empty() && !what.empty()) what = absl::StrCat(what, " [", config->note, "]");
  if (notice != nullptr) *notice = what;
  return config;
}

}  // namespace mxmaca::api
