// kernels/cuda/cuda_check.h: the status type of the CUDA kernels and one checking macro
// per vendor library (CUDA runtime, cuBLAS/cuBLASLt). Each turns a failing vendor call into
// a CudaStatus whose message names the file, the line, the call and the vendor's error
// (STYLE.md, "Contracts and errors": never exit() from library code).
//
// CudaStatus is deliberately not absl::Status: the kernels are compiled by nvcc alone for
// the self-contained GPU check binary (tests/gpu/), which must run on a machine without
// Abseil. kernels/cuda/status_adapter.h converts to absl::Status for layers/.
//
// Usage, inside a function returning CudaStatus:
//   MXMACA_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream));
//   MyKernel<<<grid, block, 0, stream>>>(...);
//   MXMACA_CUDA_CHECK_LAUNCH();        // launch-configuration errors, no synchronisation
//   MXMACA_CUBLAS_CHECK(cublasLtMatmul(...));
//   MXMACA_RETURN_IF_CUDA_ERROR(OtherKernel(ctx, ...));
#ifndef MXMACA_KERNELS_CUDA_CUDA_CHECK_H_
#define MXMACA_KERNELS_CUDA_CUDA_CHECK_H_

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "kernels/exec_context.h"

namespace mxmaca::kernels::cuda {

// CudaStatus: success, or an error message "file:line: call failed: VENDOR_ERROR_NAME
// (code): description". Cheap to return on success (empty string).
class [[nodiscard]] CudaStatus {
 public:
  CudaStatus() = default;
  static CudaStatus Error(std::string message) {
    CudaStatus s;
    s.ok_ = false;
    s.message_ = std::move(message);
    return s;
  }
  bool ok() const { return ok_; }
  const std::string& message() const { return message_; }

 private:
  bool ok_ = true;
  std::string message_;
};

// CudaErrorAt / CublasErrorAt / InvalidArgumentAt: the error statuses the macros build.
CudaStatus CudaErrorAt(cudaError_t err, const char* call, const char* file, int line);
CudaStatus CublasErrorAt(cublasStatus_t err, const char* call, const char* file, int line);
CudaStatus InvalidArgumentAt(const std::string& what, const char* file, int line);

// ProbeDevice: ok when at least one CUDA device is usable; otherwise an error whose
// message is the skip reason tests print, e.g. "no GPU: cudaGetDeviceCount returned
// cudaErrorInsufficientDriver" (what a machine without a driver reports) or "no GPU:
// cudaGetDeviceCount found 0 devices".
CudaStatus ProbeDevice();

// StreamOf: the cudaStream_t of an ExecContext (nullptr = the legacy default stream).
inline cudaStream_t StreamOf(const ExecContext& ctx) {
  return static_cast<cudaStream_t>(ctx.stream);
}

}  // namespace mxmaca::kernels::cuda

#define MXMACA_CUDA_CHECK(call)                                                        \
  do {                                                                                 \
    const cudaError_t mxmaca_cuda_err_ = (call);                                       \
    if (mxmaca_cuda_err_ != cudaSuccess) {                                             \
      return ::mxmaca::kernels::cuda::CudaErrorAt(mxmaca_cuda_err_, #call, __FILE__,   \
                                                  __LINE__);                           \
    }                                                                                  \
  } while (0)

// MXMACA_CUDA_CHECK_LAUNCH: after a <<<...>>> launch; reports an invalid configuration.
// cudaGetLastError does not synchronise (legal during graph capture) and, unlike
// cudaPeekAtLastError, clears a non-sticky error once reported: otherwise one earlier
// failed runtime call (an out-of-memory cudaMalloc, an invalidated capture) would make
// every later launch check on that thread fail. Sticky errors (illegal address) stay.
#define MXMACA_CUDA_CHECK_LAUNCH() MXMACA_CUDA_CHECK(cudaGetLastError())

#define MXMACA_CUBLAS_CHECK(call)                                                      \
  do {                                                                                 \
    const cublasStatus_t mxmaca_cublas_err_ = (call);                                  \
    if (mxmaca_cublas_err_ != CUBLAS_STATUS_SUCCESS) {                                 \
      return ::mxmaca::kernels::cuda::CublasErrorAt(mxmaca_cublas_err_, #call,         \
                                                    __FILE__, __LINE__);               \
    }                                                                                  \
  } while (0)

// MXMACA_CUDA_REQUIRE: argument validation; returns an error naming the condition.
#define MXMACA_CUDA_REQUIRE(cond, what)                                                \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      return ::mxmaca::kernels::cuda::InvalidArgumentAt(                               \
          std::string(what) + " (violated: " #cond ")", __FILE__, __LINE__);           \
    }                                                                                  \
  } while (0)

#define MXMACA_RETURN_IF_CUDA_ERROR(expr)                                              \
  do {                                                                                 \
    ::mxmaca::kernels::cuda::CudaStatus mxmaca_cuda_status_ = (expr);                  \
    if (!mxmaca_cuda_status_.ok()) return mxmaca_cuda_status_;                         \
  } while (0)

#endif  // MXMACA_KERNELS_CUDA_CUDA_CHECK_H_
