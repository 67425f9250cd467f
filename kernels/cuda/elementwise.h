// kernels/cuda/elementwise.h: element-wise and row-broadcast kernels on the GPU.
//
// The CUDA twin of kernels/cpu/elementwise.h, same math and shapes: rows x cols
// row-major ([N, C], N = tokens); n = element count; fp32 device pointers; enqueued on
// the ExecContext's stream. Errors (CudaStatus): negative sizes, launch failures, with
// file and line. Reductions (BiasGrad, SumSquares) use a fixed order (no atomics): the
// same bits on every run, though not the CPU backend's bits (different order).
// Dropout draws the same mask as the CPU backend bit for bit (Philox4x32-10 twin).
#ifndef MXMACA_KERNELS_CUDA_ELEMENTWISE_H_
#define MXMACA_KERNELS_CUDA_ELEMENTWISE_H_

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/exec_context.h"

namespace mxmaca::kernels::cuda {

// AddBias: y[r, c] += bias[c]. y [rows, cols], bias [cols].
CudaStatus AddBias(const ExecContext& ctx, float* y, const float* bias, int64_t rows,
                   int64_t cols);

// BiasGrad: dbias[c] += sum_r dy[r, c] (accumulates). dy [rows, cols], dbias [cols].
// Order: 32 interleaved row partial sums per column, added in lane order.
CudaStatus BiasGrad(const ExecContext& ctx, const float* dy, int64_t rows, int64_t cols,
                    float* dbias);

// Add: out[i] = a[i] + b[i], i < n. out may alias a or b.
CudaStatus Add(const ExecContext& ctx, const float* a, const float* b, float* out,
               int64_t n);

// Scale: x[i] *= s, i < n.
CudaStatus Scale(const ExecContext& ctx, float* x, int64_t n, float s);

// AddScalar: y[i] = x[i] + c in fp32, i < n (y may alias x).
CudaStatus AddScalar(const ExecContext& ctx, const float* x, float c, float* y, int64_t n);

// kSumSquaresPartials: the size of SumSquares' `partials` workspace (doubles).
inline constexpr int kSumSquaresPartials = 1024;

// SumSquares: *out = sum_i x[i]^2 in fp64 (gradient-norm clipping), written to device
// memory (no host read: the caller syncs when it needs the value). partials: device
// workspace of kSumSquaresPartials doubles. Fixed order: block b of 1024 sums elements
// b*256 + t + k*(1024*256) per thread t, a fixed tree within the block, then the block
// partials by one block in a fixed tree.
CudaStatus SumSquares(const ExecContext& ctx, const float* x, int64_t n, double* partials,
                      double* out);

// GeluForward: the exact GELU y = x Phi(x) = 0.5 x erfc(-x / sqrt(2)) (CUDA's erfcf, a
// few ulp). x, y [n]; y may alias x.
CudaStatus GeluForward(const ExecContext& ctx, const float* x, float* y, int64_t n);

// GeluBackward: dx = dy * (Phi(x) + x phi(x)). dx may alias dy.
CudaStatus GeluBackward(const ExecContext& ctx, const float* x, const float* dy, float* dx,
                        int64_t n);

// GeluTanhForward: Megatron's bias-GELU (tanh approximation) as x * sigmoid(2u),
// u = sqrt(2/pi) (x + 0.044715 x^3). y may alias x.
CudaStatus GeluTanhForward(const ExecContext& ctx, const float* x, float* y, int64_t n);

// GeluTanhBackward: dx = dy * (s + 2 x s (1 - s) u'), s = sigmoid(2u). dx may alias dy.
CudaStatus GeluTanhBackward(const ExecContext& ctx, const float* x, const float* dy,
                            float* dx, int64_t n);

// SwigluForward: x [rows, 2f] = [gate | up] per row; y [rows, f] = silu(gate) * up.
CudaStatus SwigluForward(const ExecContext& ctx, const float* x, float* y, int64_t rows,
                         int64_t f);

// SwigluBackward: dx [rows, 2f] = [dy up sig(g) (1 + g (1 - sig(g))) | dy silu(g)].
// dx must not alias x or dy.
CudaStatus SwigluBackward(const ExecContext& ctx, const float* x, const float* dy,
                          float* dx, int64_t rows, int64_t f);

// DropoutForward: keep element i iff UniformAt(key, index_offset + i) >= p;
// y = keep ? x * fp32(1 / (1 - p)) : 0 (the CPU backend's mask, bit for bit).
// 0 <= p < 1 (else an error). y may alias x.
CudaStatus DropoutForward(const ExecContext& ctx, const float* x, float* y, int64_t n,
                          float p, RngKey key, int64_t index_offset);

// DropoutBackward: dx = keep ? dy * s : 0, the forward's mask regenerated.
CudaStatus DropoutBackward(const ExecContext& ctx, const float* dy, float* dx, int64_t n,
                           float p, RngKey key, int64_t index_offset);

// DropoutForward / DropoutBackward with the key in DEVICE memory (`device_key`, read when
// the kernel runs): the same masks as the by-value calls, and a CUDA graph captured with
// them replays with whatever key the buffer holds then (layers/device uploads each
// micro-batch's keys before its segment). device_key may be null only when p == 0.
CudaStatus DropoutForward(const ExecContext& ctx, const float* x, float* y, int64_t n,
                          float p, const RngKey* device_key, int64_t index_offset);
CudaStatus DropoutBackward(const ExecContext& ctx, const float* dy, float* dx, int64_t n,
                           float p, const RngKey* device_key, int64_t index_offset);

}  // namespace mxmaca::kernels::cuda

#endif  // MXMACA_KERNELS_CUDA_ELEMENTWISE_H_
