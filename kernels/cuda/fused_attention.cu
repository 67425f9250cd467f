// kernels/cuda/fused_attention.cu: see fused_attention.h.
//
// Thread layout (256 threads): thread t = 16 * tr + tc owns, in a 64 x 64 score tile,
// rows 4 tr .. 4 tr + 3 and columns tc, tc + 16, tc + 32, tc + 48; in a 64 x D output
// tile, rows 4 tr .. 4 tr + 3 and columns tc + 16 k (k < D / 16). The 16 threads sharing
// tr sit in one half-warp, so row reductions are 4 xor-shuffles. Shared-memory rows of K,
// V, Q and dout are padded to D + 1 floats so that 16 different rows hit 16 banks.
#include "kernels/cuda/fused_attention.h"

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/device_util.cuh"

namespace mxmaca::kernels::cuda {
namespace {

constexpr int kBr = 64;      // query rows per tile
constexpr int kBc = 64;      // keys per tile
constexpr int kThreads = 256;
constexpr int kLdp = kBc + 1;  // padded row of a score tile

__device__ __forceinline__ int64_t RowLo(const int32_t* doc_start, int64_t b, int64_t s,
                                         int64_t i) {
  if (doc_start == nullptr) return 0;
  int64_t lo = doc_start[b * s + i];
  lo = lo < 0 ? 0 : lo;
  return lo > i ? i : lo;
}

// acc[i][j] += sum_e A[r0 + i][e] * B[c0 + 16 j][e] (A, B in shared memory).
template <int D>
__device__ __forceinline__ void TileDotNT(const float* A, int lda, const float* B, int ldb,
                                          int r0, int c0, float acc[4][4]) {
#pragma unroll 4
  for (int e = 0; e < D; ++e) {
    float a[4], b[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = A[(r0 + i) * lda + e];
#pragma unroll
    for (int j = 0; j < 4; ++j) b[j] = B[(c0 + 16 * j) * ldb + e];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
  }
}

// Loads rows [r0, r0 + rows_in_tile) of a [S, D] matrix into shared [rows][ld], zeros
// past S.
template <int D>
__device__ __forceinline__ void LoadTile(const float* src, int64_t r0, int64_t s, int rows,
                                         float* dst, int ld) {
  for (int idx = threadIdx.x; idx < rows * D; idx += blockDim.x) {
    const int r = idx / D, e = idx % D;
    dst[r * ld + e] = (r0 + r < s) ? src[(r0 + r) * D + e] : 0.0f;
  }
}

__device__ __forceinline__ float HalfWarpMax(float v) {
  for (int o = 8; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float HalfWarpSum(float v) {
  for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

struct DropParams {
  float p, scale;
  uint64_t seed, stream;
  const RngKey* device = nullptr;  // when set, the key is read from here as the kernel starts
};

// ResolveKey: a kernel's first statement: the key from device memory (internal::RngKeyArg).
__device__ __forceinline__ void ResolveKey(DropParams& dp) {
  if (dp.device != nullptr) {
    dp.seed = dp.device->seed;
    dp.stream = dp.device->stream;
  }
}

__device__ __forceinline__ bool Keep(const DropParams& dp, int64_t index) {
  return dp.p <= 0.0f ||
         internal::UniformAt(dp.seed, dp.stream, static_cast<uint64_t>(index)) >= dp.p;
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    FusedForwardKernel(AttentionShape sh, const float* q, const float* k, const float* v,
                       const int32_t* doc_start, float scale, DropParams drop, float* o,
                       float* lse) {
  ResolveKey(drop);
  constexpr int kLd = D + 1, kCols = D / 16;
  extern __shared__ float smem[];
  float* qs = smem;               // [kBr][kLd]
  float* ks = qs + kBr * kLd;     // [kBc][kLd]
  float* vs = ks + kBc * kLd;     // [kBc][kLd]
  float* ps = vs + kBc * kLd;     // [kBr][kLdp]
  __shared__ int64_t tile_lo;
  const int t = threadIdx.x, tr = t / 16, tc = t % 16;
  const int64_t S = sh.s, bh = blockIdx.y, b = bh / sh.heads, h = bh % sh.heads;
  const int64_t g = h / (sh.heads / sh.groups);
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kBr;
  const float* kg = k + (b * sh.groups + g) * S * D;
  const float* vg = v + (b * sh.groups + g) * S * D;
  LoadTile<D>(q + bh * S * D, q0, S, kBr, qs, kLd);
  if (t == 0) {
    int64_t lo = q0;
    for (int r = 0; r < kBr && q0 + r < S; ++r) {
      const int64_t l = RowLo(doc_start, b, S, q0 + r);
      lo = l < lo ? l : lo;
    }
    tile_lo = lo;
  }
  int64_t row[4], lo[4];
  float m[4], l[4], acc[4][kCols];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    row[i] = q0 + 4 * tr + i;
    lo[i] = row[i] < S ? RowLo(doc_start, b, S, row[i]) : 0;
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[i][c] = 0.0f;
  }
  __syncthreads();
  const int64_t last = (q0 + kBr - 1 < S - 1) ? q0 + kBr - 1 : S - 1;
  for (int64_t k0 = (tile_lo / kBc) * kBc; k0 <= last; k0 += kBc) {
    __syncthreads();  // the previous tile's ks, vs, ps are no longer read
    LoadTile<D>(kg, k0, S, kBc, ks, kLd);
    LoadTile<D>(vg, k0, S, kBc, vs, kLd);
    __syncthreads();
    float s[4][4] = {};
    TileDotNT<D>(qs, kLd, ks, kLd, 4 * tr, tc, s);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t col = k0 + tc + 16 * j;
        const bool valid = row[i] < S && col <= row[i] && col >= lo[i];
        s[i][j] = valid ? s[i][j] * scale : -INFINITY;
        mx = fmaxf(mx, s[i][j]);
      }
      const float m_new = fmaxf(m[i], HalfWarpMax(mx));
      const float shift = m_new == -INFINITY ? 0.0f : m_new;
      const float alpha = expf(m[i] - shift);  // m[i] = -inf: 0
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float p = expf(s[i][j] - shift);  // masked: exp(-inf) = 0
        sum += p;
        const int64_t col = k0 + tc + 16 * j;
        const bool keep =
            p == 0.0f || Keep(drop, DropoutMaskRow(sh, bh * S + row[i]) * S + col);
        ps[(4 * tr + i) * kLdp + tc + 16 * j] = keep ? p * drop.scale : 0.0f;
      }
      l[i] = l[i] * alpha + HalfWarpSum(sum);
      m[i] = m_new;
#pragma unroll
      for (int c = 0; c < kCols; ++c) acc[i][c] *= alpha;
    }
    __syncthreads();
#pragma unroll 4
    for (int c = 0; c < kBc; ++c) {
      float p[4], vv[kCols];
#pragma unroll
      for (int i = 0; i < 4; ++i) p[i] = ps[(4 * tr + i) * kLdp + c];
#pragma unroll
      for (int cc = 0; cc < kCols; ++cc) vv[cc] = vs[c * kLd + tc + 16 * cc];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int cc = 0; cc < kCols; ++cc) acc[i][cc] += p[i] * vv[cc];
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (row[i] >= S) continue;
    const float inv = 1.0f / l[i];
#pragma unroll
    for (int c = 0; c < kCols; ++c) o[(bh * S + row[i]) * D + tc + 16 * c] = acc[i][c] * inv;
    if (tc == 0) lse[bh * S + row[i]] = m[i] + logf(l[i]);
  }
}

// delta[r] = sum_e dout[r, e] * o[r, e]: one warp per row.
__global__ void DeltaKernel(int64_t rows, int d, const float* dout, const float* o,
                            float* delta) {
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (warp >= rows) return;
  float s = 0.0f;
  for (int e = lane; e < d; e += 32) s += dout[warp * d + e] * o[warp * d + e];
  s = internal::WarpSum(s);
  if (lane == 0) delta[warp] = s;
}

// Scores tile -> (dropped P, dS) for one (query tile, key tile) pair; used by both
// backward kernels. s holds q.k, dp holds dout.v for the thread's 4 x 4 entries.
__device__ __forceinline__ void SoftmaxGradTile(const AttentionShape& sh, int64_t bh,
                                                int64_t b, int64_t q0, int64_t k0, int tr,
                                                int tc, const int32_t* doc_start,
                                                float scale, const DropParams& drop,
                                                const float* ls, const float* dl,
                                                float s[4][4], float dp[4][4], float* pd_out,
                                                float* ds_out) {
  const int64_t S = sh.s;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = 4 * tr + i;
    const int64_t row = q0 + r;
    const int64_t lo = row < S ? RowLo(doc_start, b, S, row) : 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = tc + 16 * j;
      const int64_t col = k0 + c;
      const bool valid = row < S && col <= row && col >= lo;
      const float p = valid ? expf(s[i][j] * scale - ls[r]) : 0.0f;
      const bool keep =
          !valid || Keep(drop, DropoutMaskRow(sh, bh * S + row) * S + col);
      const float dpd = keep ? dp[i][j] * drop.scale : 0.0f;
      if (pd_out != nullptr) pd_out[r * kLdp + c] = keep ? p * drop.scale : 0.0f;
      ds_out[r * kLdp + c] = p * (dpd - dl[r]);
    }
  }
}

// dk, dv for one key tile of one (b, group): loops over the group's heads and the query
// tiles that can see the key tile.
template <int D>
__global__ void __launch_bounds__(kThreads)
    FusedBackwardKvKernel(AttentionShape sh, const float* q, const float* k, const float* v,
                          const float* dout, const float* lse, const float* delta,
                          const int32_t* doc_start, float scale, DropParams drop, float* dk,
                          float* dv) {
  ResolveKey(drop);
  constexpr int kLd = D + 1, kCols = D / 16;
  extern __shared__ float smem[];
  float* ks = smem;               // [kBc][kLd]
  float* vs = ks + kBc * kLd;     // [kBc][kLd]
  float* qs = vs + kBc * kLd;     // [kBr][kLd]
  float* dos = qs + kBr * kLd;    // [kBr][kLd]
  float* ps = dos + kBr * kLd;    // [kBr][kLdp]
  float* dss = ps + kBr * kLdp;   // [kBr][kLdp]
  __shared__ float ls[kBr], dl[kBr];
  const int t = threadIdx.x, tr = t / 16, tc = t % 16;
  const int64_t S = sh.s, hpg = sh.heads / sh.groups;
  const int64_t bg = blockIdx.y, b = bg / sh.groups, g = bg % sh.groups;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kBc;
  LoadTile<D>(k + bg * S * D, k0, S, kBc, ks, kLd);
  LoadTile<D>(v + bg * S * D, k0, S, kBc, vs, kLd);
  float adk[4][kCols] = {}, adv[4][kCols] = {};
  for (int64_t hh = 0; hh < hpg; ++hh) {
    const int64_t bh = b * sh.heads + g * hpg + hh;
    for (int64_t q0 = (k0 / kBr) * kBr; q0 < S; q0 += kBr) {
      __syncthreads();
      LoadTile<D>(q + bh * S * D, q0, S, kBr, qs, kLd);
      LoadTile<D>(dout + bh * S * D, q0, S, kBr, dos, kLd);
      for (int r = t; r < kBr; r += blockDim.x) {
        ls[r] = q0 + r < S ? lse[bh * S + q0 + r] : 0.0f;
        dl[r] = q0 + r < S ? delta[bh * S + q0 + r] : 0.0f;
      }
      __syncthreads();
      float s[4][4] = {}, dp[4][4] = {};
      TileDotNT<D>(qs, kLd, ks, kLd, 4 * tr, tc, s);
      TileDotNT<D>(dos, kLd, vs, kLd, 4 * tr, tc, dp);
      SoftmaxGradTile(sh, bh, b, q0, k0, tr, tc, doc_start, scale, drop, ls, dl, s, dp, ps, dss);
      __syncthreads();
      // dv[c] += sum_r Pd[r][c] dout[r]; dk[c] += sum_r dS[r][c] q[r] (c = 4 tr + i).
#pragma unroll 2
      for (int r = 0; r < kBr; ++r) {
        float pc[4], sc[4], dov[kCols], qv[kCols];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          pc[i] = ps[r * kLdp + 4 * tr + i];
          sc[i] = dss[r * kLdp + 4 * tr + i];
        }
#pragma unroll
        for (int cc = 0; cc < kCols; ++cc) {
          dov[cc] = dos[r * kLd + tc + 16 * cc];
          qv[cc] = qs[r * kLd + tc + 16 * cc];
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int cc = 0; cc < kCols; ++cc) {
            adv[i][cc] += pc[i] * dov[cc];
            adk[i][cc] += sc[i] * qv[cc];
          }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t key = k0 + 4 * tr + i;
    if (key >= S) continue;
#pragma unroll
    for (int cc = 0; cc < kCols; ++cc) {
      dk[(bg * S + key) * D + tc + 16 * cc] = scale * adk[i][cc];
      dv[(bg * S + key) * D + tc + 16 * cc] = adv[i][cc];
    }
  }
}

// dq for one query tile of one (b, head): loops over the key tiles it sees.
template <int D>
__global__ void __launch_bounds__(kThreads)
    FusedBackwardQKernel(AttentionShape sh, const float* q, const float* k, const float* v,
                         const float* dout, const float* lse, const float* delta,
                         const int32_t* doc_start, float scale, DropParams drop, float* dq) {
  ResolveKey(drop);
  constexpr int kLd = D + 1, kCols = D / 16;
  extern __shared__ float smem[];
  float* qs = smem;               // [kBr][kLd]
  float* dos = qs + kBr * kLd;    // [kBr][kLd]
  float* ks = dos + kBr * kLd;    // [kBc][kLd]
  float* vs = ks + kBc * kLd;     // [kBc][kLd]
  float* dss = vs + kBc * kLd;    // [kBr][kLdp]
  __shared__ float ls[kBr], dl[kBr];
  __shared__ int64_t tile_lo;
  const int t = threadIdx.x, tr = t / 16, tc = t % 16;
  const int64_t S = sh.s, bh = blockIdx.y, b = bh / sh.heads, h = bh % sh.heads;
  const int64_t g = h / (sh.heads / sh.groups);
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kBr;
  const float* kg = k + (b * sh.groups + g) * S * D;
  const float* vg = v + (b * sh.groups + g) * S * D;
  LoadTile<D>(q + bh * S * D, q0, S, kBr, qs, kLd);
  LoadTile<D>(dout + bh * S * D, q0, S, kBr, dos, kLd);
  for (int r = t; r < kBr; r += blockDim.x) {
    ls[r] = q0 + r < S ? lse[bh * S + q0 + r] : 0.0f;
    dl[r] = q0 + r < S ? delta[bh * S + q0 + r] : 0.0f;
  }
  if (t == 0) {
    int64_t lo = q0;
    for (int r = 0; r < kBr && q0 + r < S; ++r) {
      const int64_t l = RowLo(doc_start, b, S, q0 + r);
      lo = l < lo ? l : lo;
    }
    tile_lo = lo;
  }
  float adq[4][kCols] = {};
  __syncthreads();
  const int64_t last = (q0 + kBr - 1 < S - 1) ? q0 + kBr - 1 : S - 1;
  for (int64_t k0 = (tile_lo / kBc) * kBc; k0 <= last; k0 += kBc) {
    __syncthreads();
    LoadTile<D>(kg, k0, S, kBc, ks, kLd);
    LoadTile<D>(vg, k0, S, kBc, vs, kLd);
    __syncthreads();
    float s[4][4] = {}, dp[4][4] = {};
    TileDotNT<D>(qs, kLd, ks, kLd, 4 * tr, tc, s);
    TileDotNT<D>(dos, kLd, vs, kLd, 4 * tr, tc, dp);
    SoftmaxGradTile(sh, bh, b, q0, k0, tr, tc, doc_start, scale, drop, ls, dl, s, dp, nullptr, dss);
    __syncthreads();
#pragma unroll 4
    for (int c = 0; c < kBc; ++c) {
      float sv[4], kv[kCols];
#pragma unroll
      for (int i = 0; i < 4; ++i) sv[i] = dss[(4 * tr + i) * kLdp + c];
#pragma unroll
      for (int cc = 0; cc < kCols; ++cc) kv[cc] = ks[c * kLd + tc + 16 * cc];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int cc = 0; cc < kCols; ++cc) adq[i][cc] += sv[i] * kv[cc];
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t row = q0 + 4 * tr + i;
    if (row >= S) continue;
#pragma unroll
    for (int cc = 0; cc < kCols; ++cc) dq[(bh * S + row) * D + tc + 16 * cc] = scale * adq[i][cc];
  }
}

CudaStatus CheckArgs(const AttentionShape& sh, float dropout_p, const char* op) {
  MXMACA_CUDA_REQUIRE(sh.b > 0 && sh.s > 0 && sh.heads > 0 && sh.groups > 0 &&
                          sh.heads % sh.groups == 0,
                      std::string(op) + ": shape must be positive with heads % groups == 0");
  MXMACA_CUDA_REQUIRE(sh.head_dim == 32 || sh.head_dim == 64 || sh.head_dim == 128,
                      std::string(op) + ": head_dim must be 32, 64 or 128, got " +
                          std::to_string(sh.head_dim));
  MXMACA_CUDA_REQUIRE(dropout_p >= 0.0f && dropout_p < 1.0f,
                      std::string(op) + ": dropout_p must be in [0, 1)");
  MXMACA_CUDA_REQUIRE(sh.b * sh.heads < 65536 && sh.b * sh.groups < 65536,
                      std::string(op) + ": B * NH must be < 65536 (grid y)");
  return CudaStatus();
}

DropParams MakeDrop(float p, RngKey key) {
  return DropParams{p, p > 0.0f ? 1.0f / (1.0f - p) : 1.0f, key.seed, key.stream, nullptr};
}
DropParams MakeDrop(float p, const RngKey* device_key) {
  return DropParams{p, p > 0.0f ? 1.0f / (1.0f - p) : 1.0f, 0, 0, device_key};
}

template <int D>
CudaStatus Forward(const ExecContext& ctx, const AttentionShape& sh, const float* q,
                   const float* k, const float* v, const int32_t* doc_start, float scale,
                   DropParams drop, float* o, float* lse) {
  constexpr int kLd = D + 1;
  const size_t smem = sizeof(float) * (kBr * kLd + 2 * kBc * kLd + kBr * kLdp);
  MXMACA_CUDA_CHECK(cudaFuncSetAttribute(FusedForwardKernel<D>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>((sh.s + kBr - 1) / kBr),
                  static_cast<unsigned>(sh.b * sh.heads));
  FusedForwardKernel<D><<<grid, kThreads, smem, StreamOf(ctx)>>>(sh, q, k, v, doc_start,
                                                                 scale, drop, o, lse);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

template <int D>
CudaStatus Backward(const ExecContext& ctx, const AttentionShape& sh, const float* q,
                    const float* k, const float* v, const float* o, const float* lse,
                    const int32_t* doc_start, float scale, DropParams drop,
                    const float* dout, float* dq, float* dk, float* dv, float* delta) {
  constexpr int kLd = D + 1;
  const cudaStream_t stream = StreamOf(ctx);
  const int64_t rows = sh.b * sh.heads * sh.s;
  DeltaKernel<<<static_cast<unsigned>((rows * 32 + 255) / 256), 256, 0, stream>>>(
      rows, D, dout, o, delta);
  MXMACA_CUDA_CHECK_LAUNCH();
  const size_t smem_kv = sizeof(float) * (2 * kBc * kLd + 2 * kBr * kLd + 2 * kBr * kLdp);
  MXMACA_CUDA_CHECK(cudaFuncSetAttribute(FusedBackwardKvKernel<D>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem_kv)));
  const dim3 grid_kv(static_cast<unsigned>((sh.s + kBc - 1) / kBc),
                     static_cast<unsigned>(sh.b * sh.groups));
  FusedBackwardKvKernel<D><<<grid_kv, kThreads, smem_kv, stream>>>(
      sh, q, k, v, dout, lse, delta, doc_start, scale, drop, dk, dv);
  MXMACA_CUDA_CHECK_LAUNCH();
  const size_t smem_q = sizeof(float) * (2 * kBr * kLd + 2 * kBc * kLd + kBr * kLdp);
  MXMACA_CUDA_CHECK(cudaFuncSetAttribute(FusedBackwardQKernel<D>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem_q)));
  const dim3 grid_q(static_cast<unsigned>((sh.s + kBr - 1) / kBr),
                    static_cast<unsigned>(sh.b * sh.heads));
  FusedBackwardQKernel<D><<<grid_q, kThreads, smem_q, stream>>>(
      sh, q, k, v, dout, lse, delta, doc_start, scale, drop, dq);
  MXMACA_CUDA_CHECK_LAUNCH();
  return CudaStatus();
}

}  // namespace

namespace {

// ForwardFor / BackwardFor: the head-dim dispatch of both key forms (CheckArgs first).
CudaStatus ForwardFor(const ExecContext& ctx, const AttentionShape& sh, const float* q,
                      const float* k, const float* v, const int32_t* doc_start,
                      float softmax_scale, const DropParams& drop, float* o, float* lse) {
  MXMACA_RETURN_IF_CUDA_ERROR(CheckArgs(sh, drop.p, "FusedAttentionForward"));
  switch (sh.head_dim) {
    case 32: return Forward<32>(ctx, sh, q, k, v, doc_start, softmax_scale, drop, o, lse);
    case 64: return Forward<64>(ctx, sh, q, k, v, doc_start, softmax_scale, drop, o, lse);
    default: return Forward<128>(ctx, sh, q, k, v, doc_start, softmax_scale, drop, o, lse);
  }
}

CudaStatus BackwardFor(const ExecContext& ctx, const AttentionShape& sh, const float* q,
                       const float* k, const float* v, const float* o, const float* lse,
                       const int32_t* doc_start, float softmax_scale, const DropParams& drop,
                       const float* dout, float* dq, float* dk, float* dv, float* delta) {
  MXMACA_RETURN_IF_CUDA_ERROR(CheckArgs(sh, drop.p, "FusedAttentionBackward"));
  switch (sh.head_dim) {
    case 32:
      return Backward<32>(ctx, sh, q, k, v, o, lse, doc_start, softmax_scale, drop, dout, dq,
                          dk, dv, delta);
    case 64:
      return Backward<64>(ctx, sh, q, k, v, o, lse, doc_start, softmax_scale, drop, dout, dq,
                          dk, dv, delta);
    default:
      return Backward<128>(ctx, sh, q, k, v, o, lse, doc_start, softmax_scale, drop, dout, dq,
                           dk, dv, delta);
  }
}

}  // namespace

CudaStatus FusedAttentionForward(const ExecContext& ctx, const AttentionShape& sh,
                                 const float* q, const float* k, const float* v,
                                 const int32_t* doc_start, float softmax_scale,
                                 float dropout_p, RngKey key, float* o, float* lse) {
  return ForwardFor(ctx, sh, q, k, v, doc_start, softmax_scale, MakeDrop(dropout_p, key), o,
                    lse);
}

CudaStatus FusedAttentionBackward(const ExecContext& ctx, const AttentionShape& sh,
                                  const float* q, const float* k, const float* v,
                                  const float* o, const float* lse, const int32_t* doc_start,
                                  float softmax_scale, float dropout_p, RngKey key,
                                  const float* dout, float* dq, float* dk, float* dv,
                                  float* delta) {
  return BackwardFor(ctx, sh, q, k, v, o, lse, doc_start, softmax_scale,
                     MakeDrop(dropout_p, key), dout, dq, dk, dv, delta);
}

CudaStatus FusedAttentionForward(const ExecContext& ctx, const AttentionShape& sh,
                                 const float* q, const float* k, const float* v,
                                 const int32_t* doc_start, float softmax_scale,
                                 float dropout_p, const RngKey* device_key, float* o,
                                 float* lse) {
  MXMACA_CUDA_REQUIRE(dropout_p == 0.0f || device_key != nullptr,
                      "FusedAttentionForward: no device key");
  return ForwardFor(ctx, sh, q, k, v, doc_start, softmax_scale,
                    MakeDrop(dropout_p, device_key), o, lse);
}

CudaStatus FusedAttentionBackward(const ExecContext& ctx, const AttentionShape& sh,
                                  const float* q, const float* k, const float* v,
                                  const float* o, const float* lse, const int32_t* doc_start,
                                  float softmax_scale, float dropout_p, const RngKey* device_key,
                                  const float* dout, float* dq, float* dk, float* dv,
                                  float* delta) {
  MXMACA_CUDA_REQUIRE(dropout_p == 0.0f || device_key != nullptr,
                      "FusedAttentionBackward: no device key");
  return BackwardFor(ctx, sh, q, k, v, o, lse, doc_start, softmax_scale,
                     MakeDrop(dropout_p, device_key), dout, dq, dk, dv, delta);
}

}  // namespace mxmaca::kernels::cuda
