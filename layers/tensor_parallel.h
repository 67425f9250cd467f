// layers/tensor_parallel.h: tensor (TP) and sequence (SP) parallelism of the GPT layers —
// the context a stage's TP rank computes with, the blocking collectives over its TP group,
// Megatron's region mappings, the per-rank split of every tensor and the config checks.
//
// Source: megatron/core/tensor_parallel/layers.py (ColumnParallelLinear,
// RowParallelLinear, VocabParallelEmbedding), mappings.py (the region mappings),
// cross_entropy.py (_VocabParallelCrossEntropy), transformer/attention.py (GQA split by
// query groups); Shoeybi et al. 2019 (Megatron-LM), Korthikanti et al. 2022 (SP).
//
// Threading contract. The helpers below BLOCK the calling thread until the collective's
// `done` fires (the CPU analogue of a stream waiting on an event). They are called from a
// TP rank's F/B/W, and every TP rank's F/B/W runs on its OWN thread (the runtime gives each
// rank's compute strand its own thread when tp > 1; tests use one std::thread per rank), so
// a waiting rank never holds the thread a peer needs to post its part. Members must call
// the same helpers in the same order (the Communicator's matching rule); GptStage does, as
// long as every TP rank of a stage runs the same F/B/W sequence on the same micro-batches.
// With size == 1 nothing is communicated and every helper is a copy or a no-op: the TP-1
// code path is the single-device path, bit for bit.
//
// The split (t = b s tokens, h hidden, np/ng query heads/groups, hn head dim, f ffn, VP
// padded vocab, r = TP rank, p = TP size):
//   linear_qkv   ColumnParallelLinear by query groups: rank r holds groups
//                [r ng/p, (r+1) ng/p), i.e. rows [r (np+2ng)hn/p, ...) of [(np+2ng)hn, h]
//                (each group's rows are np/ng query heads, k, v: one contiguous block).
//   linear_proj  RowParallelLinear: columns [r np hn/p, ...) of [h, np hn]; bias replicated.
//   linear_fc1   ColumnParallelLinear: rows [r f/p, ...) of [f, h]; with SwiGLU rows
//                [r f/p, ...) of gate AND of up, held as [gate_r; up_r]
//                (ParameterInfo::shard_chunks = 2).
//   linear_fc2   RowParallelLinear: columns [r f/p, ...) of [h, f]; bias replicated.
//   word embeddings / output_layer   rows [r VP/p, ...) of [VP, h] (VocabParallelEmbedding,
//                column-parallel output layer); VP must be divisible by p (Megatron pads
//                the vocabulary to a multiple of --make-vocab-size-divisible-by x TP).
//   norms, position embeddings, row-parallel biases: replicated.
// Column-parallel: identity forward (CopyToTensorParallelRegion), all-reduce of the input
// gradient in backward. Row-parallel: all-reduce of the output partial sums in forward
// (ReduceFromTensorParallelRegion), bias added after, once; identity in backward.
//
// Sequence parallelism. Activations between the TP regions (layer inputs/outputs, the
// residual stream, the norms, dropout) are sharded along the SEQUENCE: our [b, s, h]
// layout (row t = bi s + si) becomes [b, s/p, h] on each rank, rank r holding positions
// [r s/p, (r+1) s/p) of EVERY sequence — the tokens Megatron's [s, b, h] split gives rank
// r. Dropout masks stay keyed by the global element index (bi s + si) h + c.
// Column-parallel inputs are all-gathered (GatherFromSequenceParallelRegion), row-parallel
// outputs reduce-scattered (ReduceScatterToSequenceParallelRegion); backward uses the
// conjugates. Norm weight/bias gradients, computed from the local rows, are all-reduced
// across TP in W so every rank holds the same values. Row-parallel bias gradients are
// taken from the GATHERED output gradient (kept for W anyway, since dW = dY^T X needs all
// T rows), so they are complete and identical on every rank without an all-reduce
// (Megatron computes them from the local rows and all-reduces them).
// Deviations from Megatron that change no numerics: the word embedding is all-reduced and
// then scattered (Megatron reduce-scatters when there are no learned positions); the
// gathered norm outputs and output gradients are kept in the stash for W instead of being
// gathered again in backward (more activation memory under SP, fewer collectives).
#ifndef MXMACA_LAYERS_TENSOR_PARALLEL_H_
#define MXMACA_LAYERS_TENSOR_PARALLEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "layers/device/device_kernels.h"
#include "layers/gpt_config.h"
#include "layers/parameter_store.h"
#include "transport/communicator.h"
#include "transport/process_group.h"
#include "transport/rank_grid.h"

