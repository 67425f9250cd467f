// layers/device/emulated_device_kernels.h: the emulated device — DeviceKernels that run the
// CPU kernels (cpu_device_kernels.h, bit for bit) on memory that host code cannot touch
// except through this interface, with every host<->device byte counted. It is CI's check of
// device-memory discipline (`mxmaca train --device device-on-cpu`): code that passes on it
// reads and writes device memory only as a CUDA device allows.
//
// Rules it enforces (each violation fails at once, on the line that breaks the rule):
//   - Device memory (Allocate) is mapped PROT_NONE while no call of this instance runs: a
//     host read or write of it outside the interface faults (SIGSEGV), as on a GPU. Each
//     call opens all of this instance's memory while it runs (a counter, so concurrent
//     calls of one instance nest) and closes it after.
//   - Every pointer a kernel takes (except those the interface names host_*) must be null
//     or inside memory this instance allocated and has not freed; a host pointer, or memory
//     of another device, is kInvalidArgument naming the call and the argument.
//   - Copies check both sides: the device side in this instance's memory, the host side
//     NOT in it (a "host" pointer into device memory is refused, as cudaMemcpy's
//     direction would be wrong).
// What it cannot see: a host read that happens while another thread is inside a call of the
// same instance (the memory is open then) — a missed violation, never a false one.
//
// Counters (transfers()): bytes and calls host->device, device->host and device->device,
// since construction or the last ResetTransfers().
//
// Errors: as CpuDeviceKernels, plus kInvalidArgument for the pointer rules above and
// kResourceExhausted when mmap fails. Thread safety: as CpuDeviceKernels.
#ifndef MXMACA_LAYERS_DEVICE_EMULATED_DEVICE_KERNELS_H_
#define MXMACA_LAYERS_DEVICE_EMULATED_DEVICE_KERNELS_H_

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kernels/exec_context.h"
#include "layers/device/cpu_device_kernels.h"
#include "layers/device/device_kernels.h"

namespace mxmaca::layers::device {

// TransferCounts: host<->device traffic of one emulated device.
struct TransferCounts {
  int64_t host_to_device_bytes = 0, host_to_device_calls = 0;
  int64_t device_to_host_bytes = 0, device_to_host_calls = 0;
  int64_t device_to_device_bytes = 0, device_to_device_calls = 0;
};

class EmulatedDeviceKernels : public DeviceKernels {
 public:
  // EmulatedDeviceKernels: CpuDeviceKernels(ctx) behind the rules above.
  explicit EmulatedDeviceKernels(const kernels::ExecContext& ctx);
  // ~EmulatedDeviceKernels: unmaps what was not freed.
  ~EmulatedDeviceKernels() override;
  EmulatedDeviceKernels(const EmulatedDeviceKernels&) = delete;
  EmulatedDeviceKernels& operator=(const EmulatedDeviceKernels&) = delete;

  std::string name() const override { return "emulated"; }
  bool has_fused_attention(int64_t head_dim) const override {
    return cpu_.has_fused_attention(head_dim);
  }
  kernels::Precision precision() const override { return cpu_.precision(); }

  // transfers: the counts so far; ResetTransfers: sets them to zero.
  TransferCounts transfers() const;
  void ResetTransfers();
  // IsDeviceMemory: whether [p, p + bytes) lies inside one live allocation of this instance.
  bool IsDeviceMemory(const void* p, int64_t bytes = 1) const;

  // Allocate: whole pages from mmap (so 4096-byte aligned), PROT_NONE until a call opens
  // them. kInvalidArgument for bytes <= 0, kResourceExhausted when mmap fails.
  absl::StatusOr<void*> Allocate(int64_t bytes) override;
  // Free: munmap; a pointer that is not the start of a live allocation is ignored (as
  // CpuDeviceKernels ignores nullptr) after a message on stderr.
  void Free(void* ptr) override;
  absl::Status CopyToDevice(void* dst, const void* host_src, int64_t bytes) override;
  absl::Status CopyToHost(void* host_dst, const void* src, int64_t bytes) override;
  absl::Status CopyDeviceToDevice(void* dst, const void* src, int64_t bytes) override;
  absl::Status Zero(void* ptr, int64_t bytes) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }

  absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) override;
  absl::Status AddBias(float* y, const float* bias, int64_t rows, int64_t cols) override;
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
  absl::Status SwigluBackward(const float* x, const float* dy, float* dx, int64_t rows, int64_t f) override;
  absl::Status DropoutForward(const float* x, float* y, int64_t n, float p, const kernels::RngKey* key, int64_t index_offset) override;
  absl::Status DropoutBackward(const float* dy, float* dx, int64_t n, float p, const kernels::RngKey* key, int64_t index_offset) override;
  absl::Status LayerNormForward(const float* x, const float* gamma, const float* beta, float eps, int64_t n, int64_t h, float* y, float* mean, float* rstd) override;
  absl::Status LayerNormBackwardInput(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd, int64_t n, int64_t h, float* dx) override;
  absl::Status LayerNormBackwardWeight(const float* dy, const float* x, const float* mean, const float* rstd, int64_t n, int64_t h, float* dgamma, float* dbeta) override;
  absl::Status RmsNormForward(const float* x, const float* gamma, float eps, int64_t n, int64_t h, float* y, float* rstd) override;
  absl::Status RmsNormBackwardInput(const float* dy, const float* x, const float* gamma, const float* rstd, int64_t n, int64_t h, float* dx) override;
  absl::Status RmsNormBackwardWeight(const float* dy, const float* x, const float* rstd, int64_t n, int64_t h, float* dgamma) override;
  absl::Status EmbeddingForward(const int32_t* ids, int64_t n, const float* table, int64_t h, float* out, bool accumulate) override;
  absl::Status EmbeddingBackward(const int32_t* ids, int64_t n, const float* dout, int64_t h, float* dtable) override;
  absl::Status VocabShardEmbeddingForward(const int32_t* ids, int64_t n, const float* table, int64_t vocab_start, int64_t vocab_rows, int64_t h, float* out, bool accumulate) override;
  absl::Status VocabShardEmbeddingBackward(const int32_t* ids, int64_t n, const float* dout, int64_t vocab_start, int64_t vocab_rows, int64_t h, float* dtable) override;
  absl::Status CrossEntropyForward(const float* logits, const int32_t* targets, int64_t n, int64_t vp, int64_t v, float* loss, float* lse) override;
  absl::Status CrossEntropyBackward(const float* logits, const int32_t* targets, const float* lse, const float* dloss, int64_t n, int64_t vp, int64_t v, float* dlogits) override;
  absl::Status SplitQkv(const AttentionDims& d, const float* qkv, float* q, float* k, float* v) override;
  absl::Status MergeQkvGrad(const AttentionDims& d, const float* dq, const float* dk, const float* dv, float* dqkv) override;
  absl::Status HeadsToTokens(const AttentionDims& d, const float* o, float* out) override;
  absl::Status TokensToHeads(const AttentionDims& d, const float* in, float* o) override;
  absl::Status AttentionForward(const AttentionDims& d, const float* q, const float* k, const float* v, const int32_t* doc_start, float softmax_scale, float dropout_p, const kernels::RngKey* key, float* probs, float* o) override;
  absl::Status AttentionBackward(const AttentionDims& d, const float* q, const float* k, const float* v, const float* probs, const int32_t* doc_start, float softmax_scale, float dropout_p, const kernels::RngKey* key, const float* dout, float* dq, float* dk, float* dv) override;
  absl::Status FusedAttentionForward(const AttentionDims& d, const float* q, const float* k, const float* v, const int32_t* doc_start, float softmax_scale, float dropout_p, const kernels::RngKey* key, float* o, float* lse) override;
  absl::Status FusedAttentionBackward(const AttentionDims& d, const float* q, const float* k, const float* v, const float* o, const float* lse, const int32_t* doc_start, float softmax_scale, float dropout_p, const kernels::RngKey* key, const float* dout, float* dq, float* dk, float* dv, float* delta) override;
  absl::Status RopeForward(float* x, const int32_t* positions, int64_t b, int64_t s, int64_t heads, int64_t d, int64_t rotary_dim, const kernels::RopeFrequencies& f) override;
  absl::Status RopeBackward(float* dx, const int32_t* positions, int64_t b, int64_t s, int64_t heads, int64_t d, int64_t rotary_dim, const kernels::RopeFrequencies& f) override;
  absl::Status AdamWStep(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step) override;

 private:
  // Access: opens this instance's memory (read/write) for the duration of one call.
  class Access {
   public:
    explicit Access(const EmulatedDeviceKernels* k);
    ~Access();
    Access(const Access&) = delete;
    Access& operator=(const Access&) = delete;

   private:
    const EmulatedDeviceKernels* k_;
  };
  // CheckDevicePointers: each non-null pointer inside this instance's memory, else
  // kInvalidArgument "emulated device <call>: argument <name> = <ptr> is not device memory".
  absl::Status CheckDevicePointers(
      const char* call, std::initializer_list<std::pair<const char*, const void*>> args) const;
  absl::Status CheckHostPointer(const char* call, const char* arg, const void* p,
                                int64_t bytes) const;
  void SetProtection(bool open) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  CpuDeviceKernels cpu_;
  mutable absl::Mutex mu_;
  mutable int open_calls_ ABSL_GUARDED_BY(mu_) = 0;
  // Live allocations: start address -> mapped length (bytes, whole pages).
  std::map<uintptr_t, size_t> regions_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> h2d_bytes_{0}, h2d_calls_{0}, d2h_bytes_{0}, d2h_calls_{0},
      d2d_bytes_{0}, d2d_calls_{0};
};

}  // namespace mxmaca::layers::device

#endif  // MXMACA_LAYERS_DEVICE_EMULATED_DEVICE_KERNELS_H_
