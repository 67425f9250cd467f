// layers/device/cpu_device_kernels.cc: DeviceKernels over kernels/cpu.
#include "layers/device/cpu_device_kernels.h"

#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "layers/device/kernel_args.h"

namespace mxmaca::layers::device {
namespace {

// KeyOf: the key the "device" (host) pointer holds; a zero key when null (p == 0: unused).
kernels::RngKey KeyOf(const kernels::RngKey* key) {
  return key != nullptr ? *key : kernels::RngKey{};
}

namespace cpu = ::mxmaca::kernels::cpu;

constexpr int64_t kAlignment = 256;

cpu::AttentionShape ShapeOf(const AttentionDims& d) {
  cpu::AttentionShape shape{d.b, d.s, d.heads, d.groups, d.head_dim};
  shape.dropout_head_offset = d.dropout_head_offset;
  shape.dropout_heads = d.dropout_heads;
  return shape;
}

}  // namespace

CpuDeviceKernels::CpuDeviceKernels(const kernels::ExecContext& ctx) : ctx_(ctx) {
  ctx_.stream = nullptr;
  if (ctx_.num_threads < 1) ctx_.num_threads = 1;
}

// ---- memory ----

absl::StatusOr<void*> CpuDeviceKernels::Allocate(int64_t bytes) {
  if (bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu Allocate: bytes = ", bytes, " (expected > 0)"));
  }
  if (bytes > std::numeric_limits<int64_t>::max() - kAlignment) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cpu Allocate: cannot allocate ", bytes, " bytes"));
  }
  // std::aligned_alloc needs a size that is a multiple of the alignment.
  const int64_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, static_cast<size_t>(rounded));
  if (p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cpu Allocate: out of host memory allocating ",
                                                     bytes, " bytes (aligned_alloc failed)"));
  }
  return p;
}

void CpuDeviceKernels::Free(void* ptr) { std::free(ptr); }

