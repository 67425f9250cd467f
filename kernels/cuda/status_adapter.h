// kernels/cuda/status_adapter.h: CudaStatus -> absl::Status for callers in layers/ and
// actors/ (the kernels themselves stay free of Abseil; see cuda_check.h).
#ifndef MXMACA_KERNELS_CUDA_STATUS_ADAPTER_H_
#define MXMACA_KERNELS_CUDA_STATUS_ADAPTER_H_

#include "absl/status/status.h"
#include "kernels/cuda/cuda_check.h"

namespace mxmaca::kernels::cuda {

// ToAbslStatus: OkStatus, or kInternal with the CUDA error's file:line message (kernel
// errors are failed vendor calls or violated preconditions of internal callers).
inline absl::Status ToAbslStatus(const CudaStatus& s) {
  return s.ok() ? absl::OkStatus() : absl::InternalError(s.message());
}

}  // namespace mxmaca::kernels::cuda

#endif  // MXMACA_KERNELS_CUDA_STATUS_ADAPTER_H_
