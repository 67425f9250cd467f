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

}  // namespace mxmaca::kernels::cuda
