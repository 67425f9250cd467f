// kernels/cuda/embedding.h: token embedding lookup and its gradient on the GPU.
//
// The CUDA twin of kernels/cpu/embedding.h: N = tokens, H = hidden, V = table rows
// (vocab shard). ids: int32 [N] (device); table, dtable: [V, H]; out, dout: [N, H]; fp32
// device pointers. The caller guarantees 0 <= ids[i] < V for the unsharded calls (they
// are not checked: checking would need a host read of device data).
// Backward determinism: one thread per hidden column walks the tokens in increasing i,
// so every table row receives its contributions in token order — the CPU backend's order,
// hence the same bits as kernels/cpu. Parallelism is H threads, so it is a latency-bound
// kernel (fine for H >= 1024; see kernels/README.md).
#ifndef MXMACA_KERNELS_CUDA_EMBEDDING_H_
#define MXMACA_KERNELS_CUDA_EMBEDDING_H_

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/exec_context.h"

namespace mxmaca::kernels::cuda {

// EmbeddingForward: out[i, :] (+)= table[ids[i], :] (accumulate selects += ).
CudaStatus EmbeddingForward(const ExecContext& ctx, const int32_t* ids, int64_t n,
                            const float* table, int64_t h, float* out, bool accumulate);

// EmbeddingBackward: dtable[ids[i], :] += dout[i, :] for i = 0, 1, ..., n-1 in order.
CudaStatus EmbeddingBackward(const ExecContext& ctx, const int32_t* ids, int64_t n,
                             const float* dout, int64_t h, float* dtable);

// VocabShardEmbeddingForward: Megatron's VocabParallelEmbedding lookup for the shard
// holding rows [vocab_start, vocab_start + vocab_rows): ids inside get their row, others a
// zero row (accumulate == false) or no change (accumulate == true). Never reads out of
// bounds whatever the ids.
CudaStatus VocabShardEmbeddingForward(const ExecContext& ctx, const int32_t* ids,
                                      int64_t n, const float* table, int64_t vocab_start,
                                      int64_t vocab_rows, int64_t h, float* out,
                                      bool accumulate);

// VocabShardEmbeddingBackward: dtable[ids[i] - vocab_start, :] += dout[i, :] for the
// tokens of this shard, in increasing i; others skipped.
CudaStatus VocabShardEmbeddingBackward(const ExecContext& ctx, const int32_t* ids,
                                       int64_t n, const float* dout, int64_t vocab_start,
                                       int64_t vocab_rows, int64_t h, float* dtable);

}  // namespace mxmaca::kernels::cuda

#endif  // MXMACA_KERNELS_CUDA_EMBEDDING_H_
