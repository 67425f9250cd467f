// layers/device/cuda_graph_runner_stub.cc: cuda_graph_runner.h in a build without CUDA.
#include "layers/device/cuda_graph_runner.h"

namespace mxmaca::layers::device {

absl::StatusOr<std::shared_ptr<CudaGraphs>> MakeCudaGraphs(const kernels::CudaGraphConfig&) {
  return absl::UnimplementedError("CUDA graphs: MXMACA was built without CUDA");
}

absl::StatusOr<SegmentRunner> MakeCudaGraphRunner(std::shared_ptr<CudaGraphs>, DeviceKernels*,
                                                  int) {
  return absl::UnimplementedError("CUDA graphs: MXMACA was built without CUDA");
}

}  // namespace mxmaca::layers::device
