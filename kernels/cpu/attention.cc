// kernels/cpu/attention.cc: see attention.h.
//
// Forward: one work item per (b, h) pair, each single-threaded: scores = scale q k^T by a
// GEMM straight into the probs stash, masked softmax in place, optional dropout into a
// per-thread scratch, o = P' v by a second GEMM.
// Backward: one work item per (b, g) key/value group so that dk and dv of a group are
// summed over its heads in head order without cross-thread reduction.
// GEMMs are blocked by kBlock query rows / key columns and skip the blocks above the
// causal diagonal (see kBlock).
#include "kernels/cpu/attention.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/philox_avx2.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/philox.h"

namespace mxmaca::kernels::cpu {
namespace {

// Query rows (forward, dq) and key columns (dk, dv) are processed in blocks of this
// many, so that each GEMM covers only the causally reachable part: about (S/kBlock + 1) /
// (2 S/kBlock) of the full [S, S] work (56% at S = 256). Fixed, so results do not depend
// on the thread count.
constexpr int64_t kBlock = 64;

// Allowed key range [lo, i] of query i in sequence b.
inline int64_t KeyLo(const int32_t* doc_start, int64_t b, int64_t s, int64_t i) {
  if (doc_start == nullptr) return 0;
  const int64_t lo = doc_start[b * s + i];
  return std::min<int64_t>(std::max<int64_t>(lo, 0), i);
}

// Runs f(item) for item in [0, count) over ctx.num_threads threads, static schedule,
// with OpenMP's nested thread count 1 in each worker (the GEMMs inside stay
// single-threaded).
template <typename F>
void ForEachItem(const ExecContext& ctx, int64_t count, F&& f) {
  const int nt = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(ctx.num_threads, count)));
  if (nt == 1) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    for (int64_t i = 0; i < count; ++i) f(i);
    omp_set_num_threads(saved);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    omp_set_num_threads(1);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < count; ++i) f(i);
  }
}

}  // namespace

void SplitQkv(const ExecContext& ctx, const AttentionShape& sh, const float* qkv, float* q,
              float* k, float* v) {
  const int64_t hpg = sh.heads / sh.groups, d = sh.head_dim;
  const int64_t width = sh.groups * (hpg + 2) * d;
  ParallelForRows(ctx, sh.b * sh.s, width, [&](int64_t t) {
    const int64_t b = t / sh.s, s = t % sh.s;
    const float* src = qkv + t * width;
    for (int64_t g = 0; g < sh.groups; ++g) {
      const float* grp = src + g * (hpg + 2) * d;
      for (int64_t j = 0; j < hpg; ++j) {
        std::memcpy(q + ((b * sh.heads + g * hpg + j) * sh.s + s) * d, grp + j * d,
                    d * sizeof(float));
      }
      std::memcpy(k + ((b * sh.groups + g) * sh.s + s) * d, grp + hpg * d, d * sizeof(float));
      std::memcpy(v + ((b * sh.groups + g) * sh.s + s) * d, grp + (hpg + 1) * d,
                  d * sizeof(float));
    }
  });
}

void MergeQkvGrad(const ExecContext& ctx, const AttentionShape& sh, const float* dq,
                  const float* dk, const float* dv, float* dqkv) {
  const int64_t hpg = sh.heads / sh.groups, d = sh.head_dim;
  const int64_t width = sh.groups * (hpg + 2) * d;
  ParallelForRows(ctx, sh.b * sh.s, width, [&](int64_t t) {
    const int64_t b = t / sh.s, s = t % sh.s;
    float* dst = dqkv + t * width;
    for (int64_t g = 0; g < sh.groups; ++g) {
      float* grp = dst + g * (hpg + 2) * d;
      for (int64_t j = 0; j < hpg; ++j) {
        std::memcpy(grp + j * d, dq + ((b * sh.heads + g * hpg + j) * sh.s + s) * d,
                    d * sizeof(float));
      }
      std::memcpy(grp + hpg * d, dk + ((b * sh.groups + g) * sh.s + s) * d, d * sizeof(float));
      std::memcpy(grp + (hpg + 1) * d, dv + ((b * sh.groups + g) * sh.s + s) * d,
                  d * sizeof(float));
    }
  });
}

