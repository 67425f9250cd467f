// kernels/cuda/gemm.cu: see gemm.h.
#include "kernels/cuda/gemm.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace mxmaca::kernels::cuda {
namespace {

// Owns the cuBLASLt descriptors of one call (destroyed on every return path).
struct LtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtDescs() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// C[i, j] = beta * C[i, j] (beta == 0: C = 0, NaNs in C dropped): the k == 0 product.
template <typename T>
__global__ void ScaleMatrixKernel(T* c, int64_t m, int64_t n, int64_t ldc, float beta) {
  const int64_t total = m * n;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       idx < total; idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx / n, j = idx % n;
    T& x = c[i * ldc + j];
    x = beta == 0.0f ? T(0.0f) : T(static_cast<float>(x) * beta);
  }
}

__global__ void ConvertToBf16Kernel(const float* x, __nv_bfloat16* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = __float2bfloat16_rn(x[i]);
  }
}

// AlignmentOf: the largest power of two <= 256 dividing the address of every batch's
// operand (base + i * stride_bytes). cuBLASLt's heuristic assumes 256-byte alignment
// unless told otherwise, and an algorithm chosen for that fails on offset pointers.
uint32_t AlignmentOf(const void* p, int64_t stride_bytes, int64_t batch) {
  uintptr_t v = reinterpret_cast<uintptr_t>(p);
  if (batch > 1) v |= static_cast<uintptr_t>(stride_bytes);
  uint32_t a = 256;
  while (a > 1 && v % a != 0) a >>= 1;
  return a;
}

int ElementBytes(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

int GridFor(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<int>(blocks < 65535 * 8 ? (blocks > 0 ? blocks : 1) : 65535 * 8);
}

// One row-major product through cuBLASLt (see gemm.h for the column-major mapping).
CudaStatus LtMatmul(const ExecContext& ctx, GemmHandle& handle, bool trans_a, bool trans_b,
                    int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                    cudaDataType_t ab_type, int64_t lda, int64_t stride_a, const void* b,
                    int64_t ldb, int64_t stride_b, float beta, void* c,
                    cudaDataType_t c_type, int64_t ldc, int64_t stride_c, int64_t batch,
                    cublasComputeType_t compute) {
  MXMACA_CUDA_REQUIRE(m >= 0 && n >= 0 && k >= 0 && batch >= 0,
                      "Gemm: sizes must be >= 0, got m=" + std::to_string(m) +
                          " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                          " batch=" + std::to_string(batch));
  MXMACA_CUDA_REQUIRE(lda >= (trans_a ? (m > 1 ? m : 1) : (k > 1 ? k : 1)),
                      "Gemm: lda=" + std::to_string(lda) + " too small");
  MXMACA_CUDA_REQUIRE(ldb >= (trans_b ? (k > 1 ? k : 1) : (n > 1 ? n : 1)),
                      "Gemm: ldb=" + std::to_string(ldb) + " too small");
  MXMACA_CUDA_REQUIRE(ldc >= (n > 1 ? n : 1), "Gemm: ldc=" + std::to_string(ldc) +
                                                   " smaller than n=" + std::to_string(n));
  if (m == 0 || n == 0 || batch == 0) return CudaStatus();
  const cudaStream_t stream = StreamOf(ctx);
  if (k == 0) {
    for (int64_t i = 0; i < batch; ++i) {
      if (c_type == CUDA_R_32F) {
        ScaleMatrixKernel<float><<<GridFor(m * n, 256), 256, 0, stream>>>(
            static_cast<float*>(c) + i * stride_c, m, n, ldc, beta);
      } else {
        ScaleMatrixKernel<__nv_bfloat16><<<GridFor(m * n, 256), 256, 0, stream>>>(
            static_cast<__nv_bfloat16*>(c) + i * stride_c, m, n, ldc, beta);
      }
      MXMACA_CUDA_CHECK_LAUNCH();
    }
    return CudaStatus();
  }
  LtDescs d;
  MXMACA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d.op, compute, CUDA_R_32F));
  // Column-major view: D[n x m] = op(B_mem)[n x k] · op(A_mem)[k x m].
  const cublasOperation_t op_first = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  MXMACA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA,
                                                     &op_first, sizeof(op_first)));
  MXMACA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB,
                                                     &op_second, sizeof(op_second)));
  MXMACA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.a, ab_type, trans_b ? k : n,
                                                 trans_b ? n : k, ldb));
  MXMACA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.b, ab_type, trans_a ? m : k,
                                                 trans_a ? k : m, lda));
  MXMACA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.c, c_type, n, m, ldc));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    const int64_t strides[3] = {stride_b, stride_a, stride_c};
    cublasLtMatrixLayout_t layouts[3] = {d.a, d.b, d.c};
    for (int i = 0; i < 3; ++i) {
      MXMACA_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      MXMACA_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
          sizeof(strides[i])));
    }
  }
  MXMACA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&d.pref));
  const size_t ws = handle.workspace_bytes();
  MXMACA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  // In the column-major call, "A" is our b and "B" is our a.
  const uint32_t align[4] = {
      AlignmentOf(b, stride_b * ElementBytes(ab_type), batch),
      AlignmentOf(a, stride_a * ElementBytes(ab_type), batch),
      AlignmentOf(c, stride_c * ElementBytes(c_type), batch),
      AlignmentOf(c, stride_c * ElementBytes(c_type), batch)};
  const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i) {
    MXMACA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(d.pref, align_attr[i], &align[i],
                                                             sizeof(align[i])));
  }
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  MXMACA_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle.lt(), d.op, d.a, d.b, d.c, d.c,
                                                     d.pref, 1, &heuristic, &found));
  if (found == 0) {
    return CublasErrorAt(CUBLAS_STATUS_NOT_SUPPORTED,
                         ("cublasLtMatmulAlgoGetHeuristic (no algorithm for m=" +
                          std::to_string(m) + " n=" + std::to_string(n) +
                          " k=" + std::to_string(k) + ")")
                             .c_str(),
                         __FILE__, __LINE__);
  }
  MXMACA_CUBLAS_CHECK(cublasLtMatmul(handle.lt(), d.op, &alpha, b, d.a, a, d.b, &beta, c,
                                     d.c, c, d.c, &heuristic.algo, handle.workspace(), ws,
                                     stream));
  return CudaStatus();
}

