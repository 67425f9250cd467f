// layers/modules/linear.cc
#include "layers/modules/linear.h"

#include "base/status_macros.h"

namespace mxmaca::layers::modules {

absl::Status LinearProduct(device::DeviceKernels& k, const float* x, const float* w, int64_t t,
                           int64_t in, int64_t out, float* y) {
  return k.Gemm(false, true, t, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
}

absl::Status LinearForward(device::DeviceKernels& k, const float* x, const float* w,
                           const float* bias, int64_t t, int64_t in, int64_t out, float* y) {
  MXMACA_RETURN_IF_ERROR(LinearProduct(k, x, w, t, in, out, y));
  if (bias != nullptr) MXMACA_RETURN_IF_ERROR(k.AddBias(y, bias, t, out));
  return absl::OkStatus();
}

absl::Status LinearBackwardInput(device::DeviceKernels& k, const float* dy, const float* w,
                                 int64_t t, int64_t in, int64_t out, float* dx) {
  return k.Gemm(false, false, t, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}

absl::Status LinearBiasGrad(device::DeviceKernels& k, const float* dy, int64_t t, int64_t out,
                            float* dbias) {
  return k.BiasGrad(dy, t, out, dbias);
}

absl::Status LinearBackwardWeight(device::DeviceKernels& k, const float* dy, const float* x,
                                  int64_t t, int64_t in, int64_t out, float* dw, float* dbias,
                                  bool accumulate_dw) {
  MXMACA_RETURN_IF_ERROR(
      k.Gemm(true, false, out, in, t, 1.0f, dy, out, x, in, accumulate_dw ? 1.0f : 0.0f, dw, in));
  if (dbias != nullptr) MXMACA_RETURN_IF_ERROR(k.BiasGrad(dy, t, out, dbias));
  return absl::OkStatus();
}

}  // namespace mxmaca::layers::modules
