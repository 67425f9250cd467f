// kernels/cuda/attention.cu: see attention.h.
#include "kernels/cuda/attention.h"

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/device_util.cuh"

namespace mxmaca::kernels::cuda {
namespace {

constexpr int kThreads = 256;

CudaStatus CheckShape(const AttentionShape& sh) {
  MXMACA_CUDA_REQUIRE(sh.b > 0 && sh.s > 0 && sh.heads > 0 && sh.groups > 0 &&
                          sh.head_dim > 0 && sh.heads % sh.groups == 0,
                      "attention shape must be positive with heads % groups == 0, got b=" +
                          std::to_string(sh.b) + " s=" + std::to_string(sh.s) +
                          " heads=" + std::to_string(sh.heads) +
                          " groups=" + std::to_string(sh.groups) +
                          " head_dim=" + std::to_string(sh.head_dim));
  MXMACA_CUDA_REQUIRE(sh.b * sh.heads * sh.s < (int64_t{1} << 31),
                      "attention: B * NH * S must be < 2^31 (one block per query row)");
  return CudaStatus();
}

// Layout change between the fused qkv [B, S, NG, HPG+2, D] and q/k/v; kMerge: the inverse.
template <bool kMerge>
__global__ void QkvLayoutKernel(AttentionShape sh, const float* qkv_in, float* qkv_out,
                                const float* q_in, const float* k_in, const float* v_in,
                                float* q_out, float* k_out, float* v_out) {
  const int64_t hpg = sh.heads / sh.groups, d = sh.head_dim;
  const int64_t per_group = (hpg + 2) * d, width = sh.groups * per_group;
  const int64_t total = sh.b * sh.s * width;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       idx < total; idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / width, rem = idx % width;
    const int64_t b = t / sh.s, s = t % sh.s;
    const int64_t g = rem / per_group, within = rem % per_group;
    const int64_t j = within / d, e = within % d;
    int64_t off;
    int which;  // 0 q, 1 k, 2 v
    if (j < hpg) {
      off = ((b * sh.heads + g * hpg + j) * sh.s + s) * d + e;
      which = 0;
    } else {
      off = ((b * sh.groups + g) * sh.s + s) * d + e;
      which = j == hpg ? 1 : 2;
    }
    if (kMerge) {
      const float* src = which == 0 ? q_in : (which == 1 ? k_in : v_in);
      qkv_out[idx] = src[off];
    } else {
      float* dst = which == 0 ? q_out : (which == 1 ? k_out : v_out);
      dst[off] = qkv_in[idx];
    }
  }
}

// [B, NH, S, D] <-> [B, S, NH*D]; kToTokens selects the direction.
template <bool kToTokens>
__global__ void HeadsTokensKernel(AttentionShape sh, const float* in, float* out) {
  const int64_t d = sh.head_dim, total = sh.b * sh.s * sh.heads * d;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       idx < total; idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // idx enumerates the token layout [b, s, h, e].
    const int64_t e = idx % d, h = (idx / d) % sh.heads, s = (idx / (d * sh.heads)) % sh.s,
                  b = idx / (d * sh.heads * sh.s);
    const int64_t head_idx = ((b * sh.heads + h) * sh.s + s) * d + e;
    if (kToTokens) {
      out[idx] = in[head_idx];
    } else {
      out[head_idx] = in[idx];
    }
  }
}

__device__ __forceinline__ int64_t KeyLo(const int32_t* doc_start, int64_t b, int64_t s,
                                         int64_t i) {
  if (doc_start == nullptr) return 0;
  int64_t lo = doc_start[b * s + i];
  lo = lo < 0 ? 0 : lo;
  return lo > i ? i : lo;
}

