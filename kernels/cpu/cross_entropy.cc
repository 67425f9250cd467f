// kernels/cpu/cross_entropy.cc: see cross_entropy.h.
#include "kernels/cpu/cross_entropy.h"

#include <cmath>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vec_math.h"

namespace mxmaca::kernels::cpu {

void CrossEntropyForward(const ExecContext& ctx, const float* logits,
                         const int32_t* targets, int64_t n, int64_t vp, int64_t v,
                         float* loss, float* lse) {
  ParallelForRows(ctx, n, v, [&](int64_t i) {
    const float* x = logits + i * vp;
    const float m = MaxOf(x, v);
    const float s = ExpShiftSum(x, m, v, nullptr);
    const float l = m + std::log(s);
    lse[i] = l;
    const int32_t t = targets[i];
    loss[i] = (t >= 0 && t < v) ? l - x[t] : l;  // no target in this shard: lse only
  });
}

void CrossEntropyBackward(const ExecContext& ctx, const float* logits,
                          const int32_t* targets, const float* lse, const float* dloss,
                          int64_t n, int64_t vp, int64_t v, float* dlogits) {
  ParallelForRows(ctx, n, vp, [&](int64_t i) {
    const float* x = logits + i * vp;
    float* d = dlogits + i * vp;
    const int64_t t = targets[i];
    const bool has_target = t >= 0 && t < v;
    const float g = dloss[i];
    // softmax_c = exp(x_c - lse) written straight into d (in place when d == x).
    ExpShiftSum(x, lse[i], v, d);
    const float p_target = has_target ? d[t] : 0.0f;
    for (int64_t c = 0; c < v; ++c) d[c] *= g;
    if (has_target) d[t] = g * (p_target - 1.0f);
    for (int64_t c = v; c < vp; ++c) d[c] = 0.0f;
  });
}

void CrossEntropyRowMax(const ExecContext& ctx, const float* logits, int64_t n, int64_t vp,
                        int64_t v, float* row_max) {
  if (v == 0) {
    for (int64_t i = 0; i < n; ++i) row_max[i] = -INFINITY;
    return;
  }
  ParallelForRows(ctx, n, v, [&](int64_t i) { row_max[i] = MaxOf(logits + i * vp, v); });
}

void CrossEntropySumExp(const ExecContext& ctx, const float* logits, const float* shift,
                        int64_t n, int64_t vp, int64_t v, float* sum_exp) {
  if (v == 0) {
    for (int64_t i = 0; i < n; ++i) sum_exp[i] = 0.0f;
    return;
  }
  ParallelForRows(ctx, n, v, [&](int64_t i) {
    sum_exp[i] = ExpShiftSum(logits + i * vp, shift[i], v, nullptr);
  });
}

}  // namespace mxmaca::kernels::cpu
