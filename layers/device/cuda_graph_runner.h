// layers/device/cuda_graph_runner.h: the SegmentRunner that captures a device stage's op
// segments into CUDA graphs and replays them (issue 8; docs/ARCHITECTURE.md "Kernel calls only
// enqueue"), over kernels/cuda/graph_cache.h.
//
// Each stage actor gets one runner per model chunk, over the CudaGraphCache its rank owns
// (one per actor: graphs are tied to the actor's stream and device memory). A segment is
// keyed by (op, chunk, b, s) with extras (slot, document masks): the slot's buffers have
// fixed addresses, so a graph captured on slot 1 is replayed only for slot 1. The first
// `warmup_steps` runs of a key are eager (cuBLASLt picks algorithms and the attention
// scratch grows then), the next is captured and launched, later ones only launched. A
// capture that fails (a kernel that synchronises, an allocation) makes that key eager for
// good, with the reason in the cache's statistics; the stage's results do not change.
// Dropout is capturable: its keys live in the slot and are read when the kernels run.
#ifndef MXMACA_LAYERS_DEVICE_CUDA_GRAPH_RUNNER_H_
#define MXMACA_LAYERS_DEVICE_CUDA_GRAPH_RUNNER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/cuda_graph_flags.h"
#include "layers/device/segment_runner.h"
#include "layers/device/device_kernels.h"

namespace mxmaca::layers::device {

// CudaGraphs: one actor's graph cache (opaque; owns the cudaGraphExec_t handles).
class CudaGraphs {
 public:
  virtual ~CudaGraphs() = default;
  // Report: one line per segment key: eager runs, captures, launches, failures.
  virtual std::string Report() const = 0;
  // Invalidate: drops every graph (shapes or layers changed); returns how many.
  virtual int Invalidate() = 0;
  // Summary: one line: segment keys seen, graphs live, launches, eager runs, and the keys
  // left eager after a failed capture with the first reason.
  virtual std::string Summary() const = 0;
};

// MakeCudaGraphs: a cache for `config` (mode local; warm-up runs per key). kUnimplemented
// in a build without CUDA.
absl::StatusOr<std::shared_ptr<CudaGraphs>> MakeCudaGraphs(const kernels::CudaGraphConfig& config);

// MakeCudaGraphRunner: the runner of chunk `chunk` over `graphs`, enqueuing on `kernels`'
// stream; `kernels` must be a CudaDeviceKernels (InvalidArgument otherwise) and outlive
// the runner. Errors of a captured or replayed segment come back as kInternal with the
// CUDA call, file and line.
absl::StatusOr<SegmentRunner> MakeCudaGraphRunner(std::shared_ptr<CudaGraphs> graphs,
                                                  DeviceKernels* kernels, int chunk);

}  // namespace mxmaca::layers::device

#endif  // MXMACA_LAYERS_DEVICE_CUDA_GRAPH_RUNNER_H_