// One block per query row (b, h, i): masked softmax of the scores in place (probs), and
// the dropped probabilities into `dropped` when dropout_p > 0.
__global__ void SoftmaxForwardKernel(AttentionShape sh, const int32_t* doc_start,
                                     float dropout_p, float drop_scale,
                                     internal::RngKeyArg key, float* probs, float* dropped) {
  __shared__ float scratch[32];
  const uint64_t seed = key.Seed(), stream = key.Stream();
  const int64_t row = blockIdx.x;  // ((b * NH + h) * S + i)
  const int64_t S = sh.s, i = row % S, b = row / (sh.heads * S);
  const int64_t lo = KeyLo(doc_start, b, S, i), mask_row = DropoutMaskRow(sh, row);
  float* p = probs + row * S;
  float m = -INFINITY;
  for (int64_t j = lo + threadIdx.x; j <= i; j += blockDim.x) m = fmaxf(m, p[j]);
  m = internal::BlockMax(m, scratch);
  float sum = 0.0f;
  for (int64_t j = lo + threadIdx.x; j <= i; j += blockDim.x) sum += expf(p[j] - m);
  sum = internal::BlockSum(sum, scratch);
  for (int64_t j = threadIdx.x; j < S; j += blockDim.x) {
    const float val = (j >= lo && j <= i) ? expf(p[j] - m) / sum : 0.0f;
    p[j] = val;
    if (dropped != nullptr) {
      const bool keep = internal::UniformAt(seed, stream,
                                            static_cast<uint64_t>(mask_row * S + j)) >= dropout_p;
      dropped[row * S + j] = keep ? val * drop_scale : 0.0f;
    }
  }
}

// dropped = dropout(probs) with the forward's mask (for the dv GEMM).
__global__ void DropProbsKernel(AttentionShape sh, int64_t total, const float* probs,
                                float dropout_p, float drop_scale, internal::RngKeyArg key,
                                float* dropped) {
  const uint64_t seed = key.Seed(), stream = key.Stream();
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       idx < total; idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t mask_idx =
        static_cast<uint64_t>(DropoutMaskRow(sh, idx / sh.s) * sh.s + idx % sh.s);
    const bool keep = internal::UniformAt(seed, stream, mask_idx) >= dropout_p;
    dropped[idx] = keep ? probs[idx] * drop_scale : 0.0f;
  }
}

// One block per query row: dS = P * (dP - sum_j dP P) in place over dP (masked -> 0),
// dP = dropout mask applied to dout @ v^T when dropout_p > 0.
__global__ void SoftmaxBackwardKernel(AttentionShape sh, const int32_t* doc_start,
                                      const float* probs, float dropout_p, float drop_scale,
                                      internal::RngKeyArg key, float* dp) {
  __shared__ float scratch[32];
  const uint64_t seed = key.Seed(), stream = key.Stream();
  const int64_t row = blockIdx.x;
  const int64_t S = sh.s, i = row % S, b = row / (sh.heads * S);
  const int64_t lo = KeyLo(doc_start, b, S, i), mask_row = DropoutMaskRow(sh, row);
  const float* p = probs + row * S;
  float* d = dp + row * S;
  float dot = 0.0f;
  for (int64_t j = lo + threadIdx.x; j <= i; j += blockDim.x) {
    float g = d[j];
    if (dropout_p > 0.0f) {
      const bool keep = internal::UniformAt(seed, stream,
                                            static_cast<uint64_t>(mask_row * S + j)) >= dropout_p;
      g = keep ? g * drop_scale : 0.0f;
      d[j] = g;
    }
    dot += g * p[j];
  }
  dot = internal::BlockSum(dot, scratch);  // also orders the writes above before the reads
  for (int64_t j = threadIdx.x; j < S; j += blockDim.x) {
    d[j] = (j >= lo && j <= i) ? p[j] * (d[j] - dot) : 0.0f;
  }
}

}  // namespace

