// layers/modules/norm.cc
#include "layers/modules/norm.h"

#include "base/status_macros.h"

namespace mxmaca::layers::modules {

absl::Status Norm::Gamma(device::DeviceKernels& k, const float* weight, int64_t h,
                         float* gamma_scratch, const float** gamma) const {
  if (!zero_centered_gamma_) {
    *gamma = weight;
    return absl::OkStatus();
  }
  if (gamma_scratch == nullptr) {
    return absl::InvalidArgumentError(
        "Norm with --apply-layernorm-1p: no scratch for the 1 + weight multiplier");
  }
  MXMACA_RETURN_IF_ERROR(k.AddScalar(weight, 1.0f, gamma_scratch, h));
  *gamma = gamma_scratch;
  return absl::OkStatus();
}

absl::Status Norm::Forward(device::DeviceKernels& k, const float* x, const float* weight,
                           const float* bias, int64_t n, int64_t h, float* y, float* mean,
                           float* rstd, float* gamma_scratch) const {
  const float* gamma = nullptr;
  MXMACA_RETURN_IF_ERROR(Gamma(k, weight, h, gamma_scratch, &gamma));
  if (layer_norm_) return k.LayerNormForward(x, gamma, bias, eps_, n, h, y, mean, rstd);
  return k.RmsNormForward(x, gamma, eps_, n, h, y, rstd);
}

absl::Status Norm::BackwardInput(device::DeviceKernels& k, const float* dy, const float* x,
                                 const float* weight, const float* mean, const float* rstd,
                                 int64_t n, int64_t h, float* dx, float* gamma_scratch) const {
  const float* gamma = nullptr;
  MXMACA_RETURN_IF_ERROR(Gamma(k, weight, h, gamma_scratch, &gamma));
  if (layer_norm_) return k.LayerNormBackwardInput(dy, x, gamma, mean, rstd, n, h, dx);
  return k.RmsNormBackwardInput(dy, x, gamma, rstd, n, h, dx);
}

absl::Status Norm::BackwardWeight(device::DeviceKernels& k, const float* dy, const float* x,
                                  const float* mean, const float* rstd, int64_t n, int64_t h,
                                  float* dgamma, float* dbeta) const {
  if (layer_norm_) return k.LayerNormBackwardWeight(dy, x, mean, rstd, n, h, dgamma, dbeta);
  return k.RmsNormBackwardWeight(dy, x, rstd, n, h, dgamma);
}

}  // namespace mxmaca::layers::modules
