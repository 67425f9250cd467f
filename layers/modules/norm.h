// layers/modules/norm.h: the norm module — LayerNorm or RMSNorm over rows of width h, with
// Megatron's zero-centred gamma (--apply-layernorm-1p) — written once against the backend
// interface (layers/device/device_kernels.h), so the CPU backend, the emulated device and
// CUDA run the same calls.
//
// Source: megatron/core/transformer/torch_norm.py (WrappedTorchNorm: torch LayerNorm /
// RMSNorm), megatron/core/fusions/fused_layer_norm.py (FusedLayerNorm with
// zero_centered_gamma: the multiplier is 1 + weight). The per-row arithmetic is that of
// kernels/cpu/norm.h (and its CUDA twin kernels/cuda/norm.h).
//
// Shapes: x, y, dy, dx [n, h] fp32; weight, bias, dgamma, dbeta [h]; mean, rstd [n] (mean
// only for LayerNorm; nullptr for RMSNorm). All pointers are backend memory. n is the rows
// this rank normalises (b s, or b s/p under sequence parallelism). Parameters (logical
// names of layers/gpt_parameters.h): "<prefix>.weight" [h] (and "<prefix>.bias" [h] for
// LayerNorm), replicated over TP; under SP their gradients are summed over the TP group
// by the caller (the rows are split).
//
// Errors: those of the backend's kernels (kInvalidArgument for bad sizes, kInternal for a
// failed device call).
#ifndef MXMACA_LAYERS_MODULES_NORM_H_
#define MXMACA_LAYERS_MODULES_NORM_H_

#include <cstdint>

#include "absl/status/status.h"
#include "layers/device/device_kernels.h"
#include "layers/gpt_config.h"

namespace mxmaca::layers::modules {

class Norm {
 public:
  // Norm: config.normalization, config.norm_epsilon and config.apply_layernorm_1p.
  explicit Norm(const GptConfig& config)
      : layer_norm_(config.normalization == Normalization::kLayerNorm),
        eps_(config.norm_epsilon),
        zero_centered_gamma_(config.apply_layernorm_1p) {}

  // has_bias: LayerNorm (weight and bias, mean stashed); RMSNorm has weight only.
  bool has_bias() const { return layer_norm_; }
  // scratch_floats: the backend floats Forward / BackwardInput need in `gamma_scratch`
  // (h for the 1 + w multiplier with --apply-layernorm-1p, else 0).
  int64_t scratch_floats(int64_t h) const { return zero_centered_gamma_ ? h : 0; }

  // Forward: y = norm(x) with the multiplier weight (or 1 + weight) and bias (LayerNorm;
  // nullptr: none); writes mean (LayerNorm) and rstd for the backward.
  absl::Status Forward(device::DeviceKernels& k, const float* x, const float* weight,
                       const float* bias, int64_t n, int64_t h, float* y, float* mean, float* rstd,
                       float* gamma_scratch) const;
  // BackwardInput: dx from dy and the forward's x, mean, rstd (overwrites dx).
  absl::Status BackwardInput(device::DeviceKernels& k, const float* dy, const float* x,
                             const float* weight, const float* mean, const float* rstd, int64_t n,
                             int64_t h, float* dx, float* gamma_scratch) const;
  // BackwardWeight: ACCUMULATES dgamma (and dbeta for LayerNorm; nullptr otherwise) from
  // this call's rows. d/dweight = d/dgamma with the zero-centred gamma as well.
  absl::Status BackwardWeight(device::DeviceKernels& k, const float* dy, const float* x,
                              const float* mean, const float* rstd, int64_t n, int64_t h,
                              float* dgamma, float* dbeta) const;

 private:
  // Gamma: the multiplier (weight, or 1 + weight written into gamma_scratch).
  absl::Status Gamma(device::DeviceKernels& k, const float* weight, int64_t h, float* gamma_scratch,
                     const float** gamma) const;
  bool layer_norm_;
  float eps_;
  bool zero_centered_gamma_;
};

}  // namespace mxmaca::layers::modules

#endif  // MXMACA_LAYERS_MODULES_NORM_H_
