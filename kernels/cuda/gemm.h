// kernels/cuda/gemm.h: matrix products on the GPU through cuBLASLt.
//
// The CUDA twin of kernels/cpu/gemm.h: row-major, op(X) = X or X^T, fp32 accumulation,
// device pointers, enqueued on the stream of the ExecContext (no synchronisation, no
// allocation: capturable into a CUDA graph).
//   ctx.precision == kFp32: fp32 inputs, CUBLAS_COMPUTE_32F (no TF32).
//   ctx.precision == kBf16: fp32 inputs rounded to bf16 by cuBLASLt itself
//     (CUBLAS_COMPUTE_32F_FAST_16BF: bf16 tensor cores, fp32 accumulation and output) —
//     the structure of Megatron's --bf16 for fp32 activations.
// GemmBf16 takes bf16 operands directly (the GPU backend's native activations).
// Row-major products are computed as the column-major product C^T = op(B)^T op(A)^T.
#ifndef MXMACA_KERNELS_CUDA_GEMM_H_
#define MXMACA_KERNELS_CUDA_GEMM_H_

#include <cublasLt.h>
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/cuda/cuda_check.h"
#include "kernels/exec_context.h"

namespace mxmaca::kernels::cuda {

// GemmHandle: a cuBLASLt handle plus its workspace (device memory, allocated once at
// creation). One per stream owner (stage actor); not thread-safe — the actor that owns
// the stream owns the handle.
class GemmHandle {
 public:
  // Create: a handle with `workspace_bytes` of cuBLASLt workspace (32 MiB is what
  // cuBLAS recommends on Hopper). Errors: a CUDA or cuBLAS failure (no device, out of
  // memory) with file and line.
  static CudaStatus Create(size_t workspace_bytes, std::unique_ptr<GemmHandle>* out);
  ~GemmHandle();
  GemmHandle(const GemmHandle&) = delete;
  GemmHandle& operator=(const GemmHandle&) = delete;

  cublasLtHandle_t lt() const { return lt_; }
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  GemmHandle() = default;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

// Gemm: C[m, n] = alpha * op(A)[m, k] · op(B)[k, n] + beta * C[m, n]. A is [m, k] (or
// [k, m] when trans_a) with leading dimension lda; likewise B [k, n] (or [n, k]) with
// ldb; C [m, n] with ldc. fp32 device pointers. beta = 0 ignores C's contents.
// Errors: invalid sizes (negative, ld too small), cuBLASLt failures (no algorithm for the
// shape, launch failure) with file and line.
CudaStatus Gemm(const ExecContext& ctx, GemmHandle& handle, bool trans_a, bool trans_b,
                int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// GemmStridedBatched: `batch` independent Gemm calls; operand i starts at
// a + i * stride_a (likewise b, c). One cuBLASLt call.
CudaStatus GemmStridedBatched(const ExecContext& ctx, GemmHandle& handle, bool trans_a,
                              bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                              const float* a, int64_t lda, int64_t stride_a, const float* b,
                              int64_t ldb, int64_t stride_b, float beta, float* c,
                              int64_t ldc, int64_t stride_c, int64_t batch);

// GemmBf16: as Gemm with bf16 operands A and B (tensor cores), fp32 accumulation and an
// fp32 C. ctx.precision is ignored (the operands already are bf16).
CudaStatus GemmBf16(const ExecContext& ctx, GemmHandle& handle, bool trans_a, bool trans_b,
                    int64_t m, int64_t n, int64_t k, float alpha, const __nv_bfloat16* a,
                    int64_t lda, const __nv_bfloat16* b, int64_t ldb, float beta, float* c,
                    int64_t ldc);

// GemmBf16Out: as GemmBf16 with a bf16 C (fp32 accumulation, rounded once on output):
// the all-bf16 GEMM whose speed is the device's practical bf16 peak.
CudaStatus GemmBf16Out(const ExecContext& ctx, GemmHandle& handle, bool trans_a,
                       bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                       const __nv_bfloat16* a, int64_t lda, const __nv_bfloat16* b,
                       int64_t ldb, float beta, __nv_bfloat16* c, int64_t ldc);

// ConvertToBf16: y[i] = bf16(x[i]) round-to-nearest-even (as kernels/cpu/bf16.h), i < n.
CudaStatus ConvertToBf16(const ExecContext& ctx, const float* x, __nv_bfloat16* y,
                         int64_t n);

}  // namespace mxmaca::kernels::cuda

#endif  // MXMACA_KERNELS_CUDA_GEMM_H_
