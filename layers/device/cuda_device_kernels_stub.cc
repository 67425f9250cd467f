// layers/device/cuda_device_kernels_stub.cc: CudaDeviceKernels::Create when MXMACA is
// built without a CUDA toolkit (HAS_CUDA False in @local_cuda//:defs.bzl), so callers
// such as the `--device cuda` flag link and report the reason at run time.
#include "absl/status/status.h"
#include "layers/device/cuda_device_kernels.h"

namespace mxmaca::layers::device {

absl::StatusOr<std::unique_ptr<CudaDeviceKernels>> CudaDeviceKernels::Create(
    int /*device*/, CudaStream /*stream*/, kernels::Precision /*precision*/) {
  return absl::UnimplementedError("MXMACA was built without CUDA (no nvcc at CUDA_PATH)");
}

absl::StatusOr<int64_t> CudaDeviceKernels::FreeMemoryBytes(int /*device*/,
                                                          int64_t* /*total_bytes*/) {
  return absl::UnimplementedError("MXMACA was built without CUDA (no nvcc at CUDA_PATH)");
}

}  // namespace mxmaca::layers::device
