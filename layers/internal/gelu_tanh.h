// layers/internal/gelu_tanh.h: the tanh-approximation GELU that Megatron uses when
// --bias-gelu-fusion is on (its default with biases and without SwiGLU).
//
// Source: megatron/core/fusions/fused_bias_gelu.py (bias_gelu / bias_gelu_back), also
// torch.nn.functional.gelu(x, approximate="tanh"):
//   y  = 0.5 x (1 + tanh(k (x + 0.044715 x^3))),  k = sqrt(2 / pi)
//   dy/dx = 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2) + 0.5 (1 + t),  t = tanh(k (x + 0.044715 x^3))
// (Megatron writes k as 0.79788456; we use sqrt(2/pi) in full as torch does — the two differ
// by 1e-9 relative.) Private helper until kernels/cpu provides it (requests.md).
// fp32 in and out, tanh evaluated in fp32; element-wise, so any thread count gives the
// same bits.
#ifndef MXMACA_LAYERS_INTERNAL_GELU_TANH_H_
#define MXMACA_LAYERS_INTERNAL_GELU_TANH_H_

#include <cstdint>

#include "kernels/exec_context.h"

namespace mxmaca::layers::internal {

// GeluTanhForward: y[i] = gelu_tanh(x[i]), x, y [n]; y may alias x.
void GeluTanhForward(const kernels::ExecContext& ctx, const float* x, float* y, int64_t n);

// GeluTanhBackward: dx[i] = dy[i] * gelu_tanh'(x[i]); dx may alias dy.
void GeluTanhBackward(const kernels::ExecContext& ctx, const float* x, const float* dy, float* dx,
                      int64_t n);

}  // namespace mxmaca::layers::internal

#endif  // MXMACA_LAYERS_INTERNAL_GELU_TANH_H_
