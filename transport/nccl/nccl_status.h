// transport/nccl/nccl_status.h: the checking macros of the NCCL backend — one for NCCL
// results, one for CUDA runtime errors — turning a failing vendor call into an
// absl::Status that names the operation (group, sequence), the file, the line, the call and
// the vendor's error (STYLE.md "Contracts and errors"). CUDA build only.
//
// Usage, inside a function returning absl::Status, with `context` a string such as
// CollectiveInfo::ToString():
//   MXMACA_NCCL_RETURN_IF_ERROR(ncclAllReduce(...), context);
//   MXMACA_CUDART_RETURN_IF_ERROR(cudaEventRecord(event, stream), context);
#ifndef MXMACA_TRANSPORT_NCCL_NCCL_STATUS_H_
#define MXMACA_TRANSPORT_NCCL_NCCL_STATUS_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "transport/communicator.h"

namespace mxmaca::transport::nccl {

// NcclResultName: "ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError",
// "ncclInternalError", "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError",
// "ncclInProgress"; "ncclResult(N)" for other values.
const char* NcclResultName(ncclResult_t result);

// NcclStatusCode: the absl code of an NCCL failure: ncclInvalidArgument, ncclInvalidUsage
// -> kInvalidArgument; ncclSystemError, ncclRemoteError -> kUnavailable (a peer or the
// network); ncclInProgress -> kUnavailable; everything else -> kInternal.
absl::StatusCode NcclStatusCode(ncclResult_t result);

// NcclErrorAt: "<context>: <file>:<line>: <call> failed: <NcclResultName> (<code>):
// <ncclGetErrorString>[; last NCCL error: <ncclGetLastError>]" with NcclStatusCode.
absl::Status NcclErrorAt(ncclResult_t result, const char* call, const char* file, int line,
                         absl::string_view context);

// CudaErrorAt: "<context>: <file>:<line>: <call> failed: <cudaGetErrorName> (<code>):
// <cudaGetErrorString>", kInternal.
absl::Status CudaErrorAt(cudaError_t error, const char* call, const char* file, int line,
                         absl::string_view context);

// ToNcclDataType: the NCCL type of `dtype` (fp32 -> ncclFloat32, bf16 -> ncclBfloat16,
// int32 -> ncclInt32, int64 -> ncclInt64, uint8 -> ncclUint8).
ncclDataType_t ToNcclDataType(DataType dtype);

}  // namespace mxmaca::transport::nccl

#define MXMACA_NCCL_RETURN_IF_ERROR(call, context)                                         \
  do {                                                                                     \
    const ncclResult_t mxmaca_nccl_result_ = (call);                                       \
    if (mxmaca_nccl_result_ != ncclSuccess) {                                              \
      return ::mxmaca::transport::nccl::NcclErrorAt(mxmaca_nccl_result_, #call, __FILE__,  \
                                                    __LINE__, (context));                  \
    }                                                                                      \
  } while (0)

#define MXMACA_CUDART_RETURN_IF_ERROR(call, context)                                       \
  do {                                                                                     \
    const cudaError_t mxmaca_cudart_error_ = (call);                                       \
    if (mxmaca_cudart_error_ != cudaSuccess) {                                             \
      return ::mxmaca::transport::nccl::CudaErrorAt(mxmaca_cudart_error_, #call, __FILE__, \
                                                    __LINE__, (context));                  \
    }                                                                                      \
  } while (0)

#endif  // MXMACA_TRANSPORT_NCCL_NCCL_STATUS_H_
