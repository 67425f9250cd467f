// api/train/device_setup.h: `--device` (issue 8): which backend `mxmaca train` runs the
// model on, what each backend accepts, and the per-actor device it gives a stage.
//   cpu            the CPU backend (layers::GptStage on the CPU kernels; the reference;
//                  default).
//   cuda           the GPU backend: the same layers::GptStage built on CUDA kernels
//                  (GptStage::CreateOnDevice); every stage actor gets its own CUDA stream,
//                  cuBLASLt handle and device memory (actors/gpt_stage_program.h "Device
//                  backends"). Multi-process jobs put process LOCAL_RANK on GPU LOCAL_RANK
//                  (one process per GPU, as torchrun); the in-process ranks of one process
//                  share its GPU, each with its own stream.
//   device-on-cpu  the GPU backend's code path (device slots and segments, host master
//                  weights) on the emulated device (the CPU kernels on memory the host
//                  cannot read): bit-identical to cpu, so CI tests the GPU path's logic and
//                  its device-memory discipline without a GPU.
// The device backends run dense GPT models with CP = EP = 1 (pipeline, data and tensor
// parallelism with or without SP, in one process or several; selective or full
// recomputation; the dynamic pipeline and stage rebalancing; --memory-cap-per-shard on
// the slots' bytes);
// everything else is refused by name.
#ifndef MXMACA_API_TRAIN_DEVICE_SETUP_H_
#define MXMACA_API_TRAIN_DEVICE_SETUP_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/args/megatron_args.h"
#include "kernels/cuda_graph_flags.h"
#include "kernels/exec_context.h"
#include "layers/device/device_kernels.h"

namespace mxmaca::api {

enum class Device { kCpu, kCuda, kDeviceOnCpu };

// ParseDevice: the --device value (nullopt = cpu). InvalidArgument naming the value and
// the three choices.
absl::StatusOr<Device> ParseDevice(const std::optional<std::string>& value);

// CheckDeviceArgs: OK for --device cpu; for the device backends InvalidArgument /
// Unimplemented naming the first flag they do not support: --tensor-model-parallel-size,
// --context-parallel-size, --expert-model-parallel-size or --num-experts > 1,
// --dynamic-pipeline, --rebalance-threshold / --force-layer-move, --recompute-granularity,
// --use-rope-scaling / --rotary-seq-len-interpolation-factor, --memory-cap-per-shard,
// --synthetic-op-ms, --apply-layernorm-1p, --rotary-interleaved, --qk-layernorm.
absl::Status CheckDeviceArgs(const MegatronArgs& args);

// MakeDeviceKernels: one stage actor's device: CudaDeviceKernels on GPU `gpu` with a new
// stream of its own (Device::kCuda), or EmulatedDeviceKernels (kDeviceOnCpu: the CPU
// kernels on memory the host cannot read outside the interface) or CpuDeviceKernels with
// `num_threads`. Errors: the CUDA backend's (no GPU: "no GPU: cudaGetDeviceCount returned
// cudaErrorInsufficientDriver"; a build without CUDA: Unimplemented).
absl::StatusOr<std::unique_ptr<layers::device::DeviceKernels>> MakeDeviceKernels(
    Device device, int gpu, int num_threads, kernels::Precision precision);

// CudaGraphConfigFor: the CUDA-graph decision for `device` from Megatron-Core's flags and
// --no-cuda-graph (kernels/cuda_graph_flags.h). With --device cuda and none of those flags
// graphs are ON (mode local): each op segment is captured after its warm-up runs
// (MXMACA's default; Megatron's --cuda-graph-impl defaults to none). The other devices
// run eagerly; asking them for graphs adds a notice saying so. `notice` gets the
// one-line summary to print. Errors: the parser's (conflicting flags, bad values).
absl::StatusOr<kernels::CudaGraphConfig> CudaGraphConfigFor(const MegatronArgs& args, Device device,
                                                            std::string* notice);

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_DEVICE_SETUP_H_
