// kernels/cpu/elementwise.h: element-wise and row-broadcast kernels on CPU.
//
// Shapes: rows x cols row-major ([N, C] with N = tokens); n = element count. fp32.
// All functions run on up to ctx.num_threads OpenMP threads and give bit-identical
// results for any thread count (per-element work is independent; reductions use a
// fixed blocking, see BiasGrad and SumSquares). No allocation visible to the caller.
#ifndef MXMACA_KERNELS_CPU_ELEMENTWISE_H_
#define MXMACA_KERNELS_CPU_ELEMENTWISE_H_

#include <cstdint>

#include "kernels/exec_context.h"

namespace mxmaca::kernels::cpu {

// AddBias: y[r, c] += bias[c]. y [rows, cols], bias [cols].
void AddBias(const ExecContext& ctx, float* y, const float* bias, int64_t rows,
             int64_t cols);

// BiasGrad: dbias[c] += sum_r dy[r, c] (accumulates). dy [rows, cols], dbias [cols].
// Order: rows are summed in fixed blocks of 64 consecutive rows (each block's partial
// sum in row order), then the block partials are added to dbias in block order — the
// same bits for any thread count.
void BiasGrad(const ExecContext& ctx, const float* dy, int64_t rows, int64_t cols,
              float* dbias);

// Add: out[i] = a[i] + b[i], i < n. out may alias a or b.
void Add(const ExecContext& ctx, const float* a, const float* b, float* out, int64_t n);

// Scale: x[i] *= s, i < n.
void Scale(const ExecContext& ctx, float* x, int64_t n, float s);

// AddScalar: y[i] = x[i] + c in fp32, i < n (y may alias x).
void AddScalar(const ExecContext& ctx, const float* x, float c, float* y, int64_t n);

// SumSquares: sum_i x[i]^2 accumulated in fp64 (for gradient-norm clipping). Fixed order:
// blocks of 4096 elements, each summed with 8 interleaved fp64 lanes then combined;
// block sums added in block order. Independent of thread count.
double SumSquares(const ExecContext& ctx, const float* x, int64_t n);

// GeluForward: y = x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2))), the exact GELU
// (Hendrycks & Gimpel 2016; torch.nn.functional.gelu default, Megatron's default when
// neither --openai-gelu nor --onnx-safe), not the tanh approximation. Phi is evaluated
// as 0.5 erfc(-x / sqrt(2)) with an AVX2 erfc of relative error ~1e-7 (vec_math.h), so
// y is within a few ulp of the true value. x, y [n]; y may alias x.
void GeluForward(const ExecContext& ctx, const float* x, float* y, int64_t n);

// GeluBackward: dx = dy * (Phi(x) + x * phi(x)), phi the standard normal density.
// x, dy, dx [n]; dx may alias dy.
void GeluBackward(const ExecContext& ctx, const float* x, const float* dy, float* dx,
                  int64_t n);

// GeluTanhForward: the tanh-approximation GELU that Megatron's default
// --bias-gelu-fusion computes (megatron/core/fusions/fused_bias_gelu.py; also
// torch.nn.functional.gelu(x, approximate="tanh")):
//   y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3).
// Evaluated as y = x * sigmoid(2u) (the same function; 0.5 (1 + tanh(u)) = sigmoid(2u))
// with sigmoid from exp(-2|u|) <= 1, so neither 1 + tanh nor 1 - tanh^2 cancels: a few
// ulp relative everywhere. x, y [n]; y may alias x.
void GeluTanhForward(const ExecContext& ctx, const float* x, float* y, int64_t n);

// GeluTanhBackward: dx = dy * (s + 2 x s (1 - s) u'), s = sigmoid(2u),
// u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2) — Megatron's bias_gelu_back written with s
// (0.5 (1 + t) = s, 0.5 (1 - t^2) = 2 s (1 - s)). dx may alias dy.
void GeluTanhBackward(const ExecContext& ctx, const float* x, const float* dy, float* dx,
                      int64_t n);

// SwigluForward: x [rows, 2f] holds per row [gate (f) | up (f)] — Megatron's
// torch.chunk(x, 2, dim=-1) in megatron/core/fusions/fused_bias_swiglu.py;
// y [rows, f] = silu(gate) * up, silu(g) = g * sigmoid(g) (Shazeer 2020, "GLU Variants
// Improve Transformer").
void SwigluForward(const ExecContext& ctx, const float* x, float* y, int64_t rows,
                   int64_t f);

// SwigluBackward: dx [rows, 2f] = [dgate | dup] with
// dgate = dy * up * sigmoid(g) * (1 + g * (1 - sigmoid(g))), dup = dy * silu(g).
// x [rows, 2f], dy [rows, f]. dx must not alias x or dy.
void SwigluBackward(const ExecContext& ctx, const float* x, const float* dy, float* dx,
                    int64_t rows, int64_t f);

// DropoutForward: keep element i iff UniformAt(key, index_offset + i) >= p (philox.h);
// y[i] = keep ? x[i] * s : 0 with s = fp32(1 / (1 - p)) (inverted dropout; torch
// multiplies by the same fp32 scale). p == 0: copy.
// x, y [n]; y may alias x. index_offset is the global index of x[0] in the logical tensor
// so that any sharding draws the same mask. 0 <= p < 1.
void DropoutForward(const ExecContext& ctx, const float* x, float* y, int64_t n, float p,
                    RngKey key, int64_t index_offset);

// DropoutBackward: dx[i] = keep ? dy[i] * s : 0 with the same mask as the forward
// (regenerated from key and index_offset, not stored). dx may alias dy.
void DropoutBackward(const ExecContext& ctx, const float* dy, float* dx, int64_t n,
                     float p, RngKey key, int64_t index_offset);

}  // namespace mxmaca::kernels::cpu

#endif  // MXMACA_KERNELS_CPU_ELEMENTWISE_H_
