// layers/device/emulated_device_kernels.cc: see emulated_device_kernels.h.
#include "layers/device/emulated_device_kernels.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace mxmaca::layers::device {

EmulatedDeviceKernels::EmulatedDeviceKernels(const kernels::ExecContext& ctx) : cpu_(ctx) {}

EmulatedDeviceKernels::~EmulatedDeviceKernels() {
  absl::MutexLock lock(&mu_);
  for (const auto& [begin, length] : regions_) munmap(reinterpret_cast<void*>(begin), length);
  regions_.clear();
}

EmulatedDeviceKernels::Access::Access(const EmulatedDeviceKernels* k) : k_(k) {
  absl::MutexLock lock(&k_->mu_);
  if (k_->open_calls_++ == 0) k_->SetProtection(true);
}

EmulatedDeviceKernels::Access::~Access() {
  absl::MutexLock lock(&k_->mu_);
  if (--k_->open_calls_ == 0) k_->SetProtection(false);
}

void EmulatedDeviceKernels::SetProtection(bool open) const {
  const int prot = open ? (PROT_READ | PROT_WRITE) : PROT_NONE;
  for (const auto& [begin, length] : regions_) {
    if (mprotect(reinterpret_cast<void*>(begin), length, prot) != 0) {
      std::fprintf(stderr, "emulated device: mprotect(%p, %zu) failed: %s\n",
                   reinterpret_cast<void*>(begin), length, std::strerror(errno));
    }
  }
}

TransferCounts EmulatedDeviceKernels::transfers() const {
  TransferCounts t;
  t.host_to_device_bytes = h2d_bytes_.load();
  t.host_to_device_calls = h2d_calls_.load();
  t.device_to_host_bytes = d2h_bytes_.load();
  t.device_to_host_calls = d2h_calls_.load();
  t.device_to_device_bytes = d2d_bytes_.load();
  t.device_to_device_calls = d2d_calls_.load();
  return t;
}

void EmulatedDeviceKernels::ResetTransfers() {
  for (std::atomic<int64_t>* c :
       {&h2d_bytes_, &h2d_calls_, &d2h_bytes_, &d2h_calls_, &d2d_bytes_, &d2d_calls_}) {
    c->store(0);
  }
}

bool EmulatedDeviceKernels::IsDeviceMemory(const void* p, int64_t bytes) const {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  absl::MutexLock lock(&mu_);
  auto it = regions_.upper_bound(a);
  if (it == regions_.begin()) return false;
  --it;
  return a >= it->first && a - it->first + static_cast<uint64_t>(bytes < 1 ? 1 : bytes) <=
                               it->second;
}

absl::Status EmulatedDeviceKernels::CheckDevicePointers(
    const char* call, std::initializer_list<std::pair<const char*, const void*>> args) const {
  for (const auto& [name, p] : args) {
    if (p != nullptr && !IsDeviceMemory(p)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "emulated device %s: argument %s = %p is not device memory of this instance "
          "(a host pointer, freed memory, or another device's)",
          call, name, p));
    }
  }
  return absl::OkStatus();
}

absl::Status EmulatedDeviceKernels::CheckHostPointer(const char* call, const char* arg,
                                                     const void* p, int64_t bytes) const {
  if (bytes > 0 && p != nullptr && IsDeviceMemory(p)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "emulated device %s: %s = %p is device memory, expected host memory", call, arg, p));
  }
  return absl::OkStatus();
}

absl::StatusOr<void*> EmulatedDeviceKernels::Allocate(int64_t bytes) {
  if (bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("emulated device Allocate: bytes = ", bytes, " (expected > 0)"));
  }
  const int64_t page = sysconf(_SC_PAGESIZE);
  if (bytes > (int64_t{1} << 50)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("emulated device Allocate: cannot allocate ", bytes, " bytes"));
  }
  const size_t length = static_cast<size_t>((bytes + page - 1) / page * page);
  void* p = mmap(nullptr, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "emulated device Allocate: mmap of ", bytes, " bytes failed: ", std::strerror(errno)));
  }
  absl::MutexLock lock(&mu_);
  // Opened at once if a call is running (an allocation made inside one stays usable).
  if (open_calls_ > 0) mprotect(p, length, PROT_READ | PROT_WRITE);
  regions_[reinterpret_cast<uintptr_t>(p)] = length;
  return p;
}