cublasComputeType_t ComputeFor(const ExecContext& ctx) {
  return ctx.precision == Precision::kBf16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                           : CUBLAS_COMPUTE_32F;
}

}  // namespace

CudaStatus GemmHandle::Create(size_t workspace_bytes, std::unique_ptr<GemmHandle>* out) {
  std::unique_ptr<GemmHandle> h(new GemmHandle());
  MXMACA_CUBLAS_CHECK(cublasLtCreate(&h->lt_));
  if (workspace_bytes > 0) {
    MXMACA_CUDA_CHECK(cudaMalloc(&h->workspace_, workspace_bytes));
  }
  h->workspace_bytes_ = workspace_bytes;
  *out = std::move(h);
  return CudaStatus();
}

GemmHandle::~GemmHandle() {
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (lt_ != nullptr) cublasLtDestroy(lt_);
}

CudaStatus Gemm(const ExecContext& ctx, GemmHandle& handle, bool trans_a, bool trans_b,
                int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  return LtMatmul(ctx, handle, trans_a, trans_b, m, n, k, alpha, a, CUDA_R_32F, lda, 0, b,
                  ldb, 0, beta, c, CUDA_R_32F, ldc, 0, 1, ComputeFor(ctx));
}

CudaStatus GemmStridedBatched(const ExecContext& ctx, GemmHandle& handle, bool trans_a,
                              bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                              const float* a, int64_t lda, int64_t stride_a, const float* b,
                              int64_t ldb, int64_t stride_b, float beta, float* c,
                              int64_t ldc, int64_t stride_c, int64_t batch) {
  return LtMatmul(ctx, handle, trans_a, trans_b, m, n, k, alpha, a, CUDA_R_32F, lda,
                  stride_a, b, ldb, stride_b, beta, c, CUDA_R_32F, ldc, stride_c, batch,
                  ComputeFor(ctx));
}

CudaStatus GemmBf16(const ExecContext& ctx, GemmHandle& handle, bool trans_a, bool trans_b,
                    int64_t m, int64_t n, int64_t k, float alpha, const __nv_bfloat16* a,
                    int64_t lda, const __nv_bfloat16* b, int64_t ldb, float beta, float* c,
                    int64_t ldc) {
  return LtMatmul(ctx, handle, trans_a, trans_b, m, n, k, alpha, a, CUDA_R_16BF, lda, 0, b,
                  ldb, 0, beta, c, CUDA_R_32F, ldc, 0, 1, CUBLAS_COMPUTE_32F);
}

CudaStatus GemmBf16Out(const ExecContext& ctx, GemmHandle& handle, bool trans_a,
                       bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                       const __nv_bfloat16* a, int64_t lda, const __nv_bfloat16* b,
                       int64_t ldb, float beta, __nv_bfloat16* c, int64_t ldc) {
  return LtMatmul(ctx, handle, trans_a, trans_b, m, n, k, alpha, a, CUDA_R_16BF, lda, 0, b,
                  ldb, 0, beta, c, CUDA_R_16BF, ldc, 0, 1, CUBLAS_COMPUTE_32F);
}

CudaStatus ConvertToBf16(const ExecContext& ctx, const float* x, __nv_bfloat16* y,
                         int64_t n) {
  MXMACA_CUDA_REQUIRE(n >= 0, "ConvertToBf16: n must be >= 0");
  if (n == 0) return CudaStatus();
  ConvertToBf16Kernel<<<GridFor(n, 256), 256, 0, StreamOf(ctx)>>>(x, y, n);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

}  // namespace mxmaca::kernels::cuda
