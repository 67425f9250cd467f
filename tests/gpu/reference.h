// tests/gpu/reference.h: fp64 references of the kernels/cuda ops, in plain C++ (no CUDA,
// no Abseil, no oneDNN), for the self-contained GPU check binary (gpu_check.cc).
//
// Each reference takes the same fp32 inputs as the kernel and returns fp64 results
// computed from the definitions in kernels/cpu/*.h (the contract both backends
// implement). `bf16` flags give the bf16-emulated reference: the GEMM operands rounded to
// bf16 (round-to-nearest-even) before an exact (fp64) product — the best a bf16-input,
// fp32-accumulate kernel can do, used to bound the bf16 paths' error. reference_test.cc
// checks these references against kernels/cpu on the build machine.
// Shapes and layouts: as kernels/cpu (row-major; attention q [B, NH, S, D], k, v
// [B, NG, S, D], probs [B, NH, S, S]).
#ifndef MXMACA_TESTS_GPU_REFERENCE_H_
#define MXMACA_TESTS_GPU_REFERENCE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/philox.h"

namespace mxmaca::gpu_check {

using Vec = std::vector<double>;

// Bf16Round: x rounded to bf16 (RNE) and back (kernels/cpu/bf16.h's RoundToBf16).
inline float Bf16Round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0) return x;
  u += 0x7FFFu + ((u >> 16) & 1u);
  u &= 0xFFFF0000u;
  float y;
  std::memcpy(&y, &u, sizeof(y));
  return y;
}

// Op: the value a GEMM sees for an fp32 input, optionally rounded to bf16.
inline double Op(double x, bool bf16) {
  return bf16 ? static_cast<double>(Bf16Round(static_cast<float>(x))) : x;
}

// RelErr: norm-wise relative error ||x - ref||_2 / ||ref||_2 (absolute if ref is 0).
template <typename T>
double RelErr(const std::vector<T>& x, const Vec& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(x[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Gemm: C[m, n] = alpha op(A) op(B) + beta C0 (row-major, ldc = n), fp64.
inline Vec Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                const float* a, int64_t lda, const float* b, int64_t ldb, double beta,
                const float* c0, bool bf16) {
  Vec c(m * n, 0.0);
  std::vector<double> arow(k);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) arow[p] = Op(ta ? a[p * lda + i] : a[i * lda + p], bf16);
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += arow[p] * Op(tb ? b[j * ldb + p] : b[p * ldb + j], bf16);
      c[i * n + j] = alpha * s + (beta != 0 && c0 != nullptr ? beta * c0[i * n + j] : 0.0);
    }
  }
  return c;
}

// Scalar activations (kernels/cpu/elementwise.h), fp64.
inline double Gelu(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
inline double GeluGrad(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}
inline double GeluTanh(double x) {
  const double u = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1 + std::tanh(u));
}
inline double GeluTanhGrad(double x) {
  const double u = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
  const double du = std::sqrt(2 / M_PI) * (1 + 3 * 0.044715 * x * x);
  const double t = std::tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du;
}
inline double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// DropKeep: the dropout mask of element `index` (kernels/philox.h), shared by the
// element-wise and attention dropout.
inline bool DropKeep(kernels::RngKey key, uint64_t index, float p) {
  return kernels::UniformAt(key, index) >= p;
}

// LayerNorm / RMSNorm (kernels/cpu/norm.h), fp64. rms selects RMSNorm (mean 0, no beta).
inline void NormForward(bool rms, const float* x, const float* gamma, const float* beta,
                        double eps, int64_t n, int64_t h, Vec* y, Vec* mean, Vec* rstd) {
  y->assign(n * h, 0);
  mean->assign(n, 0);
  rstd->assign(n, 0);
  for (int64_t r = 0; r < n; ++r) {
    double mu = 0, ss = 0;
    if (!rms) {
      for (int64_t c = 0; c < h; ++c) mu += x[r * h + c];
      mu /= h;
    }
    for (int64_t c = 0; c < h; ++c) ss += (x[r * h + c] - mu) * (x[r * h + c] - mu);
    const double rs = 1 / std::sqrt(ss / h + eps);
    for (int64_t c = 0; c < h; ++c) {
      (*y)[r * h + c] = (x[r * h + c] - mu) * rs * gamma[c] + (!rms && beta ? beta[c] : 0.0);
    }
    (*mean)[r] = mu;
    (*rstd)[r] = rs;
  }
}