void HeadsToTokens(const ExecContext& ctx, const AttentionShape& sh, const float* o,
                   float* out) {
  const int64_t d = sh.head_dim;
  ParallelForRows(ctx, sh.b * sh.s, sh.heads * d, [&](int64_t t) {
    const int64_t b = t / sh.s, s = t % sh.s;
    for (int64_t h = 0; h < sh.heads; ++h) {
      std::memcpy(out + t * sh.heads * d + h * d, o + ((b * sh.heads + h) * sh.s + s) * d,
                  d * sizeof(float));
    }
  });
}

void TokensToHeads(const ExecContext& ctx, const AttentionShape& sh, const float* in,
                   float* o) {
  const int64_t d = sh.head_dim;
  ParallelForRows(ctx, sh.b * sh.s, sh.heads * d, [&](int64_t t) {
    const int64_t b = t / sh.s, s = t % sh.s;
    for (int64_t h = 0; h < sh.heads; ++h) {
      std::memcpy(o + ((b * sh.heads + h) * sh.s + s) * d, in + t * sh.heads * d + h * d,
                  d * sizeof(float));
    }
  });
}

namespace {

// DropoutRowHead: the (b, h) index of the dropout mask in the full [B, heads] grid
// (AttentionShape::dropout_heads / dropout_head_offset); b * NH + h by default.
inline int64_t DropoutRowHead(const AttentionShape& sh, int64_t b, int64_t h) {
  if (sh.dropout_heads == 0) return b * sh.heads + h;
  return b * sh.dropout_heads + sh.dropout_head_offset + h;
}

}  // namespace

void AttentionForward(const ExecContext& ctx, const AttentionShape& sh, const float* q,
                      const float* k, const float* v, const int32_t* doc_start,
                      float softmax_scale, float dropout_p, RngKey key, float* probs,
                      float* o) {
  const int64_t S = sh.s, D = sh.head_dim, hpg = sh.heads / sh.groups;
  ExecContext one = ctx;
  one.num_threads = 1;
  const float drop_scale = dropout_p > 0.0f ? 1.0f / (1.0f - dropout_p) : 1.0f;
  ForEachItem(ctx, sh.b * sh.heads, [&](int64_t bh) {
    const int64_t b = bh / sh.heads, h = bh % sh.heads, g = h / hpg;
    const float* qh = q + bh * S * D;
    const float* kg = k + (b * sh.groups + g) * S * D;
    const float* vg = v + (b * sh.groups + g) * S * D;
    float* P = probs + bh * S * S;
    float* Pd = dropout_p > 0.0f ? ThreadScratch(S * S, 2) : P;
    for (int64_t i0 = 0; i0 < S; i0 += kBlock) {
      const int64_t i1 = std::min(S, i0 + kBlock);
      // scores[i0:i1, 0:i1] = scale * q[i0:i1] k[0:i1]^T (causal: later keys unused)
      Gemm(one, false, true, i1 - i0, i1, D, softmax_scale, qh + i0 * D, D, kg, D, 0.0f,
           P + i0 * S, S);
      for (int64_t i = i0; i < i1; ++i) {
        float* row = P + i * S;
        const int64_t lo = KeyLo(doc_start, b, S, i), len = i - lo + 1;
        const float m = MaxOf(row + lo, len);
        const float sum = ExpShiftSum(row + lo, m, len, row + lo);
        for (int64_t j = lo; j <= i; ++j) row[j] = row[j] / sum;
        std::fill(row, row + lo, 0.0f);
        std::fill(row + i + 1, row + S, 0.0f);
        if (dropout_p > 0.0f) {
          float* dst = Pd + i * S;
          std::fill(dst, dst + lo, 0.0f);
          DropoutRow(row, dst, lo, i + 1, dropout_p, drop_scale, key,
                     static_cast<uint64_t>((DropoutRowHead(sh, b, h) * S + i) * S));
          std::fill(dst + i + 1, dst + S, 0.0f);
        }
      }
      // o[i0:i1] = P'[i0:i1, 0:i1] v[0:i1]
      Gemm(one, false, false, i1 - i0, D, i1, 1.0f, Pd + i0 * S, S, vg, D, 0.0f,
           o + (bh * S + i0) * D, D);
    }
  });
}

