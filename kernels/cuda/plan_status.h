// kernels/cuda/plan_status.h: the status of the host-only bookkeeping under the CUDA
// memory pool and graph cache (arena_plan.h, graph_state.h).
//
// Those classes must build without CUDA (CPU-only build, unit tests here) and without
// Abseil (the self-contained GPU check binary links them), so they cannot return
// CudaStatus (its header pulls in the CUDA runtime) or absl::Status. PlanStatus has the
// same shape as CudaStatus; the thin CUDA classes pass its message on unchanged.
#ifndef MXMACA_KERNELS_CUDA_PLAN_STATUS_H_
#define MXMACA_KERNELS_CUDA_PLAN_STATUS_H_

#include <string>
#include <utility>

namespace mxmaca::kernels::cuda {

// PlanStatus: success, or an error message naming what was asked and what was expected.
class [[nodiscard]] PlanStatus {
 public:
  PlanStatus() = default;
  static PlanStatus Error(std::string message) {
    PlanStatus s;
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

}  // namespace mxmaca::kernels::cuda

#endif  // MXMACA_KERNELS_CUDA_PLAN_STATUS_H_