void EmulatedDeviceKernels::Free(void* ptr) {
  if (ptr == nullptr) return;
  absl::MutexLock lock(&mu_);
  auto it = regions_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == regions_.end()) {
    std::fprintf(stderr, "emulated device Free: %p is not an allocation of this device\n", ptr);
    return;
  }
  munmap(ptr, it->second);
  regions_.erase(it);
}

absl::Status EmulatedDeviceKernels::CopyToDevice(void* dst, const void* host_src, int64_t bytes) {
  if (bytes > 0) {
    if (!IsDeviceMemory(dst, bytes)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "emulated device CopyToDevice: dst = %p (+%d bytes) is not device memory of this "
          "instance",
          dst, bytes));
    }
    MXMACA_RETURN_IF_ERROR(CheckHostPointer("CopyToDevice", "host_src", host_src, bytes));
  }
  const Access access(this);
  MXMACA_RETURN_IF_ERROR(cpu_.CopyToDevice(dst, host_src, bytes));
  h2d_bytes_ += bytes;
  ++h2d_calls_;
  return absl::OkStatus();
}

absl::Status EmulatedDeviceKernels::CopyToHost(void* host_dst, const void* src, int64_t bytes) {
  if (bytes > 0) {
    if (!IsDeviceMemory(src, bytes)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "emulated device CopyToHost: src = %p (+%d bytes) is not device memory of this "
          "instance",
          src, bytes));
    }
    MXMACA_RETURN_IF_ERROR(CheckHostPointer("CopyToHost", "host_dst", host_dst, bytes));
  }
  const Access access(this);
  MXMACA_RETURN_IF_ERROR(cpu_.CopyToHost(host_dst, src, bytes));
  d2h_bytes_ += bytes;
  ++d2h_calls_;
  return absl::OkStatus();
}

absl::Status EmulatedDeviceKernels::CopyDeviceToDevice(void* dst, const void* src, int64_t bytes) {
  if (bytes > 0 && (!IsDeviceMemory(dst, bytes) || !IsDeviceMemory(src, bytes))) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "emulated device CopyDeviceToDevice: dst = %p or src = %p (+%d bytes) is not device "
        "memory of this instance",
        dst, src, bytes));
  }
  const Access access(this);
  MXMACA_RETURN_IF_ERROR(cpu_.CopyDeviceToDevice(dst, src, bytes));
  d2d_bytes_ += bytes;
  ++d2d_calls_;
  return absl::OkStatus();
}

absl::Status EmulatedDeviceKernels::Zero(void* ptr, int64_t bytes) {
  if (bytes > 0 && !IsDeviceMemory(ptr, bytes)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "emulated device Zero: ptr = %p (+%d bytes) is not device memory of this instance", ptr,
        bytes));
  }
  const Access access(this);
  return cpu_.Zero(ptr, bytes);
}

// ---- kernels: check the pointers, open the memory, run the CPU kernel ----

absl::Status EmulatedDeviceKernels::Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("Gemm", {{"a", a}, {"b", b}, {"c", c}}));
  const Access access(this);
  return cpu_.Gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

absl::Status EmulatedDeviceKernels::AddBias(float* y, const float* bias, int64_t rows, int64_t cols) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("AddBias", {{"y", y}, {"bias", bias}}));
  const Access access(this);
  return cpu_.AddBias(y, bias, rows, cols);
}

absl::Status EmulatedDeviceKernels::BiasGrad(const float* dy, int64_t rows, int64_t cols, float* dbias) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("BiasGrad", {{"dy", dy}, {"dbias", dbias}}));
  const Access access(this);
  return cpu_.BiasGrad(dy, rows, cols, dbias);
}

absl::Status EmulatedDeviceKernels::Add(const float* a, const float* b, float* out, int64_t n) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("Add", {{"a", a}, {"b", b}, {"out", out}}));
  const Access access(this);
  return cpu_.Add(a, b, out, n);
}

absl::Status EmulatedDeviceKernels::AddScalar(const float* x, float c, float* y, int64_t n) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("AddScalar", {{"x", x}, {"y", y}}));
  const Access access(this);
  return cpu_.AddScalar(x, c, y, n);
}

absl::Status EmulatedDeviceKernels::Scale(float* x, int64_t n, float s) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("Scale", {{"x", x}}));
  const Access access(this);
  return cpu_.Scale(x, n, s);
}

absl::Status EmulatedDeviceKernels::SumSquares(const float* x, int64_t n, double* out) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("SumSquares", {{"x", x}, {"out", out}}));
  const Access access(this);
  return cpu_.SumSquares(x, n, out);
}

