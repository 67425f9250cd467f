// layers/device/device_kernels.h: one interface over a device's memory and kernels, so
// the model's modules (layers/modules/, layers/transformer_layer.h) are written once and run
// on the GPU (cuda_device_kernels.h, kernels/cuda), on the CPU (cpu_device_kernels.h,
// kernels/cpu) and on the emulated device (emulated_device_kernels.h: the CPU kernels on
// memory the host cannot touch, how CI tests the GPU path's memory discipline).
//
// docs/ARCHITECTURE.md "Kernel calls only enqueue": every compute call enqueues on the instance's
// stream (CUDA) or runs now on the calling thread (CPU), allocates nothing and reads no
// device data on the host, so a sequence of calls can be captured into a CUDA graph.
// Only Allocate/Free, the Copy* calls with host memory, and Synchronize are not
// capturable (CopyToHost/CopyToDevice into page-locked memory are, on CUDA).
//
// Pointers are DEVICE pointers of this instance (host pointers for the CPU instance)
// unless a parameter says "host". Sizes are in elements unless named *_bytes. Layouts,
// shapes and numerics of each call are those of the kernels/cpu function of the same name
// (kernels/cpu/*.h), which the kernels/cuda twins match within the tolerances of
// tests/gpu (fp32 paths within 1e-5 norm-wise relative error).
//
// Errors: absl::Status — kInternal for a failed CUDA/cuBLAS call (the message names the
// call, file and line), kInvalidArgument for a violated size precondition,
// kResourceExhausted when Allocate cannot get the memory, kUnimplemented for a kernel the
// backend lacks (the CPU instance has no fused attention).
#ifndef MXMACA_LAYERS_DEVICE_DEVICE_KERNELS_H_
#define MXMACA_LAYERS_DEVICE_DEVICE_KERNELS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/exec_context.h"
#include "kernels/rope_frequencies.h"

namespace mxmaca::layers::device {

// AttentionDims: b = micro-batch, s = sequence, heads = np (query heads), groups = ng
// (query groups, heads % groups == 0), head_dim = hn: kernels/cpu/attention.h
// AttentionShape. With tensor parallelism the rank holds heads [dropout_head_offset,
// dropout_head_offset + heads) of dropout_heads, and the attention-dropout mask is keyed by
// the global head (0 / 0: heads / 0, no tensor parallelism).
struct AttentionDims {
  int64_t b = 0, s = 0, heads = 0, groups = 0, head_dim = 0;
  int64_t dropout_head_offset = 0, dropout_heads = 0;
};

class DeviceKernels {
 public:
  virtual ~DeviceKernels() = default;

  // name: "cpu" or "cuda" (for messages and logs).
  virtual std::string name() const = 0;
  // has_fused_attention: whether FusedAttentionForward/Backward exist for heads of
  // `head_dim` dims (CUDA: 32, 64 or 128; the CPU backend has none).
  virtual bool has_fused_attention(int64_t head_dim) const = 0;
  // precision: the matrix-product input precision of Gemm (kernels/exec_context.h).
  virtual kernels::Precision precision() const = 0;
  // MakeCurrent: binds this instance's device to the calling thread (CUDA: cudaSetDevice
  // when another device is current; the CPU backend has nothing to do). Callers that
  // enqueue work other than through these methods (a CUDA-graph launch) call it first.
  virtual absl::Status MakeCurrent() { return absl::OkStatus(); }
  // ReserveAttentionScratch: sizes now whatever workspace AttentionForward/Backward need for
  // shapes up to `d` (CUDA: the [b, np, s, s] scratch), so no later call allocates (and no
  // captured CUDA graph is left pointing at freed scratch). kResourceExhausted when it does
  // not fit. The CPU backend needs none.
  virtual absl::Status ReserveAttentionScratch(const AttentionDims& d) {
    (void)d;
    return absl::OkStatus();
  }

  // ---- memory ----
  // Allocate: `bytes` (> 0) of device memory, 256-byte aligned, uninitialised.
  // kResourceExhausted naming the size when the device has no room.
  virtual absl::StatusOr<void*> Allocate(int64_t bytes) = 0;
  // Free: memory from Allocate (nullptr: nothing). Waits for queued work on CUDA.
  virtual void Free(void* ptr) = 0;
  // CopyToDevice / CopyToHost / CopyDeviceToDevice: `bytes` bytes, enqueued; the host
  // side must stay valid (and, for CopyToHost, unread) until Synchronize.
  virtual absl::Status CopyToDevice(void* dst, const void* host_src, int64_t bytes) = 0;
  virtual absl::Status CopyToHost(void* host_dst, const void* src, int64_t bytes) = 0;
  virtual absl::Status CopyDeviceToDevice(void* dst, const void* src, int64_t bytes) = 0;
  // Zero: `bytes` bytes of device memory set to 0, enqueued.
  virtual absl::Status Zero(void* ptr, int64_t bytes) = 0;
  // Synchronize: returns when everything enqueued so far has finished (and reports the
  // first asynchronous error).
  virtual absl::Status Synchronize() = 0;

