// layers/device/cpu_device_kernels.h: DeviceKernels on the CPU (kernels/cpu).
//
// Every compute method calls the kernels/cpu function of the same name with this
// instance's ExecContext (thread count and matrix-product precision), after the argument
// checks of kernel_args.h; the results are those of the direct kernels/cpu call, bit for
// bit. "Device" memory is host memory: Allocate is a 256-byte aligned host allocation,
// the copies are memcpy, Zero is memset, and everything runs on the calling thread before
// the method returns (Synchronize has nothing to wait for). There is no fused attention
// (FusedAttentionForward/Backward return kUnimplemented): the CPU path uses the
// materialised-probabilities AttentionForward/Backward.
//
// Thread safety: as kernels/cpu — concurrent calls on distinct outputs are fine; the
// attention kernels keep thread_local scratch.
#ifndef MXMACA_LAYERS_DEVICE_CPU_DEVICE_KERNELS_H_
#define MXMACA_LAYERS_DEVICE_CPU_DEVICE_KERNELS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/exec_context.h"
#include "layers/device/device_kernels.h"

namespace mxmaca::layers::device {

class CpuDeviceKernels : public DeviceKernels {
 public:
  // CpuDeviceKernels: kernels run with ctx.num_threads threads (values below 1 mean 1)
  // and ctx.precision for Gemm and the attention GEMMs; ctx.stream is ignored.
  explicit CpuDeviceKernels(const kernels::ExecContext& ctx);

  std::string name() const override { return "cpu"; }
  bool has_fused_attention(int64_t) const override { return false; }
  kernels::Precision precision() const override { return ctx_.precision; }
  // context: the ExecContext every kernel call receives.
  const kernels::ExecContext& context() const { return ctx_; }

  // Allocate: std::aligned_alloc(256, bytes rounded up to 256). kInvalidArgument for
  // bytes <= 0, kResourceExhausted naming the size when the allocation fails.
  absl::StatusOr<void*> Allocate(int64_t bytes) override;
  void Free(void* ptr) override;
  // Copies: memcpy (the ranges must not overlap); Zero: memset. kInvalidArgument for
  // negative sizes.
  absl::Status CopyToDevice(void* dst, const void* host_src, int64_t bytes) override;
  absl::Status CopyToHost(void* host_dst, const void* src, int64_t bytes) override;
  absl::Status CopyDeviceToDevice(void* dst, const void* src, int64_t bytes) override;
  absl::Status Zero(void* ptr, int64_t bytes) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }

  absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc) override;

  absl::Status AddBias(float* y, const float* bias, int64_t rows, int64_t cols) override;
  // BiasGrad: zeroes dbias, then kernels/cpu BiasGrad (which accumulates), so dbias =
  // sum_r dy[r, c] as device_kernels.h specifies.
  absl::Status BiasGrad(const float* dy, int64_t rows, int64_t cols, float* dbias) override;
  absl::Status Add(const float* a, const float* b, float* out, int64_t n) override;
  absl::Status Scale(float* x, int64_t n, float s) override;
  absl::Status AddScalar(const float* x, float c, float* y, int64_t n) override;
  absl::Status SumSquares(const float* x, int64_t n, double* out) override;
  absl::Status GeluForward(const float* x, float* y, int64_t n) override;
  absl::Status GeluBackward(const float* x, const float* dy, float* dx, int64_t n) override;
  absl::Status GeluTanhForward(const float* x, float* y, int64_t n) override;
  absl::Status GeluTanhBackward(const float* x, const float* dy, float* dx, int64_t n) override;
  absl::Status SwigluForward(const float* x, float* y, int64_t rows, int64_t f) override;
  absl::Status SwigluBackward(const float* x, const float* dy, float* dx, int64_t rows,
                              int64_t f) override;
  absl::Status DropoutForward(const float* x, float* y, int64_t n, float p,
                              const kernels::RngKey* key, int64_t index_offset) override;
  absl::Status DropoutBackward(const float* dy, float* dx, int64_t n, float p,
                               const kernels::RngKey* key, int64_t index_offset) override;

  absl::Status LayerNormForward(const float* x, const float* gamma, const float* beta, float eps,
                                int64_t n, int64_t h, float* y, float* mean, float* rstd) override;
  absl::Status LayerNormBackwardInput(const float* dy, const float* x, const float* gamma,
                                      const float* mean, const float* rstd, int64_t n, int64_t h,
                                      float* dx) override;
  absl::Status LayerNormBackwardWeight(const float* dy, const float* x, const float* mean,
                                       const float* rstd, int64_t n, int64_t h, float* dgamma,
                                       float* dbeta) override;
  absl::Status RmsNormForward(const float* x, const float* gamma, float eps, int64_t n, int64_t h,
                              float* y, float* rstd) override;
  absl::Status RmsNormBackwardInput(const float* dy, const float* x, const float* gamma,
                                    const float* rstd, int64_t n, int64_t h, float* dx) override;
  absl::Status RmsNormBackwardWeight(const float* dy, const float* x, const float* rstd, int64_t n,
                                     int64_t h, float* dgamma) override;

  absl::Status EmbeddingForward(const int32_t* ids, int64_t n, const float* table, int64_t h,
                                float* out, bool accumulate) override;
  absl::Status EmbeddingBackward(const int32_t* ids, int64_t n, const float* dout, int64_t h,
                                 float* dtable) override;
  absl::Status VocabShardEmbeddingForward(const int32_t* ids, int64_t n, const float* table,
                                          int64_t vocab_start, int64_t vocab_rows, int64_t h,
                                          float* out, bool accumulate) override;
  absl::Status VocabShardEmbeddingBackward(const int32_t* ids, int64_t n, const float* dout,
                                           int64_t vocab_start, int64_t vocab_rows, int64_t h,
                                           float* dtable) override;

  absl::Status CrossEntropyForward(const float* logits, const int32_t* targets, int64_t n,
                                   int64_t vp, int64_t v, float* loss, float* lse) override;
  absl::Status CrossEntropyBackward(const float* logits, const int32_t* targets, const float* lse,
                                    const float* dloss, int64_t n, int64_t vp, int64_t v,
                                    float* dlogits) override;

  absl::Status SplitQkv(const AttentionDims& d, const float* qkv, float* q, float* k,
                        float* v) override;
  absl::Status MergeQkvGrad(const AttentionDims& d, const float* dq, const float* dk,
                            const float* dv, float* dqkv) override;
  absl::Status HeadsToTokens(const AttentionDims& d, const float* o, float* out) override;
  absl::Status TokensToHeads(const AttentionDims& d, const float* in, float* o) override;
  absl::Status AttentionForward(const AttentionDims& d, const float* q, const float* k,
                                const float* v, const int32_t* doc_start, float softmax_scale,
                                float dropout_p, const kernels::RngKey* key, float* probs,
                                float* o) override;
  absl::Status AttentionBackward(const AttentionDims& d, const float* q, const float* k,
                                 const float* v, const float* probs, const int32_t* doc_start,
                                 float softmax_scale, float dropout_p, const kernels::RngKey* key,
                                 const float* dout, float* dq, float* dk, float* dv) override;
  // FusedAttentionForward / FusedAttentionBackward: kUnimplemented (no fused attention on
  // the CPU backend).
  absl::Status FusedAttentionForward(const AttentionDims& d, const float* q, const float* k,
                                     const float* v, const int32_t* doc_start, float softmax_scale,
                                     float dropout_p, const kernels::RngKey* key, float* o,
                                     float* lse) override;
  absl::Status FusedAttentionBackward(const AttentionDims& d, const float* q, const float* k,
                                      const float* v, const float* o, const float* lse,
                                      const int32_t* doc_start, float softmax_scale,
                                      float dropout_p, const kernels::RngKey* key,
                                      const float* dout, float* dq, float* dk, float* dv,
                                      float* delta) override;

  absl::Status RopeForward(float* x, const int32_t* positions, int64_t b, int64_t s, int64_t heads,
                           int64_t d, int64_t rotary_dim, const kernels::RopeFrequencies& f) override;
  absl::Status RopeBackward(float* dx, const int32_t* positions, int64_t b, int64_t s,
                            int64_t heads, int64_t d, int64_t rotary_dim,
                            const kernels::RopeFrequencies& f) override;

  absl::Status AdamWStep(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                         int64_t n, float lr, float beta1, float beta2, float eps,
                         float weight_decay, int64_t step) override;

 private:
  kernels::ExecContext ctx_;
};

}  // namespace mxmaca::layers::device

#endif  // MXMACA_LAYERS_DEVICE_CPU_DEVICE_KERNELS_H_