absl::Status EmulatedDeviceKernels::GeluForward(const float* x, float* y, int64_t n) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("GeluForward", {{"x", x}, {"y", y}}));
  const Access access(this);
  return cpu_.GeluForward(x, y, n);
}

absl::Status EmulatedDeviceKernels::GeluBackward(const float* x, const float* dy, float* dx, int64_t n) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("GeluBackward", {{"x", x}, {"dy", dy}, {"dx", dx}}));
  const Access access(this);
  return cpu_.GeluBackward(x, dy, dx, n);
}

absl::Status EmulatedDeviceKernels::GeluTanhForward(const float* x, float* y, int64_t n) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("GeluTanhForward", {{"x", x}, {"y", y}}));
  const Access access(this);
  return cpu_.GeluTanhForward(x, y, n);
}

absl::Status EmulatedDeviceKernels::GeluTanhBackward(const float* x, const float* dy, float* dx, int64_t n) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("GeluTanhBackward", {{"x", x}, {"dy", dy}, {"dx", dx}}));
  const Access access(this);
  return cpu_.GeluTanhBackward(x, dy, dx, n);
}

absl::Status EmulatedDeviceKernels::SwigluForward(const float* x, float* y, int64_t rows, int64_t f) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("SwigluForward", {{"x", x}, {"y", y}}));
  const Access access(this);
  return cpu_.SwigluForward(x, y, rows, f);
}

absl::Status EmulatedDeviceKernels::SwigluBackward(const float* x, const float* dy, float* dx, int64_t rows, int64_t f) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("SwigluBackward", {{"x", x}, {"dy", dy}, {"dx", dx}}));
  const Access access(this);
  return cpu_.SwigluBackward(x, dy, dx, rows, f);
}

absl::Status EmulatedDeviceKernels::DropoutForward(const float* x, float* y, int64_t n, float p, const kernels::RngKey* key, int64_t index_offset) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("DropoutForward", {{"x", x}, {"y", y}, {"key", key}}));
  const Access access(this);
  return cpu_.DropoutForward(x, y, n, p, key, index_offset);
}

absl::Status EmulatedDeviceKernels::DropoutBackward(const float* dy, float* dx, int64_t n, float p, const kernels::RngKey* key, int64_t index_offset) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("DropoutBackward", {{"dy", dy}, {"dx", dx}, {"key", key}}));
  const Access access(this);
  return cpu_.DropoutBackward(dy, dx, n, p, key, index_offset);
}

absl::Status EmulatedDeviceKernels::LayerNormForward(const float* x, const float* gamma, const float* beta, float eps, int64_t n, int64_t h, float* y, float* mean, float* rstd) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("LayerNormForward", {{"x", x}, {"gamma", gamma}, {"beta", beta}, {"y", y}, {"mean", mean}, {"rstd", rstd}}));
  const Access access(this);
  return cpu_.LayerNormForward(x, gamma, beta, eps, n, h, y, mean, rstd);
}

absl::Status EmulatedDeviceKernels::LayerNormBackwardInput(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd, int64_t n, int64_t h, float* dx) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("LayerNormBackwardInput", {{"dy", dy}, {"x", x}, {"gamma", gamma}, {"mean", mean}, {"rstd", rstd}, {"dx", dx}}));
  const Access access(this);
  return cpu_.LayerNormBackwardInput(dy, x, gamma, mean, rstd, n, h, dx);
}

absl::Status EmulatedDeviceKernels::LayerNormBackwardWeight(const float* dy, const float* x, const float* mean, const float* rstd, int64_t n, int64_t h, float* dgamma, float* dbeta) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("LayerNormBackwardWeight", {{"dy", dy}, {"x", x}, {"mean", mean}, {"rstd", rstd}, {"dgamma", dgamma}, {"dbeta", dbeta}}));
  const Access access(this);
  return cpu_.LayerNormBackwardWeight(dy, x, mean, rstd, n, h, dgamma, dbeta);
}

absl::Status EmulatedDeviceKernels::RmsNormForward(const float* x, const float* gamma, float eps, int64_t n, int64_t h, float* y, float* rstd) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("RmsNormForward", {{"x", x}, {"gamma", gamma}, {"y", y}, {"rstd", rstd}}));
  const Access access(this);
  return cpu_.RmsNormForward(x, gamma, eps, n, h, y, rstd);
}

