// layers/device/cuda_device_kernels.cc: DeviceKernels over kernels/cuda (host C++; built
// only when the CUDA toolkit is present — cuda_device_kernels_stub.cc otherwise).
#include "layers/device/cuda_device_kernels.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/fused_attention.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/status_adapter.h"
#include "layers/device/kernel_args.h"

// MXMACA_DK_CUDA: a CUDA runtime call inside a function returning absl::Status (or
// StatusOr); a failure returns kInternal naming the call, file and line.
#define MXMACA_DK_CUDA(call)                                                                \
  do {                                                                                      \
    const cudaError_t mxmaca_dk_err_ = (call);                                              \
    if (mxmaca_dk_err_ != cudaSuccess) {                                                    \
      return ::mxmaca::kernels::cuda::ToAbslStatus(                                         \
          ::mxmaca::kernels::cuda::CudaErrorAt(mxmaca_dk_err_, #call, __FILE__, __LINE__)); \
    }                                                                                       \
  } while (0)

namespace mxmaca::layers::device {
namespace {

namespace cuda = ::mxmaca::kernels::cuda;
using kernels::Precision;
using kernels::RngKey;

static_assert(std::is_same<CudaStream, cudaStream_t>::value,
              "CudaStream must be the CUDA runtime's cudaStream_t");

cuda::AttentionShape ShapeOf(const AttentionDims& d) {
  return cuda::AttentionShape{d.b,       d.s, d.heads, d.groups, d.head_dim, d.dropout_head_offset,
                              d.dropout_heads};
}

absl::Status Done(const cuda::CudaStatus& s) { return cuda::ToAbslStatus(s); }

// The head dims kernels/cuda/fused_attention.h supports.
absl::Status CheckFusedHeadDim(const char* call, int64_t head_dim) {
  if (head_dim != 32 && head_dim != 64 && head_dim != 128) {
    return absl::InvalidArgumentError(absl::StrCat(
        call, ": the fused attention kernel supports head_dim 32, 64 or 128, got ", head_dim));
  }
  return absl::OkStatus();
}

class CudaDeviceKernelsImpl final : public CudaDeviceKernels {
 public:
  CudaDeviceKernelsImpl(int device, cudaStream_t stream, bool owns_stream, Precision precision)
      : CudaDeviceKernels(device, stream), owns_stream_(owns_stream) {
    ctx_.stream = stream;
    ctx_.precision = precision;
  }

  ~CudaDeviceKernelsImpl() override {
    // Errors here cannot be returned; the work using these buffers is waited for first.
    cudaSetDevice(device());
    cudaStreamSynchronize(stream());
    if (scratch_ != nullptr) cudaFree(scratch_);
    if (partials_ != nullptr) cudaFree(partials_);
    gemm_.reset();
    if (owns_stream_) cudaStreamDestroy(stream());
  }

  // Init: the GemmHandle and the SumSquares partials (the device is current).
  absl::Status Init() {
    MXMACA_RETURN_IF_ERROR(
        Done(cuda::GemmHandle::Create(static_cast<size_t>(kGemmWorkspaceBytes), &gemm_)));
    MXMACA_ASSIGN_OR_RETURN(void* p,
                            DeviceMalloc(cuda::kSumSquaresPartials * int64_t{sizeof(double)},
                                         "the SumSquares partials"));
    partials_ = static_cast<double*>(p);
    return absl::OkStatus();
  }

  kernels::Precision precision() const override { return ctx_.precision; }
  absl::Status MakeCurrent() override { return Enter(); }
  absl::Status ReserveAttentionScratch(const AttentionDims& d) override {
    MXMACA_RETURN_IF_ERROR(Enter());
    absl::StatusOr<float*> scratch = AttentionScratch(d);
    return scratch.status();
  }

  // ---- memory ----

  absl::StatusOr<void*> Allocate(int64_t bytes) override {
    if (bytes <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cuda Allocate: bytes = ", bytes, " (expected > 0)"));
    }
    MXMACA_RETURN_IF_ERROR(Enter());
    return DeviceMalloc(bytes, "Allocate");
  }

  void Free(void* ptr) override {
    if (ptr == nullptr) return;
    if (Enter().ok()) cudaFree(ptr);
  }

  absl::Status CopyToDevice(void* dst, const void* host_src, int64_t bytes) override {
    return Copy("CopyToDevice", dst, host_src, bytes, cudaMemcpyHostToDevice);
  }
  absl::Status CopyToHost(void* host_dst, const void* src, int64_t bytes) override {
    return Copy("CopyToHost", host_dst, src, bytes, cudaMemcpyDeviceToHost);
  }
  absl::Status CopyDeviceToDevice(void* dst, const void* src, int64_t bytes) override {
    return Copy("CopyDeviceToDevice", dst, src, bytes, cudaMemcpyDeviceToDevice);
  }

  absl::Status Zero(void* ptr, int64_t bytes) override {
    MXMACA_RETURN_IF_ERROR(CheckSizes("Zero", {{"bytes", bytes}}));
    if (bytes == 0) return absl::OkStatus();
    MXMACA_RETURN_IF_ERROR(Enter());
    MXMACA_DK_CUDA(cudaMemsetAsync(ptr, 0, static_cast<size_t>(bytes), stream()));
    return absl::OkStatus();
  }

  absl::Status Synchronize() override {
    MXMACA_RETURN_IF_ERROR(Enter());
    MXMACA_DK_CUDA(cudaStreamSynchronize(stream()));
    // A launch error not yet returned by a kernel call (cudaGetLastError also clears a
    // non-sticky one so it is reported once).
    MXMACA_DK_CUDA(cudaGetLastError());
    return absl::OkStatus();
  }

  // ---- matrix products ----

  absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc) override {
    MXMACA_RETURN_IF_ERROR(CheckGemmArgs(trans_a, trans_b, m, n, k, lda, ldb, ldc));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(
        cuda::Gemm(ctx_, *gemm_, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
  }

  // ---- elementwise ----

  absl::Status AddBias(float* y, const float* bias, int64_t rows, int64_t cols) override {
    MXMACA_RETURN_IF_ERROR(CheckSizes("AddBias", {{"rows", rows}, {"cols", cols}}));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::AddBias(ctx_, y, bias, rows, cols));
  }

  // BiasGrad: kernels/cuda BiasGrad accumulates; device_kernels.h's overwrites, so dbias
  // is zeroed first (on the stream, capturable).
  absl::Status BiasGrad(const float* dy, int64_t rows, int64_t cols, float* dbias) override {
    MXMACA_RETURN_IF_ERROR(CheckSizes("BiasGrad", {{"rows", rows}, {"cols", cols}}));
    MXMACA_RETURN_IF_ERROR(Enter());
    if (cols > 0) {
      MXMACA_DK_CUDA(
          cudaMemsetAsync(dbias, 0, static_cast<size_t>(cols) * sizeof(float), stream()));
    }
    return Done(cuda::BiasGrad(ctx_, dy, rows, cols, dbias));
  }

  absl::Status Add(const float* a, const float* b, float* out, int64_t n) override {
    MXMACA_RETURN_IF_ERROR(CheckSizes("Add", {{"n", n}}));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::Add(ctx_, a, b, out, n));
  }

  absl::Status AddScalar(const float* x, float c, float* y, int64_t n) override {
    MXMACA_RETURN_IF_ERROR(CheckSizes("AddScalar", {{"n", n}}));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::AddScalar(ctx_, x, c, y, n));
  }

  absl::Status Scale(float* x, int64_t n, float s) override {
    MXMACA_RETURN_IF_ERROR(CheckSizes("Scale", {{"n", n}}));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::Scale(ctx_, x, n, s));
  }

  absl::Status SumSquares(const float* x, int64_t n, double* out) override {
    MXMACA_RETURN_IF_ERROR(CheckSizes("SumSquares", {{"n", n}}));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::SumSquares(ctx_, x, n, partials_, out));
  }

  absl::Status GeluForward(const float* x, float* y, int64_t n) override {
    MXMACA_RETURN_IF_ERROR(CheckSizes("GeluForward", {{"n", n}}));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::GeluForward(ctx_, x, y, n));
  }

  absl::Status GeluBackward(const float* x, const float* dy, float* dx, int64_t n) override {
    MXMACA_RETURN_IF_ERROR(CheckSizes("GeluBackward", {{"n", n}}));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::GeluBackward(ctx_, x, dy, dx, n));
  }

  absl::Status GeluTanhForward(const float* x, float* y, int64_t n) override {
    MXMACA_RETURN_IF_ERROR(CheckSizes("GeluTanhForward", {{"n", n}}));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::GeluTanhForward(ctx_, x, y, n));
  }

  absl::Status GeluTanhBackward(const float* x, const float* dy, float* dx, int64_t n) override {
    MXMACA_RETURN_IF_ERROR(CheckSizes("GeluTanhBackward", {{"n", n}}));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::GeluTanhBackward(ctx_, x, dy, dx, n));
  }

  absl::Status SwigluForward(const float* x, float* y, int64_t rows, int64_t f) override {
    MXMACA_RETURN_IF_ERROR(CheckSizes("SwigluForward", {{"rows", rows}, {"f", f}}));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::SwigluForward(ctx_, x, y, rows, f));
  }

  absl::Status SwigluBackward(const float* x, const float* dy, float* dx, int64_t rows,
                              int64_t f) override {
    MXMACA_RETURN_IF_ERROR(CheckSizes("SwigluBackward", {{"rows", rows}, {"f", f}}));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::SwigluBackward(ctx_, x, dy, dx, rows, f));
  }

  absl::Status DropoutForward(const float* x, float* y, int64_t n, float p, const RngKey* key,
                              int64_t index_offset) override {
    MXMACA_RETURN_IF_ERROR(
        CheckSizes("DropoutForward", {{"n", n}, {"index_offset", index_offset}}));
    MXMACA_RETURN_IF_ERROR(CheckDropoutP("DropoutForward", p));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::DropoutForward(ctx_, x, y, n, p, key, index_offset));
  }

  absl::Status DropoutBackward(const float* dy, float* dx, int64_t n, float p, const RngKey* key,
                               int64_t index_offset) override {
    MXMACA_RETURN_IF_ERROR(
        CheckSizes("DropoutBackward", {{"n", n}, {"index_offset", index_offset}}));
    MXMACA_RETURN_IF_ERROR(CheckDropoutP("DropoutBackward", p));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::DropoutBackward(ctx_, dy, dx, n, p, key, index_offset));
  }

  // ---- norms ----

  absl::Status LayerNormForward(const float* x, const float* gamma, const float* beta, float eps,
                                int64_t n, int64_t h, float* y, float* mean, float* rstd) override {
    MXMACA_RETURN_IF_ERROR(CheckRows("LayerNormForward", n, h));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::LayerNormForward(ctx_, x, gamma, beta, eps, n, h, y, mean, rstd));
  }

  absl::Status LayerNormBackwardInput(const float* dy, const float* x, const float* gamma,
                                      const float* mean, const float* rstd, int64_t n, int64_t h,
                                      float* dx) override {
    MXMACA_RETURN_IF_ERROR(CheckRows("LayerNormBackwardInput", n, h));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::LayerNormBackwardInput(ctx_, dy, x, gamma, mean, rstd, n, h, dx));
  }

  absl::Status LayerNormBackwardWeight(const float* dy, const float* x, const float* mean,
                                       const float* rstd, int64_t n, int64_t h, float* dgamma,
                                       float* dbeta) override {
    MXMACA_RETURN_IF_ERROR(CheckRows("LayerNormBackwardWeight", n, h));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::LayerNormBackwardWeight(ctx_, dy, x, mean, rstd, n, h, dgamma, dbeta));
  }

  absl::Status RmsNormForward(const float* x, const float* gamma, float eps, int64_t n, int64_t h,
                              float* y, float* rstd) override {
    MXMACA_RETURN_IF_ERROR(CheckRows("RmsNormForward", n, h));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::RmsNormForward(ctx_, x, gamma, eps, n, h, y, rstd));
  }

  absl::Status RmsNormBackwardInput(const float* dy, const float* x, const float* gamma,
                                    const float* rstd, int64_t n, int64_t h, float* dx) override {
    MXMACA_RETURN_IF_ERROR(CheckRows("RmsNormBackwardInput", n, h));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::RmsNormBackwardInput(ctx_, dy, x, gamma, rstd, n, h, dx));
  }

  absl::Status RmsNormBackwardWeight(const float* dy, const float* x, const float* rstd, int64_t n,
                                     int64_t h, float* dgamma) override {
    MXMACA_RETURN_IF_ERROR(CheckRows("RmsNormBackwardWeight", n, h));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::RmsNormBackwardWeight(ctx_, dy, x, rstd, n, h, dgamma));
  }

  // ---- embedding ----

  absl::Status EmbeddingForward(const int32_t* ids, int64_t n, const float* table, int64_t h,
                                float* out, bool accumulate) override {
    MXMACA_RETURN_IF_ERROR(CheckSizes("EmbeddingForward", {{"n", n}, {"h", h}}));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::EmbeddingForward(ctx_, ids, n, table, h, out, accumulate));
  }

  absl::Status VocabShardEmbeddingForward(const int32_t* ids, int64_t n, const float* table,
                                          int64_t vocab_start, int64_t vocab_rows, int64_t h,
                                          float* out, bool accumulate) override {
    MXMACA_RETURN_IF_ERROR(CheckSizes("VocabShardEmbeddingForward",
                                      {{"n", n}, {"h", h}, {"vocab_rows", vocab_rows}}));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::VocabShardEmbeddingForward(ctx_, ids, n, table, vocab_start, vocab_rows, h,
                                                 out, accumulate));
  }

  absl::Status VocabShardEmbeddingBackward(const int32_t* ids, int64_t n, const float* dout,
                                           int64_t vocab_start, int64_t vocab_rows, int64_t h,
                                           float* dtable) override {
    MXMACA_RETURN_IF_ERROR(CheckSizes("VocabShardEmbeddingBackward",
                                      {{"n", n}, {"h", h}, {"vocab_rows", vocab_rows}}));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::VocabShardEmbeddingBackward(ctx_, ids, n, dout, vocab_start, vocab_rows, h,
                                                  dtable));
  }

  absl::Status EmbeddingBackward(const int32_t* ids, int64_t n, const float* dout, int64_t h,
                                 float* dtable) override {
    MXMACA_RETURN_IF_ERROR(CheckSizes("EmbeddingBackward", {{"n", n}, {"h", h}}));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::EmbeddingBackward(ctx_, ids, n, dout, h, dtable));
  }

  // ---- cross-entropy ----

  absl::Status CrossEntropyForward(const float* logits, const int32_t* targets, int64_t n,
                                   int64_t vp, int64_t v, float* loss, float* lse) override {
    MXMACA_RETURN_IF_ERROR(CheckCrossEntropyArgs("CrossEntropyForward", n, vp, v));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::CrossEntropyForward(ctx_, logits, targets, n, vp, v, loss, lse));
  }

  absl::Status CrossEntropyBackward(const float* logits, const int32_t* targets, const float* lse,
                                    const float* dloss, int64_t n, int64_t vp, int64_t v,
                                    float* dlogits) override {
    MXMACA_RETURN_IF_ERROR(CheckCrossEntropyArgs("CrossEntropyBackward", n, vp, v));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::CrossEntropyBackward(ctx_, logits, targets, lse, dloss, n, vp, v, dlogits));
  }

  // ---- attention ----

  absl::Status SplitQkv(const AttentionDims& d, const float* qkv, float* q, float* k,
                        float* v) override {
    MXMACA_RETURN_IF_ERROR(CheckAttentionDims("SplitQkv", d));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::SplitQkv(ctx_, ShapeOf(d), qkv, q, k, v));
  }

  absl::Status MergeQkvGrad(const AttentionDims& d, const float* dq, const float* dk,
                            const float* dv, float* dqkv) override {
    MXMACA_RETURN_IF_ERROR(CheckAttentionDims("MergeQkvGrad", d));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::MergeQkvGrad(ctx_, ShapeOf(d), dq, dk, dv, dqkv));
  }

  absl::Status HeadsToTokens(const AttentionDims& d, const float* o, float* out) override {
    MXMACA_RETURN_IF_ERROR(CheckAttentionDims("HeadsToTokens", d));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::HeadsToTokens(ctx_, ShapeOf(d), o, out));
  }

  absl::Status TokensToHeads(const AttentionDims& d, const float* in, float* o) override {
    MXMACA_RETURN_IF_ERROR(CheckAttentionDims("TokensToHeads", d));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::TokensToHeads(ctx_, ShapeOf(d), in, o));
  }

  absl::Status AttentionForward(const AttentionDims& d, const float* q, const float* k,
                                const float* v, const int32_t* doc_start, float softmax_scale,
                                float dropout_p, const RngKey* key, float* probs,
                                float* o) override {
    MXMACA_RETURN_IF_ERROR(CheckAttentionDims("AttentionForward", d));
    MXMACA_RETURN_IF_ERROR(CheckDropoutP("AttentionForward", dropout_p));
    MXMACA_RETURN_IF_ERROR(Enter());
    float* scratch = nullptr;  // kernels/cuda needs it only for dropout
    if (dropout_p > 0.0f) {
      MXMACA_ASSIGN_OR_RETURN(scratch, AttentionScratch(d));
    }
    return Done(cuda::AttentionForward(ctx_, *gemm_, ShapeOf(d), q, k, v, doc_start, softmax_scale,
                                       dropout_p, key, probs, o, scratch));
  }

  absl::Status AttentionBackward(const AttentionDims& d, const float* q, const float* k,
                                 const float* v, const float* probs, const int32_t* doc_start,
                                 float softmax_scale, float dropout_p, const RngKey* key,
                                 const float* dout, float* dq, float* dk, float* dv) override {
    MXMACA_RETURN_IF_ERROR(CheckAttentionDims("AttentionBackward", d));
    MXMACA_RETURN_IF_ERROR(CheckDropoutP("AttentionBackward", dropout_p));
    MXMACA_RETURN_IF_ERROR(Enter());
    MXMACA_ASSIGN_OR_RETURN(float* scratch, AttentionScratch(d));
    return Done(cuda::AttentionBackward(ctx_, *gemm_, ShapeOf(d), q, k, v, probs, doc_start,
                                        softmax_scale, dropout_p, key, dout, dq, dk, dv, scratch));
  }

  absl::Status FusedAttentionForward(const AttentionDims& d, const float* q, const float* k,
                                     const float* v, const int32_t* doc_start, float softmax_scale,
                                     float dropout_p, const RngKey* key, float* o,
                                     float* lse) override {
    MXMACA_RETURN_IF_ERROR(CheckAttentionDims("FusedAttentionForward", d));
    MXMACA_RETURN_IF_ERROR(CheckFusedHeadDim("FusedAttentionForward", d.head_dim));
    MXMACA_RETURN_IF_ERROR(CheckDropoutP("FusedAttentionForward", dropout_p));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::FusedAttentionForward(ctx_, ShapeOf(d), q, k, v, doc_start, softmax_scale,
                                            dropout_p, key, o, lse));
  }

  absl::Status FusedAttentionBackward(const AttentionDims& d, const float* q, const float* k,
                                      const float* v, const float* o, const float* lse,
                                      const int32_t* doc_start, float softmax_scale,
                                      float dropout_p, const RngKey* key, const float* dout,
                                      float* dq, float* dk, float* dv, float* delta) override {
    MXMACA_RETURN_IF_ERROR(CheckAttentionDims("FusedAttentionBackward", d));
    MXMACA_RETURN_IF_ERROR(CheckFusedHeadDim("FusedAttentionBackward", d.head_dim));
    MXMACA_RETURN_IF_ERROR(CheckDropoutP("FusedAttentionBackward", dropout_p));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::FusedAttentionBackward(ctx_, ShapeOf(d), q, k, v, o, lse, doc_start,
                                             softmax_scale, dropout_p, key, dout, dq, dk, dv,
                                             delta));
  }

  // ---- rotary position embedding ----

  absl::Status RopeForward(float* x, const int32_t* positions, int64_t b, int64_t s, int64_t heads,
                           int64_t d, int64_t rotary_dim,
                           const kernels::RopeFrequencies& f) override {
    MXMACA_RETURN_IF_ERROR(CheckRopeArgs("RopeForward", b, s, heads, d, rotary_dim, f));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::RopeForward(ctx_, x, positions, b, s, heads, d, rotary_dim, f));
  }

  absl::Status RopeBackward(float* dx, const int32_t* positions, int64_t b, int64_t s,
                            int64_t heads, int64_t d, int64_t rotary_dim,
                            const kernels::RopeFrequencies& f) override {
    MXMACA_RETURN_IF_ERROR(CheckRopeArgs("RopeBackward", b, s, heads, d, rotary_dim, f));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::RopeBackward(ctx_, dx, positions, b, s, heads, d, rotary_dim, f));
  }

  // ---- optimizer ----

  absl::Status AdamWStep(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                         int64_t n, float lr, float beta1, float beta2, float eps,
                         float weight_decay, int64_t step) override {
    MXMACA_RETURN_IF_ERROR(CheckAdamWArgs(n, step));
    MXMACA_RETURN_IF_ERROR(Enter());
    return Done(cuda::AdamWStep(ctx_, param, grad, exp_avg, exp_avg_sq, n, lr, beta1, beta2, eps,
                                weight_decay, step));
  }

 private:
  // Enter: makes device() current on the calling thread (the CUDA runtime's current
  // device is per thread, and an actor may run on any worker thread). Capturable.
  absl::Status Enter() {
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current == device()) {
      return absl::OkStatus();
    }
    MXMACA_DK_CUDA(cudaSetDevice(device()));
    return absl::OkStatus();
  }

  // DeviceMalloc: cudaMalloc with an out-of-memory error that names the size, `what`
  // and the device's free memory.
  absl::StatusOr<void*> DeviceMalloc(int64_t bytes, const char* what) {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, static_cast<size_t>(bytes));
    if (err == cudaSuccess) return p;
    // Clear the (non-sticky) error so the next kernel's launch check does not see it.
    cudaGetLastError();
    if (err == cudaErrorMemoryAllocation) {
      size_t free_bytes = 0, total_bytes = 0;
      const cudaError_t info = cudaMemGetInfo(&free_bytes, &total_bytes);
      cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat(
          "cuda device ", device(), ": out of memory allocating ", bytes, " bytes for ", what,
          " (cudaMalloc returned cudaErrorMemoryAllocation; cudaMemGetInfo: ",
          info == cudaSuccess ? absl::StrCat(free_bytes, " bytes free of ", total_bytes)
                              : std::string("unavailable"),
          ")"));
    }
    return cuda::ToAbslStatus(cuda::CudaErrorAt(err, "cudaMalloc(&p, bytes)", __FILE__, __LINE__));
  }

  absl::Status Copy(const char* call, void* dst, const void* src, int64_t bytes,
                    cudaMemcpyKind kind) {
    MXMACA_RETURN_IF_ERROR(CheckSizes(call, {{"bytes", bytes}}));
    if (bytes == 0) return absl::OkStatus();
    MXMACA_RETURN_IF_ERROR(Enter());
    MXMACA_DK_CUDA(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), kind, stream()));
    return absl::OkStatus();
  }

  // AttentionScratch: at least [b, heads, s, s] fp32 of scratch, grown (reallocated) when
  // smaller; refuses to grow while stream() is capturing a graph (see the header).
  absl::StatusOr<float*> AttentionScratch(const AttentionDims& d) {
    MXMACA_ASSIGN_OR_RETURN(const int64_t elements, AttentionElements(d));
    if (elements <= scratch_elements_) return scratch_;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    MXMACA_DK_CUDA(cudaStreamIsCapturing(stream(), &capture));
    if (capture != cudaStreamCaptureStatusNone) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cuda attention: the scratch must grow from ", scratch_elements_, " to ", elements,
          " floats ([b, heads, s, s] = [", d.b, ", ", d.heads, ", ", d.s, ", ", d.s,
          "]) while the stream is capturing a CUDA graph; run the largest attention shape "
          "eagerly before capturing"));
    }
    if (scratch_ != nullptr) {
      MXMACA_DK_CUDA(cudaStreamSynchronize(stream()));  // queued work may still read it
      MXMACA_DK_CUDA(cudaFree(scratch_));
      scratch_ = nullptr;
      scratch_elements_ = 0;
    }
    MXMACA_ASSIGN_OR_RETURN(void* p, DeviceMalloc(elements * int64_t{sizeof(float)},
                                                  "the attention scratch [b, heads, s, s] fp32"));
    scratch_ = static_cast<float*>(p);
    scratch_elements_ = elements;
    return scratch_;
  }

  const bool owns_stream_;
  kernels::ExecContext ctx_;
  std::unique_ptr<cuda::GemmHandle> gemm_;
  double* partials_ = nullptr;
  float* scratch_ = nullptr;
  int64_t scratch_elements_ = 0;
};

}  // namespace

