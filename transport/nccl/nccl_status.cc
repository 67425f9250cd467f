// transport/nccl/nccl_status.cc: messages of the NCCL / CUDA checking macros.
#include "transport/nccl/nccl_status.h"

#include "absl/strings/str_cat.h"

namespace mxmaca::transport::nccl {

const char* NcclResultName(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: break;
  }
  return "ncclResult(?)";
}

absl::StatusCode NcclStatusCode(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return absl::StatusCode::kOk;
    case ncclInvalidArgument:
    case ncclInvalidUsage: return absl::StatusCode::kInvalidArgument;
    case ncclSystemError:
    case ncclRemoteError:
    case ncclInProgress: return absl::StatusCode::kUnavailable;
    default: break;
  }
  return absl::StatusCode::kInternal;
}

absl::Status NcclErrorAt(ncclResult_t result, const char* call, const char* file, int line,
                         absl::string_view context) {
  std::string message = absl::StrCat(context, ": ", file, ":", line, ": ", call, " failed: ",
                                     NcclResultName(result), " (", static_cast<int>(result),
                                     "): ", ncclGetErrorString(result));
  // ncclGetLastError(nullptr): the process's last NCCL error text (NCCL documents comm as
  // unused), empty when none.
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') absl::StrAppend(&message, "; last NCCL error: ", last);
  return absl::Status(NcclStatusCode(result), message);
}

absl::Status CudaErrorAt(cudaError_t error, const char* call, const char* file, int line,
                         absl::string_view context) {
  return absl::InternalError(absl::StrCat(context, ": ", file, ":", line, ": ", call,
                                          " failed: ", cudaGetErrorName(error), " (",
                                          static_cast<int>(error),
                                          "): ", cudaGetErrorString(error)));
}

ncclDataType_t ToNcclDataType(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kBFloat16: return ncclBfloat16;
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kUInt8: return ncclUint8;
  }
  return ncclUint8;
}

}  // namespace mxmaca::transport::nccl