absl::Status EmulatedDeviceKernels::RmsNormBackwardInput(const float* dy, const float* x, const float* gamma, const float* rstd, int64_t n, int64_t h, float* dx) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("RmsNormBackwardInput", {{"dy", dy}, {"x", x}, {"gamma", gamma}, {"rstd", rstd}, {"dx", dx}}));
  const Access access(this);
  return cpu_.RmsNormBackwardInput(dy, x, gamma, rstd, n, h, dx);
}

absl::Status EmulatedDeviceKernels::RmsNormBackwardWeight(const float* dy, const float* x, const float* rstd, int64_t n, int64_t h, float* dgamma) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("RmsNormBackwardWeight", {{"dy", dy}, {"x", x}, {"rstd", rstd}, {"dgamma", dgamma}}));
  const Access access(this);
  return cpu_.RmsNormBackwardWeight(dy, x, rstd, n, h, dgamma);
}

absl::Status EmulatedDeviceKernels::EmbeddingForward(const int32_t* ids, int64_t n, const float* table, int64_t h, float* out, bool accumulate) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("EmbeddingForward", {{"ids", ids}, {"table", table}, {"out", out}}));
  const Access access(this);
  return cpu_.EmbeddingForward(ids, n, table, h, out, accumulate);
}

absl::Status EmulatedDeviceKernels::VocabShardEmbeddingForward(const int32_t* ids, int64_t n, const float* table, int64_t vocab_start, int64_t vocab_rows, int64_t h, float* out, bool accumulate) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("VocabShardEmbeddingForward", {{"ids", ids}, {"table", table}, {"out", out}}));
  const Access access(this);
  return cpu_.VocabShardEmbeddingForward(ids, n, table, vocab_start, vocab_rows, h, out, accumulate);
}

absl::Status EmulatedDeviceKernels::VocabShardEmbeddingBackward(const int32_t* ids, int64_t n, const float* dout, int64_t vocab_start, int64_t vocab_rows, int64_t h, float* dtable) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("VocabShardEmbeddingBackward", {{"ids", ids}, {"dout", dout}, {"dtable", dtable}}));
  const Access access(this);
  return cpu_.VocabShardEmbeddingBackward(ids, n, dout, vocab_start, vocab_rows, h, dtable);
}

absl::Status EmulatedDeviceKernels::EmbeddingBackward(const int32_t* ids, int64_t n, const float* dout, int64_t h, float* dtable) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("EmbeddingBackward", {{"ids", ids}, {"dout", dout}, {"dtable", dtable}}));
  const Access access(this);
  return cpu_.EmbeddingBackward(ids, n, dout, h, dtable);
}

absl::Status EmulatedDeviceKernels::CrossEntropyForward(const float* logits, const int32_t* targets, int64_t n, int64_t vp, int64_t v, float* loss, float* lse) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("CrossEntropyForward", {{"logits", logits}, {"targets", targets}, {"loss", loss}, {"lse", lse}}));
  const Access access(this);
  return cpu_.CrossEntropyForward(logits, targets, n, vp, v, loss, lse);
}

absl::Status EmulatedDeviceKernels::CrossEntropyBackward(const float* logits, const int32_t* targets, const float* lse, const float* dloss, int64_t n, int64_t vp, int64_t v, float* dlogits) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("CrossEntropyBackward", {{"logits", logits}, {"targets", targets}, {"lse", lse}, {"dloss", dloss}, {"dlogits", dlogits}}));
  const Access access(this);
  return cpu_.CrossEntropyBackward(logits, targets, lse, dloss, n, vp, v, dlogits);
}

absl::Status EmulatedDeviceKernels::SplitQkv(const AttentionDims& d, const float* qkv, float* q, float* k, float* v) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("SplitQkv", {{"qkv", qkv}, {"q", q}, {"k", k}, {"v", v}}));
  const Access access(this);
  return cpu_.SplitQkv(d, qkv, q, k, v);
}

absl::Status EmulatedDeviceKernels::MergeQkvGrad(const AttentionDims& d, const float* dq, const float* dk, const float* dv, float* dqkv) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("MergeQkvGrad", {{"dq", dq}, {"dk", dk}, {"dv", dv}, {"dqkv", dqkv}}));
  const Access access(this);
  return cpu_.MergeQkvGrad(d, dq, dk, dv, dqkv);
}

absl::Status EmulatedDeviceKernels::HeadsToTokens(const AttentionDims& d, const float* o, float* out) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("HeadsToTokens", {{"o", o}, {"out", out}}));
  const Access access(this);
  return cpu_.HeadsToTokens(d, o, out);
}