absl::StatusOr<int64_t> CudaDeviceKernels::FreeMemoryBytes(int device, int64_t* total_bytes) {
  const cuda::CudaStatus probe = cuda::ProbeDevice();
  if (!probe.ok()) return absl::FailedPreconditionError(probe.message());
  int count = 0;
  MXMACA_DK_CUDA(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaDeviceKernels: device ", device, " is outside [0, ", count, ")"));
  }
  MXMACA_DK_CUDA(cudaSetDevice(device));
  size_t free_bytes = 0, total = 0;
  MXMACA_DK_CUDA(cudaMemGetInfo(&free_bytes, &total));
  if (total_bytes != nullptr) *total_bytes = static_cast<int64_t>(total);
  return static_cast<int64_t>(free_bytes);
}

absl::StatusOr<std::unique_ptr<CudaDeviceKernels>> CudaDeviceKernels::Create(
    int device, CudaStream stream, kernels::Precision precision) {
  const cuda::CudaStatus probe = cuda::ProbeDevice();
  if (!probe.ok()) return absl::FailedPreconditionError(probe.message());
  int count = 0;
  MXMACA_DK_CUDA(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaDeviceKernels: device ", device, " is outside [0, ", count, ")"));
  }
  MXMACA_DK_CUDA(cudaSetDevice(device));
  bool owns_stream = false;
  if (stream == nullptr) {
    MXMACA_DK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    owns_stream = true;
  }
  auto impl = std::make_unique<CudaDeviceKernelsImpl>(device, stream, owns_stream, precision);
  MXMACA_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<CudaDeviceKernels>(std::move(impl));
}

}  // namespace mxmaca::layers::device
