// kernels/cpu/attention.cc: placeholder bodies (implementation in progress).
#include "kernels/cpu/attention.h"

namespace mxmaca::kernels::cpu {

void SplitQkv(const ExecContext& ctx, const AttentionShape& shape, const float* qkv,
              float* q, float* k, float* v) {}

void MergeQkvGrad(const ExecContext& ctx, const AttentionShape& shape, const float* dq,
                  const float* dk, const float* dv, float* dqkv) {}

void HeadsToTokens(const ExecContext& ctx, const AttentionShape& shape, const float* o,
                   float* out) {}

void TokensToHeads(const ExecContext& ctx, const AttentionShape& shape, const float* in,
                   float* o) {}

void AttentionForward(const ExecContext& ctx, const AttentionShape& shape, const float* q,
                      const float* k, const float* v, const int32_t* doc_start,
                      float softmax_scale, float dropout_p, RngKey key, float* probs,
                      float* o) {}

void AttentionBackward(const ExecContext& ctx, const AttentionShape& shape, const float* q,
                       const float* k, const float* v, const float* probs,
                       const int32_t* doc_start, float softmax_scale, float dropout_p,
                       RngKey key, const float* dout, float* dq, float* dk, float* dv) {}


}  // namespace mxmaca::kernels::cpu