namespace mxmaca::layers {

// TensorParallelContext: one TP rank's view of its tensor-model-parallel group.
//   comm: the rank's endpoint (not owned; may be null when size == 1).
//   group: RankGrid::tensor_model_parallel_group() (rank_in_group == rank, size == size).
//   rank, size: tensor_model_parallel_rank / _world_size.
//   sequence_parallel: --sequence-parallel.
//   timeout: how long a blocking helper waits for its collective before it gives up with
//     DeadlineExceeded (a peer that never posts must not hang the job silently).
//   device: set when the tensors the helpers below take live in a device backend's memory
//     (layers/gpt_stage.h CreateOnDevice): each helper then copies its input to host
//     memory, runs there over the communicator and copies its output back (synchronous).
//     Until the collectives run on device buffers (NCCL), TP on a device passes through
//     the host this way. nullptr: host memory.
struct TensorParallelContext {
  transport::Communicator* comm = nullptr;
  transport::ProcessGroup group;
  int rank = 0;
  int size = 1;
  bool sequence_parallel = false;
  absl::Duration timeout = absl::Minutes(5);
  device::DeviceKernels* device = nullptr;

  // sp: sequence parallelism in effect (size > 1 and sequence_parallel).
  bool sp() const { return size > 1 && sequence_parallel; }
};

// TensorParallelContextFor: the context of the rank `view` describes: its
// tensor_model_parallel_group(), rank and world size, with `comm` as its endpoint.
TensorParallelContext TensorParallelContextFor(const transport::RankView& view,
                                               transport::Communicator* comm,
                                               bool sequence_parallel);

// GroupContext: a context for the blocking collectives below over any `group` (the MoE
// token group, the expert-data-parallel group, TP x CP x DP for the expert bias), with
// `comm` as this rank's endpoint: rank = group.rank_in_group, size = group.size(), no SP.
TensorParallelContext GroupContext(transport::Communicator* comm,
                                   const transport::ProcessGroup& group,
                                   absl::Duration timeout = absl::Minutes(5));

// ValidateTensorParallelContext: InvalidArgument when size < 1, rank outside [0, size),
// size > 1 without a communicator, or a group whose size / rank_in_group differ.
absl::Status ValidateTensorParallelContext(const TensorParallelContext& tp);

// ValidateTensorParallelConfig: InvalidArgument naming the flag and values when `config`
// cannot be split over `tp_size` ranks: --num-attention-heads, --num-query-groups (query
// groups), --ffn-hidden-size or the padded vocabulary not divisible by tp_size; with
// sequence parallelism, --seq-length not divisible by tp_size.
absl::Status ValidateTensorParallelConfig(const GptConfig& config, int tp_size,
                                          bool sequence_parallel);

// LocalLayerConfig: `config` with the per-rank sizes of a transformer layer: np/p heads,
// ng/p query groups, f/p ffn, kv_channels = hn fixed (so head_dim() is unchanged);
// qkv_size(), attention_projection_size() and fc1_size() then give the local widths.
// Everything else (seed, dropout, norms, h) is unchanged. tp_size == 1: `config` itself.
GptConfig LocalLayerConfig(const GptConfig& config, int tp_size);

// VocabShard: rows [start, start + rows) of the padded vocabulary held by TP rank `rank`
// (rows = VP / size), `real` = how many of them are real tokens (< V), in [0, rows], and
// `softmax` = how many (leading) of them enter the cross-entropy's softmax: `real` by
// default, `rows` with config.softmax_over_padded_vocab (Megatron's padded softmax; the
// kernels' `v` argument, kernels/cpu/cross_entropy.h). Labels are real tokens, so a label
// is in this shard iff label - start is in [0, real).
struct VocabShard {
  int64_t start = 0, rows = 0, real = 0, softmax = 0;
};
VocabShard VocabShardOf(const GptConfig& config, int rank, int size);

// CountsTowardGradNorm: whether tensor `info`'s gradient enters the grad norm on TP rank
// `tp_rank`: a shard of a split tensor counts on every rank (the shards are disjoint); a
// tensor replicated across TP (norms, row-parallel biases, position embeddings) only on
// TP rank 0 (Megatron: param_is_not_tensor_parallel_duplicate).
bool CountsTowardGradNorm(const ParameterInfo& info, int tp_rank);

// ---- Blocking collectives over the TP group (no-ops / copies when size == 1). ----------
// Errors: the collective's error (mismatch, bad arguments) or DeadlineExceeded after
// tp.timeout, each naming the group, the op and the element count.

// AllReduceSum: data[i] = sum over TP ranks of data[i] (fp32, summed in group-rank order
// by the in-process backend), in place. data [count].
absl::Status AllReduceSum(const TensorParallelContext& tp, float* data, int64_t count);
// AllGather: recv [size * count] = every rank's send [count] in rank order.
absl::Status AllGather(const TensorParallelContext& tp, const float* send, float* recv,
                       int64_t count);
// ReduceScatterSum: recv [count] = sum over ranks of their send [size * count] block `rank`.
absl::Status ReduceScatterSum(const TensorParallelContext& tp, const float* send, float* recv,
                              int64_t count);

// ---- Megatron's region mappings (mappings.py), conjugate pairs side by side. ----------
// ReduceFromTensorParallelRegion: forward of a row-parallel linear (all-reduce of the
// partial products) and backward of CopyToTensorParallelRegion (all-reduce of the input
// gradient of a column-parallel linear). x [n], in place.
absl::Status ReduceFromTensorParallelRegion(const TensorParallelContext& tp, float* x, int64_t n);

// GatherFromSequenceParallelRegion: local [b, s/p, w] -> full [b, s, w] (all-gather along
// the sequence); also the backward of ReduceScatterToSequenceParallelRegion. `full` must
// not alias `local`. size == 1: a copy.
absl::Status GatherFromSequenceParallelRegion(const TensorParallelContext& tp, const float* local,
                                              int64_t b, int64_t s, int64_t w, float* full);
// ReduceScatterToSequenceParallelRegion: full partial sums [b, s, w] -> local [b, s/p, w]
// = this rank's positions of the sum over ranks; also the backward of
// GatherFromSequenceParallelRegion. size == 1: a copy.
absl::Status ReduceScatterToSequenceParallelRegion(const TensorParallelContext& tp,
                                                   const float* full, int64_t b, int64_t s,
                                                   int64_t w, float* local);
// ScatterToSequenceParallelRegion: full [b, s, w] (identical on every rank) -> local
// [b, s/p, w] (this rank's positions; no communication). Its backward is the gather.
// Errors: only the device copies' (tp.device).
absl::Status ScatterToSequenceParallelRegion(const TensorParallelContext& tp, const float* full,
                                             int64_t b, int64_t s, int64_t w, float* local);

// GatherFromTensorParallelRegion: local [n, w] (this rank's column block of a
// column-parallel output) -> full [n, p w] (blocks in rank order along the last dim).
absl::Status GatherFromTensorParallelRegion(const TensorParallelContext& tp, const float* local,
                                            int64_t n, int64_t w, float* full);

// SequenceShardIndexOffset: the global element index of the first element of row block
// `bi` of a local [b, s/p, w] tensor in the full [b, s, w] one: (bi s + rank s/p) w (for
// dropout masks). Without SP: bi s w.
int64_t SequenceShardIndexOffset(const TensorParallelContext& tp, int64_t bi, int64_t s, int64_t w);

}  // namespace mxmaca::layers

#endif  // MXMACA_LAYERS_TENSOR_PARALLEL_H_
