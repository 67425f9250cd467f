// kernels/cpu/embedding.h: token embedding lookup and its gradient on CPU.
//
// N = tokens, H = hidden, V = rows of the table (vocab shard). ids: int32 [N];
// table, dtable: [V, H]; out, dout: [N, H]. fp32.
// The caller guarantees 0 <= ids[i] < V (Megatron's VocabParallelEmbedding masks
// out-of-shard ids and zeroes their rows before calling into the lookup).
#ifndef MXMACA_KERNELS_CPU_EMBEDDING_H_
#define MXMACA_KERNELS_CPU_EMBEDDING_H_

#include <cstdint>

#include "kernels/exec_context.h"

namespace mxmaca::kernels::cpu {

// EmbeddingForward: out[i, :] = table[ids[i], :] (accumulate == false) or
// out[i, :] += table[ids[i], :] (accumulate == true, e.g. adding position embeddings).
void EmbeddingForward(const ExecContext& ctx, const int32_t* ids, int64_t n,
                      const float* table, int64_t h, float* out, bool accumulate);

// EmbeddingBackward: dtable[ids[i], :] += dout[i, :] for i = 0, 1, ..., n-1 — each
// table row receives its contributions in increasing i (deterministic, same bits for any
// thread count: threads split the hidden dimension, never the token order).
void EmbeddingBackward(const ExecContext& ctx, const int32_t* ids, int64_t n,
                       const float* dout, int64_t h, float* dtable);

// VocabShardEmbeddingForward: the lookup of one vocabulary shard of Megatron's
// VocabParallelEmbedding (megatron/core/tensor_parallel/layers.py): the table holds rows
// [vocab_start, vocab_start + vocab_rows) of the full vocabulary; token i with
// vocab_start <= ids[i] < vocab_start + vocab_rows gets out[i, :] (+)=
// table[ids[i] - vocab_start, :]; any other id (another shard's, or invalid) gets a zero
// row (accumulate == false) or leaves out[i, :] unchanged (accumulate == true). The sum
// over shards (all-reduce) is the full embedding. ids are never used out of bounds.
void VocabShardEmbeddingForward(const ExecContext& ctx, const int32_t* ids, int64_t n,
                                const float* table, int64_t vocab_start, int64_t vocab_rows,
                                int64_t h, float* out, bool accumulate);

// VocabShardEmbeddingBackward: dtable[ids[i] - vocab_start, :] += dout[i, :] for the
// tokens whose id lies in this shard, in increasing i (deterministic); others skipped.
void VocabShardEmbeddingBackward(const ExecContext& ctx, const int32_t* ids, int64_t n,
                                 const float* dout, int64_t vocab_start, int64_t vocab_rows,
                                 int64_t h, float* dtable);

}  // namespace mxmaca::kernels::cpu

#endif  // MXMACA_KERNELS_CPU_EMBEDDING_H_
