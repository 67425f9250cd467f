// layers/modules/linear.h: the local matrix products of Megatron's ColumnParallelLinear and
// RowParallelLinear (megatron/core/tensor_parallel/layers.py), forward, backward-input and
// backward-weight, written once against the backend interface
// (layers/device/device_kernels.h). The TP region mappings around them (all-gather /
// reduce-scatter with SP, all-reduce without) are layers/tensor_parallel.h's; a
// column-parallel layer's `out` and a row-parallel layer's `in` are this rank's shard
// widths.
//
// Shapes (t = tokens, row-major fp32 backend memory): x [t, in], W [out, in] (Megatron's
// weight layout), bias [out], y [t, out].
//   Forward:         y = x W^T (+ bias)
//   BackwardInput:   dx [t, in] = dy [t, out] W
//   BackwardWeight:  dW [out, in] = dy^T x (overwrites), dbias [out] = column sums of dy
//                    (overwrites)
// Errors: the backend's (kInvalidArgument for bad sizes, kInternal for a failed device
// call).
#ifndef MXMACA_LAYERS_MODULES_LINEAR_H_
#define MXMACA_LAYERS_MODULES_LINEAR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "layers/device/device_kernels.h"

namespace mxmaca::layers::modules {

// LinearForward: y = x W^T, plus bias when bias != nullptr.
absl::Status LinearForward(device::DeviceKernels& k, const float* x, const float* w,
                           const float* bias, int64_t t, int64_t in, int64_t out, float* y);

// LinearProduct: y = x W^T without the bias (a row-parallel layer adds its bias after
// the sum over TP ranks, once).
absl::Status LinearProduct(device::DeviceKernels& k, const float* x, const float* w, int64_t t,
                           int64_t in, int64_t out, float* y);

// LinearBackwardInput: dx = dy W.
absl::Status LinearBackwardInput(device::DeviceKernels& k, const float* dy, const float* w,
                                 int64_t t, int64_t in, int64_t out, float* dx);

// LinearBiasGrad: dbias [out] = column sums of dy [t, out] (overwrites).
absl::Status LinearBiasGrad(device::DeviceKernels& k, const float* dy, int64_t t, int64_t out,
                            float* dbias);

// LinearBackwardWeight: dw = dy^T x (dw += dy^T x with accumulate_dw: Megatron's
// gradient-accumulation fusion, a GEMM with beta = 1 into the main gradient) and, when
// dbias != nullptr, dbias = column sums of dy (overwrites). Callers otherwise hand in
// zeroed per-micro-batch buffers and add them to the gradient arena themselves
// (layers/transformer_layer.h WeightGradSink).
absl::Status LinearBackwardWeight(device::DeviceKernels& k, const float* dy, const float* x,
                                  int64_t t, int64_t in, int64_t out, float* dw, float* dbias,
                                  bool accumulate_dw = false);

}  // namespace mxmaca::layers::modules

#endif  // MXMACA_LAYERS_MODULES_LINEAR_H_