CudaStatus SplitQkv(const ExecContext& ctx, const AttentionShape& sh, const float* qkv,
                    float* q, float* k, float* v) {
  MXMACA_RETURN_IF_CUDA_ERROR(CheckShape(sh));
  const int64_t total = sh.b * sh.s * (sh.heads + 2 * sh.groups) * sh.head_dim;
  QkvLayoutKernel<false><<<internal::GridFor(total, kThreads), kThreads, 0, StreamOf(ctx)>>>(
      sh, qkv, nullptr, nullptr, nullptr, nullptr, q, k, v);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

CudaStatus MergeQkvGrad(const ExecContext& ctx, const AttentionShape& sh, const float* dq,
                        const float* dk, const float* dv, float* dqkv) {
  MXMACA_RETURN_IF_CUDA_ERROR(CheckShape(sh));
  const int64_t total = sh.b * sh.s * (sh.heads + 2 * sh.groups) * sh.head_dim;
  QkvLayoutKernel<true><<<internal::GridFor(total, kThreads), kThreads, 0, StreamOf(ctx)>>>(
      sh, nullptr, dqkv, dq, dk, dv, nullptr, nullptr, nullptr);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

CudaStatus HeadsToTokens(const ExecContext& ctx, const AttentionShape& sh, const float* o,
                         float* out) {
  MXMACA_RETURN_IF_CUDA_ERROR(CheckShape(sh));
  const int64_t total = sh.b * sh.s * sh.heads * sh.head_dim;
  HeadsTokensKernel<true><<<internal::GridFor(total, kThreads), kThreads, 0, StreamOf(ctx)>>>(
      sh, o, out);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

CudaStatus TokensToHeads(const ExecContext& ctx, const AttentionShape& sh, const float* in,
                         float* o) {
  MXMACA_RETURN_IF_CUDA_ERROR(CheckShape(sh));
  const int64_t total = sh.b * sh.s * sh.heads * sh.head_dim;
  HeadsTokensKernel<false><<<internal::GridFor(total, kThreads), kThreads, 0, StreamOf(ctx)>>>(
      sh, in, o);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

namespace {

CudaStatus AttentionForwardImpl(const ExecContext& ctx, GemmHandle& gemm,
                                const AttentionShape& sh, const float* q, const float* k,
                                const float* v, const int32_t* doc_start, float softmax_scale,
                                float dropout_p, internal::RngKeyArg key, float* probs,
                                float* o, float* scratch) {
  MXMACA_RETURN_IF_CUDA_ERROR(CheckShape(sh));
  MXMACA_CUDA_REQUIRE(dropout_p >= 0.0f && dropout_p < 1.0f,
                      "AttentionForward: dropout_p must be in [0, 1)");
  MXMACA_CUDA_REQUIRE(dropout_p == 0.0f || scratch != nullptr,
                      "AttentionForward: dropout needs a [B, NH, S, S] scratch buffer");
  const int64_t S = sh.s, D = sh.head_dim, hpg = sh.heads / sh.groups;
  const int64_t batch = sh.b * sh.groups, rows = hpg * S;
  // scores = scale * q_g [HPG*S, D] . k_g^T [D, S] -> probs [HPG*S, S] per (b, group).
  MXMACA_RETURN_IF_CUDA_ERROR(GemmStridedBatched(ctx, gemm, false, true, rows, S, D,
                                                 softmax_scale, q, D, rows * D, k, D, S * D,
                                                 0.0f, probs, S, rows * S, batch));
  float* dropped = dropout_p > 0.0f ? scratch : nullptr;
  SoftmaxForwardKernel<<<static_cast<unsigned>(sh.b * sh.heads * S), kThreads, 0,
                         StreamOf(ctx)>>>(sh, doc_start, dropout_p,
                                          1.0f / (1.0f - dropout_p), key, probs,
                                          dropped);
  MXMACA_CUDA_CHECK_LAUNCH();
  // o_g [HPG*S, D] = P_g [HPG*S, S] . v_g [S, D].
  const float* pv = dropped != nullptr ? dropped : probs;
  MXMACA_RETURN_IF_CUDA_ERROR(GemmStridedBatched(ctx, gemm, false, false, rows, D, S, 1.0f,
                                                 pv, S, rows * S, v, D, S * D, 0.0f, o, D,
                                                 rows * D, batch));
  return CudaStatus();
}

CudaStatus AttentionBackwardImpl(const ExecContext& ctx, GemmHandle& gemm,
                                 const AttentionShape& sh, const float* q, const float* k,
                                 const float* v, const float* probs, const int32_t* doc_start,
                                 float softmax_scale, float dropout_p, internal::RngKeyArg key,
                                 const float* dout, float* dq, float* dk, float* dv,
                                 float* scratch) {
  MXMACA_RETURN_IF_CUDA_ERROR(CheckShape(sh));
  MXMACA_CUDA_REQUIRE(dropout_p >= 0.0f && dropout_p < 1.0f,
                      "AttentionBackward: dropout_p must be in [0, 1)");
  MXMACA_CUDA_REQUIRE(scratch != nullptr,
                      "AttentionBackward: needs a [B, NH, S, S] scratch buffer");
  const int64_t S = sh.s, D = sh.head_dim, hpg = sh.heads / sh.groups;
  const int64_t batch = sh.b * sh.groups, rows = hpg * S;
  const float drop_scale = 1.0f / (1.0f - dropout_p);
  // dv_g [S, D] = dropout(P_g)^T [S, HPG*S] . dout_g [HPG*S, D] (sums the group's heads).
  const float* pd = probs;
  if (dropout_p > 0.0f) {
    const int64_t total = sh.b * sh.heads * S * S;
    DropProbsKernel<<<internal::GridFor(total, kThreads), kThreads, 0, StreamOf(ctx)>>>(
        sh, total, probs, dropout_p, drop_scale, key, scratch);
    MXMACA_CUDA_CHECK_LAUNCH();
    pd = scratch;
  }
  MXMACA_RETURN_IF_CUDA_ERROR(GemmStridedBatched(ctx, gemm, true, false, S, D, rows, 1.0f,
                                                 pd, S, rows * S, dout, D, rows * D, 0.0f,
                                                 dv, D, S * D, batch));
  // dP' = dout_g [HPG*S, D] . v_g^T [D, S] -> scratch; then dS in place.
  MXMACA_RETURN_IF_CUDA_ERROR(GemmStridedBatched(ctx, gemm, false, true, rows, S, D, 1.0f,
                                                 dout, D, rows * D, v, D, S * D, 0.0f,
                                                 scratch, S, rows * S, batch));
  SoftmaxBackwardKernel<<<static_cast<unsigned>(sh.b * sh.heads * S), kThreads, 0,
                          StreamOf(ctx)>>>(sh, doc_start, probs, dropout_p, drop_scale,
                                           key, scratch);
  MXMACA_CUDA_CHECK_LAUNCH();
  // dq_g = scale * dS_g [HPG*S, S] . k_g [S, D]; dk_g = scale * dS_g^T . q_g.
  MXMACA_RETURN_IF_CUDA_ERROR(GemmStridedBatched(ctx, gemm, false, false, rows, D, S,
                                                 softmax_scale, scratch, S, rows * S, k, D,
                                                 S * D, 0.0f, dq, D, rows * D, batch));
  MXMACA_RETURN_IF_CUDA_ERROR(GemmStridedBatched(ctx, gemm, true, false, S, D, rows,
                                                 softmax_scale, scratch, S, rows * S, q, D,
                                                 rows * D, 0.0f, dk, D, S * D, batch));
  return CudaStatus();
}

}  // namespace

CudaStatus AttentionForward(const ExecContext& ctx, GemmHandle& gemm,
                            const AttentionShape& sh, const float* q, const float* k,
                            const float* v, const int32_t* doc_start, float softmax_scale,
                            float dropout_p, RngKey key, float* probs, float* o,
                            float* scratch) {
  return AttentionForwardImpl(ctx, gemm, sh, q, k, v, doc_start, softmax_scale, dropout_p,
                              internal::ByValue(key), probs, o, scratch);
}

CudaStatus AttentionForward(const ExecContext& ctx, GemmHandle& gemm,
                            const AttentionShape& sh, const float* q, const float* k,
                            const float* v, const int32_t* doc_start, float softmax_scale,
                            float dropout_p, const RngKey* device_key, float* probs, float* o,
                            float* scratch) {
  MXMACA_CUDA_REQUIRE(dropout_p == 0.0f || device_key != nullptr,
                      "AttentionForward: no device key");
  return AttentionForwardImpl(ctx, gemm, sh, q, k, v, doc_start, softmax_scale, dropout_p,
                              internal::ByPointer(device_key), probs, o, scratch);
}

CudaStatus AttentionBackward(const ExecContext& ctx, GemmHandle& gemm,
                             const AttentionShape& sh, const float* q, const float* k,
                             const float* v, const float* probs, const int32_t* doc_start,
                             float softmax_scale, float dropout_p, RngKey key,
                             const float* dout, float* dq, float* dk, float* dv,
                             float* scratch) {
  return AttentionBackwardImpl(ctx, gemm, sh, q, k, v, probs, doc_start, softmax_scale,
                               dropout_p, internal::ByValue(key), dout, dq, dk, dv, scratch);
}

CudaStatus AttentionBackward(const ExecContext& ctx, GemmHandle& gemm,
                             const AttentionShape& sh, const float* q, const float* k,
                             const float* v, const float* probs, const int32_t* doc_start,
                             float softmax_scale, float dropout_p, const RngKey* device_key,
                             const float* dout, float* dq, float* dk, float* dv,
                             float* scratch) {
  MXMACA_CUDA_REQUIRE(dropout_p == 0.0f || device_key != nullptr,
                      "AttentionBackward: no device key");
  return AttentionBackwardImpl(ctx, gemm, sh, q, k, v, probs, doc_start, softmax_scale,
                               dropout_p, internal::ByPointer(device_key), dout, dq, dk, dv,
                               scratch);
}

}  // namespace mxmaca::kernels::cuda
