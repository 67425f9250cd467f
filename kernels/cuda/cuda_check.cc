// kernels/cuda/cuda_check.cc: messages of the CUDA / cuBLAS checking macros.
#include "kernels/cuda/cuda_check.h"

#include <string>

namespace mxmaca::kernels::cuda {

CudaStatus CudaErrorAt(cudaError_t err, const char* call, const char* file, int line) {
  return CudaStatus::Error(std::string(file) + ":" + std::to_string(line) + ": " + call +
                           " failed: " + cudaGetErrorName(err) + " (" +
                           std::to_string(static_cast<int>(err)) +
                           "): " + cudaGetErrorString(err));
}

CudaStatus CublasErrorAt(cublasStatus_t err, const char* call, const char* file, int line) {
  return CudaStatus::Error(std::string(file) + ":" + std::to_string(line) + ": " + call +
                           " failed: " + cublasLtGetStatusName(err) + " (" +
                           std::to_string(static_cast<int>(err)) +
                           "): " + cublasLtGetStatusString(err));
}

CudaStatus InvalidArgumentAt(const std::string& what, const char* file, int line) {
  return CudaStatus::Error(std::string(file) + ":" + std::to_string(line) +
                           ": invalid argument: " + what);
}

CudaStatus ProbeDevice() {
  int count = 0;  // cudaErrorInsufficientDriver leaves it untouched
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return CudaStatus::Error(std::string("no GPU: cudaGetDeviceCount returned ") +
                             cudaGetErrorName(err));
  }
  if (count == 0) return CudaStatus::Error("no GPU: cudaGetDeviceCount found 0 devices");
  return CudaStatus();
}

}  // namespace mxmaca::kernels::cuda