absl::Status CpuDeviceKernels::CopyToDevice(void* dst, const void* host_src, int64_t bytes) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("CopyToDevice", {{"bytes", bytes}}));
  if (bytes > 0) std::memcpy(dst, host_src, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::CopyToHost(void* host_dst, const void* src, int64_t bytes) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("CopyToHost", {{"bytes", bytes}}));
  if (bytes > 0) std::memcpy(host_dst, src, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::CopyDeviceToDevice(void* dst, const void* src, int64_t bytes) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("CopyDeviceToDevice", {{"bytes", bytes}}));
  if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::Zero(void* ptr, int64_t bytes) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("Zero", {{"bytes", bytes}}));
  if (bytes > 0) std::memset(ptr, 0, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

// ---- matrix products ----

absl::Status CpuDeviceKernels::Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                    float alpha, const float* a, int64_t lda, const float* b,
                                    int64_t ldb, float beta, float* c, int64_t ldc) {
  MXMACA_RETURN_IF_ERROR(CheckGemmArgs(trans_a, trans_b, m, n, k, lda, ldb, ldc));
  cpu::Gemm(ctx_, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  return absl::OkStatus();
}

// ---- elementwise ----

absl::Status CpuDeviceKernels::AddBias(float* y, const float* bias, int64_t rows, int64_t cols) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("AddBias", {{"rows", rows}, {"cols", cols}}));
  cpu::AddBias(ctx_, y, bias, rows, cols);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::BiasGrad(const float* dy, int64_t rows, int64_t cols, float* dbias) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("BiasGrad", {{"rows", rows}, {"cols", cols}}));
  if (cols > 0) std::memset(dbias, 0, static_cast<size_t>(cols) * sizeof(float));
  cpu::BiasGrad(ctx_, dy, rows, cols, dbias);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::Add(const float* a, const float* b, float* out, int64_t n) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("Add", {{"n", n}}));
  cpu::Add(ctx_, a, b, out, n);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::AddScalar(const float* x, float c, float* y, int64_t n) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("AddScalar", {{"n", n}}));
  cpu::AddScalar(ctx_, x, c, y, n);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::Scale(float* x, int64_t n, float s) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("Scale", {{"n", n}}));
  cpu::Scale(ctx_, x, n, s);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::SumSquares(const float* x, int64_t n, double* out) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("SumSquares", {{"n", n}}));
  *out = cpu::SumSquares(ctx_, x, n);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::GeluForward(const float* x, float* y, int64_t n) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("GeluForward", {{"n", n}}));
  cpu::GeluForward(ctx_, x, y, n);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::GeluBackward(const float* x, const float* dy, float* dx, int64_t n) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("GeluBackward", {{"n", n}}));
  cpu::GeluBackward(ctx_, x, dy, dx, n);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::GeluTanhForward(const float* x, float* y, int64_t n) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("GeluTanhForward", {{"n", n}}));
  cpu::GeluTanhForward(ctx_, x, y, n);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::GeluTanhBackward(const float* x, const float* dy, float* dx,
                                                int64_t n) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("GeluTanhBackward", {{"n", n}}));
  cpu::GeluTanhBackward(ctx_, x, dy, dx, n);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::SwigluForward(const float* x, float* y, int64_t rows, int64_t f) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("SwigluForward", {{"rows", rows}, {"f", f}}));
  cpu::SwigluForward(ctx_, x, y, rows, f);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::SwigluBackward(const float* x, const float* dy, float* dx,
                                              int64_t rows, int64_t f) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("SwigluBackward", {{"rows", rows}, {"f", f}}));
  cpu::SwigluBackward(ctx_, x, dy, dx, rows, f);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::DropoutForward(const float* x, float* y, int64_t n, float p,
                                              const kernels::RngKey* key, int64_t index_offset) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("DropoutForward", {{"n", n}, {"index_offset", index_offset}}));
  MXMACA_RETURN_IF_ERROR(CheckDropoutP("DropoutForward", p));
  cpu::DropoutForward(ctx_, x, y, n, p, KeyOf(key), index_offset);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::DropoutBackward(const float* dy, float* dx, int64_t n, float p,
                                               const kernels::RngKey* key, int64_t index_offset) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("DropoutBackward", {{"n", n}, {"index_offset", index_offset}}));
  MXMACA_RETURN_IF_ERROR(CheckDropoutP("DropoutBackward", p));
  cpu::DropoutBackward(ctx_, dy, dx, n, p, KeyOf(key), index_offset);
  return absl::OkStatus();
}

// ---- norms ----