  // ---- matrix products (kernels/cpu/gemm.h) ----
  // C[m, n] = alpha op(A)[m, k] op(B)[k, n] + beta C, row-major, fp32 in and out, inputs
  // rounded to bf16 when precision() is kBf16; fp32 accumulation.
  virtual absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                            float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                            float beta, float* c, int64_t ldc) = 0;

  // ---- elementwise (kernels/cpu/elementwise.h) ----
  virtual absl::Status AddBias(float* y, const float* bias, int64_t rows, int64_t cols) = 0;
  // BiasGrad: dbias[c] = sum_r dy[r, c] (overwrites).
  virtual absl::Status BiasGrad(const float* dy, int64_t rows, int64_t cols, float* dbias) = 0;
  // Add: out = a + b (out may alias a or b).
  virtual absl::Status Add(const float* a, const float* b, float* out, int64_t n) = 0;
  virtual absl::Status Scale(float* x, int64_t n, float s) = 0;
  // AddScalar: y[i] = x[i] + c in fp32 (y may alias x); e.g. the 1 + w norm multiplier of
  // --apply-layernorm-1p.
  virtual absl::Status AddScalar(const float* x, float c, float* y, int64_t n) = 0;
  // SumSquares: *out (one device double) = sum of x[i]^2 in fp64.
  virtual absl::Status SumSquares(const float* x, int64_t n, double* out) = 0;
  virtual absl::Status GeluForward(const float* x, float* y, int64_t n) = 0;
  virtual absl::Status GeluBackward(const float* x, const float* dy, float* dx, int64_t n) = 0;
  virtual absl::Status GeluTanhForward(const float* x, float* y, int64_t n) = 0;
  virtual absl::Status GeluTanhBackward(const float* x, const float* dy, float* dx, int64_t n) = 0;
  // Swiglu: x [rows, 2f] = [gate | up] -> y [rows, f] = silu(gate) * up.
  virtual absl::Status SwigluForward(const float* x, float* y, int64_t rows, int64_t f) = 0;
  virtual absl::Status SwigluBackward(const float* x, const float* dy, float* dx, int64_t rows,
                                      int64_t f) = 0;
  // Dropout with the counter-based mask of kernels/philox.h: element i keyed by
  // (*key, index_offset + i); p = 0 copies. `key` (here and in the attention calls) points
  // to DEVICE memory and is read when the work runs, not when it is enqueued, so a
  // captured CUDA graph replays with the key the buffer holds then; it may be null only
  // when the dropout probability is 0.
  virtual absl::Status DropoutForward(const float* x, float* y, int64_t n, float p,
                                      const kernels::RngKey* key, int64_t index_offset) = 0;
  virtual absl::Status DropoutBackward(const float* dy, float* dx, int64_t n, float p,
                                       const kernels::RngKey* key, int64_t index_offset) = 0;

  // ---- norms (kernels/cpu/norm.h), rows [n, h]; *BackwardWeight ACCUMULATE ----
  virtual absl::Status LayerNormForward(const float* x, const float* gamma, const float* beta,
                                        float eps, int64_t n, int64_t h, float* y, float* mean,
                                        float* rstd) = 0;
  virtual absl::Status LayerNormBackwardInput(const float* dy, const float* x, const float* gamma,
                                              const float* mean, const float* rstd, int64_t n,
                                              int64_t h, float* dx) = 0;
  virtual absl::Status LayerNormBackwardWeight(const float* dy, const float* x, const float* mean,
                                               const float* rstd, int64_t n, int64_t h,
                                               float* dgamma, float* dbeta) = 0;
  virtual absl::Status RmsNormForward(const float* x, const float* gamma, float eps, int64_t n,
                                      int64_t h, float* y, float* rstd) = 0;
  virtual absl::Status RmsNormBackwardInput(const float* dy, const float* x, const float* gamma,
                                            const float* rstd, int64_t n, int64_t h, float* dx) = 0;
  virtual absl::Status RmsNormBackwardWeight(const float* dy, const float* x, const float* rstd,
                                             int64_t n, int64_t h, float* dgamma) = 0;