// NormBackward: dx, dgamma, dbeta of NormForward, using the given fp32 stash (mean,
// rstd) as the kernels do.
inline void NormBackward(bool rms, const float* dy, const float* x, const float* gamma,
                         const float* mean, const float* rstd, int64_t n, int64_t h, Vec* dx,
                         Vec* dgamma, Vec* dbeta) {
  dx->assign(n * h, 0);
  dgamma->assign(h, 0);
  dbeta->assign(h, 0);
  for (int64_t r = 0; r < n; ++r) {
    const double mu = rms ? 0.0 : mean[r], rs = rstd[r];
    double sg = 0, sgx = 0;
    for (int64_t c = 0; c < h; ++c) {
      const double g = static_cast<double>(dy[r * h + c]) * gamma[c];
      const double xh = (x[r * h + c] - mu) * rs;
      sg += g;
      sgx += g * xh;
      (*dgamma)[c] += static_cast<double>(dy[r * h + c]) * xh;
      (*dbeta)[c] += dy[r * h + c];
    }
    for (int64_t c = 0; c < h; ++c) {
      const double g = static_cast<double>(dy[r * h + c]) * gamma[c];
      const double xh = (x[r * h + c] - mu) * rs;
      (*dx)[r * h + c] = rs * (g - (rms ? 0.0 : sg / h) - xh * sgx / h);
    }
  }
}

// CrossEntropy (kernels/cpu/cross_entropy.h), fp64: loss, lse [n]; dlogits [n, vp]
// from the fp32 lse given (as the kernel receives it).
inline void CrossEntropyForward(const float* logits, const int32_t* t, int64_t n, int64_t vp,
                                int64_t v, Vec* loss, Vec* lse) {
  loss->assign(n, 0);
  lse->assign(n, 0);
  for (int64_t i = 0; i < n; ++i) {
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < v; ++c) m = std::max(m, static_cast<double>(logits[i * vp + c]));
    for (int64_t c = 0; c < v; ++c) s += std::exp(logits[i * vp + c] - m);
    (*lse)[i] = m + std::log(s);
    (*loss)[i] = (t[i] >= 0 && t[i] < v) ? (*lse)[i] - logits[i * vp + t[i]] : (*lse)[i];
  }
}

inline Vec CrossEntropyBackward(const float* logits, const int32_t* t, const float* lse,
                                const float* dloss, int64_t n, int64_t vp, int64_t v) {
  Vec d(n * vp, 0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < v; ++c) {
      d[i * vp + c] = dloss[i] * (std::exp(static_cast<double>(logits[i * vp + c]) - lse[i]) -
                                  (c == t[i] ? 1.0 : 0.0));
    }
  }
  return d;
}

// AdamWStep (kernels/cpu/adamw.h) in fp64, `steps` steps from step0 with the same grad.
inline void AdamW(Vec* p, const float* g, Vec* m, Vec* v, double lr, double b1, double b2,
                  double eps, double wd, int64_t step) {
  const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
  for (size_t i = 0; i < p->size(); ++i) {
    (*p)[i] *= 1 - lr * wd;
    (*m)[i] = (*m)[i] * b1 + (1 - b1) * g[i];
    (*v)[i] = (*v)[i] * b2 + (1 - b2) * g[i] * static_cast<double>(g[i]);
    (*p)[i] -= lr / bc1 * (*m)[i] / (std::sqrt((*v)[i]) / std::sqrt(bc2) + eps);
  }
}

// Rope (kernels/cpu/rope.h) in fp64 on x [B, NH, S, D]; sign +1 forward, -1 backward.
// The angle keeps Megatron's fp32 definition (fp32 inv_freq, fp32 product); the rest is
// fp64.
inline Vec Rope(const float* x, const int32_t* positions, int64_t b, int64_t s, int64_t heads,
                int64_t d, int64_t rotary_dim, float base, double sign) {
  Vec y(x, x + b * heads * s * d);
  const int64_t half = rotary_dim / 2;
  for (int64_t bh = 0; bh < b * heads; ++bh) {
    for (int64_t si = 0; si < s; ++si) {
      const float pos = static_cast<float>(positions[(bh / heads) * s + si]);
      double* r = y.data() + (bh * s + si) * d;
      for (int64_t j = 0; j < half; ++j) {
        const float inv = 1.0f / std::pow(base, static_cast<float>(2 * j) / static_cast<float>(rotary_dim));
        const double angle = static_cast<double>(pos * inv);
        const double c = std::cos(angle), sn = sign * std::sin(angle);
        const double x1 = r[j], x2 = r[j + half];
        r[j] = x1 * c - x2 * sn;
        r[j + half] = x2 * c + x1 * sn;
      }
    }
  }
  return y;
}

// AttentionShape as kernels/cpu/attention.h.
struct AttnShape {
  int64_t b, s, heads, groups, d;
};

inline int64_t KeyLo(const int32_t* doc_start, int64_t b, int64_t s, int64_t i) {
  if (doc_start == nullptr) return 0;
  return std::min<int64_t>(std::max<int64_t>(doc_start[b * s + i], 0), i);
}