void AttentionBackward(const ExecContext& ctx, const AttentionShape& sh, const float* q,
                       const float* k, const float* v, const float* probs,
                       const int32_t* doc_start, float softmax_scale, float dropout_p,
                       RngKey key, const float* dout, float* dq, float* dk, float* dv) {
  const int64_t S = sh.s, D = sh.head_dim, hpg = sh.heads / sh.groups;
  ExecContext one = ctx;
  one.num_threads = 1;
  const float drop_scale = dropout_p > 0.0f ? 1.0f / (1.0f - dropout_p) : 1.0f;
  ForEachItem(ctx, sh.b * sh.groups, [&](int64_t bg) {
    const int64_t b = bg / sh.groups, g = bg % sh.groups;
    const float* kg = k + bg * S * D;
    const float* vg = v + bg * S * D;
    float* dkg = dk + bg * S * D;
    float* dvg = dv + bg * S * D;
    float* dP = ThreadScratch(S * S, 2);
    float* Pd = ThreadScratch(dropout_p > 0.0f ? S * S : 1, 3);
    for (int64_t j = 0; j < hpg; ++j) {
      const int64_t h = g * hpg + j, bh = b * sh.heads + h;
      const float* P = probs + bh * S * S;
      const float* qh = q + bh * S * D;
      const float* doh = dout + bh * S * D;
      const float beta = j == 0 ? 0.0f : 1.0f;  // first head overwrites, later add
      for (int64_t i0 = 0; i0 < S; i0 += kBlock) {
        const int64_t i1 = std::min(S, i0 + kBlock);
        // dP'[i0:i1, 0:i1] = dout[i0:i1] v[0:i1]^T (gradient w.r.t. dropped probs)
        Gemm(one, false, true, i1 - i0, i1, D, 1.0f, doh + i0 * D, D, vg, D, 0.0f,
             dP + i0 * S, S);
        for (int64_t i = i0; i < i1; ++i) {
          float* drow = dP + i * S;
          const float* prow = P + i * S;
          const int64_t lo = KeyLo(doc_start, b, S, i);
          if (dropout_p > 0.0f) {
            // The forward's mask, regenerated once for both uses: P' = P keep/(1-p)
            // for the dv GEMM, dP = dP' keep/(1-p).
            const uint64_t row_base =
                static_cast<uint64_t>((DropoutRowHead(sh, b, h) * S + i) * S);
            float* pd = Pd + i * S;
            std::fill(pd, pd + lo, 0.0f);
            DropoutRow2(prow, pd, drow, drow, lo, i + 1, dropout_p, drop_scale, key, row_base);
            std::fill(pd + i + 1, pd + S, 0.0f);
          }
          // dS = P * (dP - sum_j dP_j P_j) on the allowed keys, 0 elsewhere.
          const float dot =
              LaneSum(i - lo + 1, [&](int64_t t) { return drow[lo + t] * prow[lo + t]; });
          for (int64_t c = lo; c <= i; ++c) drow[c] = prow[c] * (drow[c] - dot);
          std::fill(drow, drow + lo, 0.0f);
          std::fill(drow + i + 1, drow + S, 0.0f);
        }
        // dq[i0:i1] = scale dS[i0:i1, 0:i1] k[0:i1]
        Gemm(one, false, false, i1 - i0, D, i1, softmax_scale, dP + i0 * S, S, kg, D, 0.0f,
             dq + (bh * S + i0) * D, D);
      }
      const float* Pdrop = dropout_p > 0.0f ? Pd : P;
      for (int64_t j0 = 0; j0 < S; j0 += kBlock) {
        const int64_t j1 = std::min(S, j0 + kBlock);
        // Keys [j0, j1) only receive from queries i >= j0 (causal).
        // dv[j0:j1] (+)= P'[j0:S, j0:j1]^T dout[j0:S]
        Gemm(one, true, false, j1 - j0, D, S - j0, 1.0f, Pdrop + j0 * S + j0, S,
             doh + j0 * D, D, beta, dvg + j0 * D, D);
        // dk[j0:j1] (+)= scale dS[j0:S, j0:j1]^T q[j0:S]
        Gemm(one, true, false, j1 - j0, D, S - j0, softmax_scale, dP + j0 * S + j0, S,
             qh + j0 * D, D, beta, dkg + j0 * D, D);
      }
    }
  });
}

}  // namespace mxmaca::kernels::cpu