absl::Status EmulatedDeviceKernels::TokensToHeads(const AttentionDims& d, const float* in, float* o) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("TokensToHeads", {{"in", in}, {"o", o}}));
  const Access access(this);
  return cpu_.TokensToHeads(d, in, o);
}

absl::Status EmulatedDeviceKernels::AttentionForward(const AttentionDims& d, const float* q, const float* k, const float* v, const int32_t* doc_start, float softmax_scale, float dropout_p, const kernels::RngKey* key, float* probs, float* o) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("AttentionForward", {{"q", q}, {"k", k}, {"v", v}, {"doc_start", doc_start}, {"key", key}, {"probs", probs}, {"o", o}}));
  const Access access(this);
  return cpu_.AttentionForward(d, q, k, v, doc_start, softmax_scale, dropout_p, key, probs, o);
}

absl::Status EmulatedDeviceKernels::AttentionBackward(const AttentionDims& d, const float* q, const float* k, const float* v, const float* probs, const int32_t* doc_start, float softmax_scale, float dropout_p, const kernels::RngKey* key, const float* dout, float* dq, float* dk, float* dv) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("AttentionBackward", {{"q", q}, {"k", k}, {"v", v}, {"probs", probs}, {"doc_start", doc_start}, {"key", key}, {"dout", dout}, {"dq", dq}, {"dk", dk}, {"dv", dv}}));
  const Access access(this);
  return cpu_.AttentionBackward(d, q, k, v, probs, doc_start, softmax_scale, dropout_p, key, dout, dq, dk, dv);
}

absl::Status EmulatedDeviceKernels::FusedAttentionForward(const AttentionDims& d, const float* q, const float* k, const float* v, const int32_t* doc_start, float softmax_scale, float dropout_p, const kernels::RngKey* key, float* o, float* lse) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("FusedAttentionForward", {{"q", q}, {"k", k}, {"v", v}, {"doc_start", doc_start}, {"key", key}, {"o", o}, {"lse", lse}}));
  const Access access(this);
  return cpu_.FusedAttentionForward(d, q, k, v, doc_start, softmax_scale, dropout_p, key, o, lse);
}

absl::Status EmulatedDeviceKernels::FusedAttentionBackward(const AttentionDims& d, const float* q, const float* k, const float* v, const float* o, const float* lse, const int32_t* doc_start, float softmax_scale, float dropout_p, const kernels::RngKey* key, const float* dout, float* dq, float* dk, float* dv, float* delta) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("FusedAttentionBackward", {{"q", q}, {"k", k}, {"v", v}, {"o", o}, {"lse", lse}, {"doc_start", doc_start}, {"key", key}, {"dout", dout}, {"dq", dq}, {"dk", dk}, {"dv", dv}, {"delta", delta}}));
  const Access access(this);
  return cpu_.FusedAttentionBackward(d, q, k, v, o, lse, doc_start, softmax_scale, dropout_p, key, dout, dq, dk, dv, delta);
}

absl::Status EmulatedDeviceKernels::RopeForward(float* x, const int32_t* positions, int64_t b, int64_t s, int64_t heads, int64_t d, int64_t rotary_dim, const kernels::RopeFrequencies& f) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("RopeForward", {{"x", x}, {"positions", positions}}));
  const Access access(this);
  return cpu_.RopeForward(x, positions, b, s, heads, d, rotary_dim, f);
}

absl::Status EmulatedDeviceKernels::RopeBackward(float* dx, const int32_t* positions, int64_t b, int64_t s, int64_t heads, int64_t d, int64_t rotary_dim, const kernels::RopeFrequencies& f) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("RopeBackward", {{"dx", dx}, {"positions", positions}}));
  const Access access(this);
  return cpu_.RopeBackward(dx, positions, b, s, heads, d, rotary_dim, f);
}

absl::Status EmulatedDeviceKernels::AdamWStep(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step) {
  MXMACA_RETURN_IF_ERROR(CheckDevicePointers("AdamWStep", {{"param", param}, {"grad", grad}, {"exp_avg", exp_avg}, {"exp_avg_sq", exp_avg_sq}}));
  const Access access(this);
  return cpu_.AdamWStep(param, grad, exp_avg, exp_avg_sq, n, lr, beta1, beta2, eps, weight_decay, step);
}

}  // namespace mxmaca::layers::device