// AttentionForward: probs (before dropout), o and (if given) lse = log sum_j exp(scaled
// score), fp64; bf16 rounds the GEMM operands (q, k; dropped probs, v).
inline void AttentionForward(const AttnShape& sh, const float* q, const float* k,
                             const float* v, const int32_t* doc_start, double scale,
                             float dropout_p, kernels::RngKey key, bool bf16, Vec* probs,
                             Vec* o, Vec* lse = nullptr) {
  const int64_t S = sh.s, D = sh.d, hpg = sh.heads / sh.groups;
  probs->assign(sh.b * sh.heads * S * S, 0);
  o->assign(sh.b * sh.heads * S * D, 0);
  if (lse != nullptr) lse->assign(sh.b * sh.heads * S, 0);
  const double drop_scale = dropout_p > 0 ? static_cast<double>(1.0f / (1.0f - dropout_p)) : 1;
  std::vector<double> row(S);
  for (int64_t b = 0; b < sh.b; ++b) {
    for (int64_t h = 0; h < sh.heads; ++h) {
      const int64_t g = h / hpg;
      const float* qh = q + (b * sh.heads + h) * S * D;
      const float* kg = k + (b * sh.groups + g) * S * D;
      const float* vg = v + (b * sh.groups + g) * S * D;
      for (int64_t i = 0; i < S; ++i) {
        const int64_t lo = KeyLo(doc_start, b, S, i);
        const int64_t rowid = (b * sh.heads + h) * S + i;
        double m = -INFINITY;
        for (int64_t j = lo; j <= i; ++j) {
          double s = 0;
          for (int64_t e = 0; e < D; ++e) s += Op(qh[i * D + e], bf16) * Op(kg[j * D + e], bf16);
          row[j] = s * scale;
          m = std::max(m, row[j]);
        }
        double sum = 0;
        for (int64_t j = lo; j <= i; ++j) sum += std::exp(row[j] - m);
        if (lse != nullptr) (*lse)[rowid] = m + std::log(sum);
        for (int64_t j = lo; j <= i; ++j) {
          const double pr = std::exp(row[j] - m) / sum;
          (*probs)[rowid * S + j] = pr;
          double pd = pr;
          if (dropout_p > 0) {
            pd = DropKeep(key, rowid * S + j, dropout_p) ? pr * drop_scale : 0.0;
          }
          pd = Op(pd, bf16);
          for (int64_t e = 0; e < D; ++e) (*o)[rowid * D + e] += pd * Op(vg[j * D + e], bf16);
        }
      }
    }
  }
}

// AttentionBackward: dq, dk, dv from dout and the fp32 probs given (the kernel's input).
inline void AttentionBackward(const AttnShape& sh, const float* q, const float* k,
                              const float* v, const float* probs, const int32_t* doc_start,
                              double scale, float dropout_p, kernels::RngKey key,
                              const float* dout, bool bf16, Vec* dq, Vec* dk, Vec* dv) {
  const int64_t S = sh.s, D = sh.d, hpg = sh.heads / sh.groups;
  dq->assign(sh.b * sh.heads * S * D, 0);
  dk->assign(sh.b * sh.groups * S * D, 0);
  dv->assign(sh.b * sh.groups * S * D, 0);
  const double drop_scale = dropout_p > 0 ? static_cast<double>(1.0f / (1.0f - dropout_p)) : 1;
  std::vector<double> dp(S), ds(S);
  for (int64_t b = 0; b < sh.b; ++b) {
    for (int64_t h = 0; h < sh.heads; ++h) {
      const int64_t g = h / hpg;
      const float* qh = q + (b * sh.heads + h) * S * D;
      const float* kg = k + (b * sh.groups + g) * S * D;
      const float* vg = v + (b * sh.groups + g) * S * D;
      const float* doh = dout + (b * sh.heads + h) * S * D;
      double* dqh = dq->data() + (b * sh.heads + h) * S * D;
      double* dkg = dk->data() + (b * sh.groups + g) * S * D;
      double* dvg = dv->data() + (b * sh.groups + g) * S * D;
      for (int64_t i = 0; i < S; ++i) {
        const int64_t lo = KeyLo(doc_start, b, S, i);
        const int64_t rowid = (b * sh.heads + h) * S + i;
        const float* p = probs + rowid * S;
        double dot = 0;
        for (int64_t j = lo; j <= i; ++j) {
          double s = 0;
          for (int64_t e = 0; e < D; ++e) s += Op(doh[i * D + e], bf16) * Op(vg[j * D + e], bf16);
          const bool keep = dropout_p <= 0 || DropKeep(key, rowid * S + j, dropout_p);
          dp[j] = keep ? s * drop_scale : 0.0;
          const double pd = keep ? p[j] * drop_scale : 0.0;
          for (int64_t e = 0; e < D; ++e) dvg[j * D + e] += Op(pd, bf16) * Op(doh[i * D + e], bf16);
          dot += dp[j] * p[j];
        }
        for (int64_t j = lo; j <= i; ++j) {
          ds[j] = Op(p[j] * (dp[j] - dot), bf16);
          for (int64_t e = 0; e < D; ++e) {
            dqh[i * D + e] += scale * ds[j] * Op(kg[j * D + e], bf16);
            dkg[j * D + e] += scale * ds[j] * Op(qh[i * D + e], bf16);
          }
        }
      }
    }
  }
}

}  // namespace mxmaca::gpu_check

#endif  // MXMACA_TESTS_GPU_REFERENCE_H_