absl::Status CpuDeviceKernels::LayerNormForward(const float* x, const float* gamma,
                                                const float* beta, float eps, int64_t n, int64_t h,
                                                float* y, float* mean, float* rstd) {
  MXMACA_RETURN_IF_ERROR(CheckRows("LayerNormForward", n, h));
  cpu::LayerNormForward(ctx_, x, gamma, beta, eps, n, h, y, mean, rstd);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::LayerNormBackwardInput(const float* dy, const float* x,
                                                      const float* gamma, const float* mean,
                                                      const float* rstd, int64_t n, int64_t h,
                                                      float* dx) {
  MXMACA_RETURN_IF_ERROR(CheckRows("LayerNormBackwardInput", n, h));
  cpu::LayerNormBackwardInput(ctx_, dy, x, gamma, mean, rstd, n, h, dx);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::LayerNormBackwardWeight(const float* dy, const float* x,
                                                       const float* mean, const float* rstd,
                                                       int64_t n, int64_t h, float* dgamma,
                                                       float* dbeta) {
  MXMACA_RETURN_IF_ERROR(CheckRows("LayerNormBackwardWeight", n, h));
  cpu::LayerNormBackwardWeight(ctx_, dy, x, mean, rstd, n, h, dgamma, dbeta);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::RmsNormForward(const float* x, const float* gamma, float eps,
                                              int64_t n, int64_t h, float* y, float* rstd) {
  MXMACA_RETURN_IF_ERROR(CheckRows("RmsNormForward", n, h));
  cpu::RmsNormForward(ctx_, x, gamma, eps, n, h, y, rstd);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::RmsNormBackwardInput(const float* dy, const float* x,
                                                    const float* gamma, const float* rstd,
                                                    int64_t n, int64_t h, float* dx) {
  MXMACA_RETURN_IF_ERROR(CheckRows("RmsNormBackwardInput", n, h));
  cpu::RmsNormBackwardInput(ctx_, dy, x, gamma, rstd, n, h, dx);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::RmsNormBackwardWeight(const float* dy, const float* x,
                                                     const float* rstd, int64_t n, int64_t h,
                                                     float* dgamma) {
  MXMACA_RETURN_IF_ERROR(CheckRows("RmsNormBackwardWeight", n, h));
  cpu::RmsNormBackwardWeight(ctx_, dy, x, rstd, n, h, dgamma);
  return absl::OkStatus();
}

// ---- embedding ----

absl::Status CpuDeviceKernels::EmbeddingForward(const int32_t* ids, int64_t n, const float* table,
                                                int64_t h, float* out, bool accumulate) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("EmbeddingForward", {{"n", n}, {"h", h}}));
  cpu::EmbeddingForward(ctx_, ids, n, table, h, out, accumulate);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::EmbeddingBackward(const int32_t* ids, int64_t n, const float* dout,
                                                 int64_t h, float* dtable) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("EmbeddingBackward", {{"n", n}, {"h", h}}));
  cpu::EmbeddingBackward(ctx_, ids, n, dout, h, dtable);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::VocabShardEmbeddingForward(const int32_t* ids, int64_t n,
                                                          const float* table, int64_t vocab_start,
                                                          int64_t vocab_rows, int64_t h, float* out,
                                                          bool accumulate) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("VocabShardEmbeddingForward",
                                    {{"n", n}, {"h", h}, {"vocab_rows", vocab_rows}}));
  cpu::VocabShardEmbeddingForward(ctx_, ids, n, table, vocab_start, vocab_rows, h, out,
                                  accumulate);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::VocabShardEmbeddingBackward(const int32_t* ids, int64_t n,
                                                           const float* dout, int64_t vocab_start,
                                                           int64_t vocab_rows, int64_t h,
                                                           float* dtable) {
  MXMACA_RETURN_IF_ERROR(CheckSizes("VocabShardEmbeddingBackward",
                                    {{"n", n}, {"h", h}, {"vocab_rows", vocab_rows}}));
  cpu::VocabShardEmbeddingBackward(ctx_, ids, n, dout, vocab_start, vocab_rows, h, dtable);
  return absl::OkStatus();
}

// ---- cross-entropy ----

absl::Status CpuDeviceKernels::CrossEntropyForward(const float* logits, const int32_t* targets,
                                                   int64_t n, int64_t vp, int64_t v, float* loss,
                                                   float* lse) {
  MXMACA_RETURN_IF_ERROR(CheckCrossEntropyArgs("CrossEntropyForward", n, vp, v));
  cpu::CrossEntropyForward(ctx_, logits, targets, n, vp, v, loss, lse);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::CrossEntropyBackward(const float* logits, const int32_t* targets,
                                                    const float* lse, const float* dloss, int64_t n,
                                                    int64_t vp, int64_t v, float* dlogits) {
  MXMACA_RETURN_IF_ERROR(CheckCrossEntropyArgs("CrossEntropyBackward", n, vp, v));
  cpu::CrossEntropyBackward(ctx_, logits, targets, lse, dloss, n, vp, v, dlogits);
  return absl::OkStatus();
}

// ---- attention ----

absl::Status CpuDeviceKernels::SplitQkv(const AttentionDims& d, const float* qkv, float* q,
                                        float* k, float* v) {
  MXMACA_RETURN_IF_ERROR(CheckAttentionDims("SplitQkv", d));
  cpu::SplitQkv(ctx_, ShapeOf(d), qkv, q, k, v);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::MergeQkvGrad(const AttentionDims& d, const float* dq,
                                            const float* dk, const float* dv, float* dqkv) {
  MXMACA_RETURN_IF_ERROR(CheckAttentionDims("MergeQkvGrad", d));
  cpu::MergeQkvGrad(ctx_, ShapeOf(d), dq, dk, dv, dqkv);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::HeadsToTokens(const AttentionDims& d, const float* o, float* out) {
  MXMACA_RETURN_IF_ERROR(CheckAttentionDims("HeadsToTokens", d));
  cpu::HeadsToTokens(ctx_, ShapeOf(d), o, out);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::TokensToHeads(const AttentionDims& d, const float* in, float* o) {
  MXMACA_RETURN_IF_ERROR(CheckAttentionDims("TokensToHeads", d));
  cpu::TokensToHeads(ctx_, ShapeOf(d), in, o);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::AttentionForward(const AttentionDims& d, const float* q,
                                                const float* k, const float* v,
                                                const int32_t* doc_start, float softmax_scale,
                                                float dropout_p, const kernels::RngKey* key,
                                                float* probs, float* o) {
  MXMACA_RETURN_IF_ERROR(CheckAttentionDims("AttentionForward", d));
  MXMACA_RETURN_IF_ERROR(CheckDropoutP("AttentionForward", dropout_p));
  cpu::AttentionForward(ctx_, ShapeOf(d), q, k, v, doc_start, softmax_scale, dropout_p, KeyOf(key),
                        probs, o);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::AttentionBackward(const AttentionDims& d, const float* q,
                                                 const float* k, const float* v, const float* probs,
                                                 const int32_t* doc_start, float softmax_scale,
                                                 float dropout_p, const kernels::RngKey* key,
                                                 const float* dout, float* dq, float* dk,
                                                 float* dv) {
  MXMACA_RETURN_IF_ERROR(CheckAttentionDims("AttentionBackward", d));
  MXMACA_RETURN_IF_ERROR(CheckDropoutP("AttentionBackward", dropout_p));
  cpu::AttentionBackward(ctx_, ShapeOf(d), q, k, v, probs, doc_start, softmax_scale, dropout_p,
                         KeyOf(key), dout, dq, dk, dv);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::FusedAttentionForward(const AttentionDims&, const float*,
                                                     const float*, const float*, const int32_t*,
                                                     float, float, const kernels::RngKey*, float*,
                                                     float*) {
  return absl::UnimplementedError(
      "FusedAttentionForward: there is no fused attention on the CPU backend (use "
      "AttentionForward with materialised probabilities)");
}

absl::Status CpuDeviceKernels::FusedAttentionBackward(const AttentionDims&, const float*,
                                                      const float*, const float*, const float*,
                                                      const float*, const int32_t*, float, float,
                                                      const kernels::RngKey*, const float*, float*,
                                                      float*, float*, float*) {
  return absl::UnimplementedError(
      "FusedAttentionBackward: there is no fused attention on the CPU backend (use "
      "AttentionBackward with materialised probabilities)");
}

// ---- rotary position embedding ----

absl::Status CpuDeviceKernels::RopeForward(float* x, const int32_t* positions, int64_t b, int64_t s,
                                           int64_t heads, int64_t d, int64_t rotary_dim,
                                           const kernels::RopeFrequencies& f) {
  MXMACA_RETURN_IF_ERROR(CheckRopeArgs("RopeForward", b, s, heads, d, rotary_dim, f));
  cpu::RopeForward(ctx_, x, positions, b, s, heads, d, rotary_dim, f);
  return absl::OkStatus();
}

absl::Status CpuDeviceKernels::RopeBackward(float* dx, const int32_t* positions, int64_t b,
                                            int64_t s, int64_t heads, int64_t d, int64_t rotary_dim,
                                            const kernels::RopeFrequencies& f) {
  MXMACA_RETURN_IF_ERROR(CheckRopeArgs("RopeBackward", b, s, heads, d, rotary_dim, f));
  cpu::RopeBackward(ctx_, dx, positions, b, s, heads, d, rotary_dim, f);
  return absl::OkStatus();
}

// ---- optimizer ----

absl::Status CpuDeviceKernels::AdamWStep(float* param, const float* grad, float* exp_avg,
                                         float* exp_avg_sq, int64_t n, float lr, float beta1,
                                         float beta2, float eps, float weight_decay, int64_t step) {
  MXMACA_RETURN_IF_ERROR(CheckAdamWArgs(n, step));
  cpu::AdamWStep(ctx_, param, grad, exp_avg, exp_avg_sq, n, lr, beta1, beta2, eps, weight_decay,
                 step);
  return absl::OkStatus();
}

}  // namespace mxmaca::layers::device