  // ---- embedding (kernels/cpu/embedding.h): ids [n] (device int32) ----
  // out [n, h] = table[ids] (+= with accumulate); EmbeddingBackward ACCUMULATES into dtable.
  virtual absl::Status EmbeddingForward(const int32_t* ids, int64_t n, const float* table,
                                        int64_t h, float* out, bool accumulate) = 0;
  virtual absl::Status EmbeddingBackward(const int32_t* ids, int64_t n, const float* dout,
                                         int64_t h, float* dtable) = 0;
  // VocabShard*: Megatron's VocabParallelEmbedding for the shard holding table rows
  // [vocab_start, vocab_start + vocab_rows): ids inside get their row, others a zero row
  // (accumulate false) or no change; the backward adds only this shard's tokens (in
  // increasing token order). Never reads out of bounds whatever the ids.
  virtual absl::Status VocabShardEmbeddingForward(const int32_t* ids, int64_t n,
                                                  const float* table, int64_t vocab_start,
                                                  int64_t vocab_rows, int64_t h, float* out,
                                                  bool accumulate) = 0;
  virtual absl::Status VocabShardEmbeddingBackward(const int32_t* ids, int64_t n,
                                                   const float* dout, int64_t vocab_start,
                                                   int64_t vocab_rows, int64_t h,
                                                   float* dtable) = 0;

  // ---- cross-entropy (kernels/cpu/cross_entropy.h): logits [n, vp], softmax over the
  // first v columns; loss [n], lse [n]; dlogits may alias logits ----
  virtual absl::Status CrossEntropyForward(const float* logits, const int32_t* targets, int64_t n,
                                           int64_t vp, int64_t v, float* loss, float* lse) = 0;
  virtual absl::Status CrossEntropyBackward(const float* logits, const int32_t* targets,
                                            const float* lse, const float* dloss, int64_t n,
                                            int64_t vp, int64_t v, float* dlogits) = 0;

  // ---- attention (kernels/cpu/attention.h) ----
  // qkv [b s, (np + 2 ng) hn] -> q [b, np, s, hn], k, v [b, ng, s, hn].
  virtual absl::Status SplitQkv(const AttentionDims& d, const float* qkv, float* q, float* k,
                                float* v) = 0;
  virtual absl::Status MergeQkvGrad(const AttentionDims& d, const float* dq, const float* dk,
                                    const float* dv, float* dqkv) = 0;
  // o [b, np, s, hn] <-> out [b s, np hn].
  virtual absl::Status HeadsToTokens(const AttentionDims& d, const float* o, float* out) = 0;
  virtual absl::Status TokensToHeads(const AttentionDims& d, const float* in, float* o) = 0;
  // Causal (doc_start: [b, s] or nullptr) softmax attention with materialised
  // probabilities probs [b, np, s, s] (dropped out with p under key).
  virtual absl::Status AttentionForward(const AttentionDims& d, const float* q, const float* k,
                                        const float* v, const int32_t* doc_start,
                                        float softmax_scale, float dropout_p,
                                        const kernels::RngKey* key, float* probs, float* o) = 0;
  virtual absl::Status AttentionBackward(const AttentionDims& d, const float* q, const float* k,
                                         const float* v, const float* probs,
                                         const int32_t* doc_start, float softmax_scale,
                                         float dropout_p, const kernels::RngKey* key,
                                         const float* dout, float* dq, float* dk, float* dv) = 0;
  // Fused (flash-style) attention: o and the log-sum-exp lse [b, np, s]; the backward
  // recomputes the probabilities (delta: [b, np, s] scratch). kUnimplemented on CPU.
  virtual absl::Status FusedAttentionForward(const AttentionDims& d, const float* q, const float* k,
                                             const float* v, const int32_t* doc_start,
                                             float softmax_scale, float dropout_p,
                                             const kernels::RngKey* key, float* o, float* lse) = 0;
  virtual absl::Status FusedAttentionBackward(const AttentionDims& d, const float* q,
                                              const float* k, const float* v, const float* o,
                                              const float* lse, const int32_t* doc_start,
                                              float softmax_scale, float dropout_p,
                                              const kernels::RngKey* key, const float* dout,
                                              float* dq, float* dk, float* dv, float* delta) = 0;

  // ---- rotary position embedding (kernels/cpu/rope.h) ----
  // In place on x [b, heads, s, d] (SplitQkv's q or k); positions [b, s] (device int32);
  // the first rotary_dim of d dims rotated by the angles of `f` (kernels/rope_frequencies.h:
  // base, Llama-3 scaling, position interpolation, interleaved pairs).
  virtual absl::Status RopeForward(float* x, const int32_t* positions, int64_t b, int64_t s,
                                   int64_t heads, int64_t d, int64_t rotary_dim,
                                   const kernels::RopeFrequencies& f) = 0;
  virtual absl::Status RopeBackward(float* dx, const int32_t* positions, int64_t b, int64_t s,
                                    int64_t heads, int64_t d, int64_t rotary_dim,
                                    const kernels::RopeFrequencies& f) = 0;

  // ---- optimizer (kernels/cpu/adamw.h): torch.optim.AdamW's update, bias correction
  // with step (1-based) ----
  virtual absl::Status AdamWStep(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                                 int64_t n, float lr, float beta1, float beta2, float eps,
                                 float weight_decay, int64_t step) = 0;
};

}  // namespace mxmaca::layers::device

#endif  // MXMACA_LAYERS_DEVICE_DEVICE_KERNELS_H_
