// layers/grad_buckets.h: data-parallel gradient buckets over a stage's gradient arena, the
// shard of each bucket a DP rank owns, and the distributed optimizer's pieces.
//
// Megatron-Core: megatron/core/distributed/param_and_grad_buffer.py (one contiguous grad
// buffer cut into buckets; each bucket is all-reduced, or reduce-scattered under
// --use-distributed-optimizer, as soon as its gradients are final) and
// megatron/core/optimizer/distrib_optimizer.py (_build_gbuf_range_map: DP rank r owns the
// r-th of dp equal slices of every bucket, and optimises the intersection of each
// parameter with that slice, addressed by a flat range inside the parameter).
//
// Differences from Megatron, on purpose:
//   - Buckets are cut at fixed element counts, anywhere (also inside a tensor), rather than
//     at the first parameter boundary past --ddp-bucket-size; a tensor can therefore span
//     several buckets, and each of its pieces is final with the bucket it lies in.
//   - Buckets run in ascending arena order (Megatron lays parameters out in reverse so its
//     first bucket holds the last layers); the caller chooses the order it posts them in.
//   - Alignment is 16 elements (64 bytes) for tensors (ParameterStore) and dp * 16 for
//     buckets, so every shard starts on a 64-byte line (Megatron pads buckets to
//     lcm(dp, 128) elements and parameters to 64).
//
// Example: arena of 96 elements, dp = 2, bucket_elements = 40 -> bucket size rounded up to
// a multiple of dp * 16 = 32 -> buckets [0, 64), [64, 96); rank 0 owns [0, 32) and
// [64, 80), rank 1 owns [32, 64) and [80, 96).
#ifndef MXMACA_LAYERS_GRAD_BUCKETS_H_
#define MXMACA_LAYERS_GRAD_BUCKETS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/exec_context.h"
#include "layers/grad_clip.h"
#include "layers/optimizer.h"
#include "layers/parameter_store.h"

namespace mxmaca::layers {

// GradBucket: the arena elements [begin, end) (fp32 elements of the params/grads arenas).
struct GradBucket {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const GradBucket& o) const { return begin == o.begin && end == o.end; }
};

// DataParallelBuckets: the buckets of one stage's arena for a DP group of
// `data_parallel_size` ranks. Built by BuildDataParallelBuckets; plain data.
struct DataParallelBuckets {
  int data_parallel_size = 1;
  int64_t arena_elements = 0;        // ParameterStore::arena_elements()
  std::vector<GradBucket> buckets;   // ascending, contiguous, covering [0, end) (end: the
                                     // arena's, or BuildDataParallelBuckets' `end`);
                                     // each size() % (data_parallel_size * 16) == 0
  std::vector<GradBucket> tensors;   // tensor i's arena range [arena_offset, + numel)

  // num_buckets: buckets.size().
  int num_buckets() const { return static_cast<int>(buckets.size()); }

  // ShardOf: the part of bucket `bucket` that DP rank `rank` owns after a reduce-scatter
  // (and sends in the all-gather of updated parameters):
  // [begin + rank * len / dp, begin + (rank + 1) * len / dp), len = end - begin.
  // Requires 0 <= bucket < num_buckets() and 0 <= rank < dp (invariant, not checked).
  GradBucket ShardOf(int bucket, int rank) const;

  // BucketsOfTensor: the indices of the buckets overlapping tensor `tensor`'s arena range,
  // ascending (one or more consecutive buckets).
  std::vector<int> BucketsOfTensor(int tensor) const;

  // TensorsOfBucket: the indices of the tensors overlapping bucket `bucket`, ascending
  // (a bucket is final once every one of these has its last gradient contribution).
  std::vector<int> TensorsOfBucket(int bucket) const;
};

// BuildDataParallelBuckets: cuts the arena of a finalized `store` into buckets of
// round_up(bucket_elements, dp * 16) elements (Megatron's --ddp-bucket-size, in elements),
// the last one ending at the arena end; bucket_elements <= 0 gives one bucket. The arena
// length must be a multiple of dp * 16: finalize the store with
// Finalize(/*pad_to_multiple_of=*/dp * 16).
// Errors: InvalidArgument for dp < 1 or an arena of N elements with N % (dp * 16) != 0
// (the message names N, dp and the multiple to pad to); FailedPrecondition if the store is
// not finalized.
//
// end: the buckets cover [0, end) only (a multiple of dp * 16; < 0: the arena end) — a
// stage whose routed experts are reduced over another group keeps them after `end`
// (layers/gpt_stage.h "Expert region"). InvalidArgument for an end past the arena or not
// a multiple.
absl::StatusOr<DataParallelBuckets> BuildDataParallelBuckets(const ParameterStore& store, int dp,
                                                             int64_t bucket_elements,
                                                             int64_t end = -1);

// DistributedOptimizerTensors: the optimizer pieces DP rank `rank` updates: every
// non-empty intersection of a tensor with rank's shard of a bucket, in arena order (bucket
// by bucket), each with param / grad pointing into the store's arenas at the piece,
// numel = its length, the tensor's logical name and weight-decay flag, and flat_offset =
// its first element inside the tensor. Padding is in no piece. The union over ranks
// 0..dp-1 is every element of every tensor exactly once. Requires `buckets` built from
// `store` and 0 <= rank < dp (invariants).
std::vector<OptimizerTensor> DistributedOptimizerTensors(ParameterStore& store,
                                                         const DataParallelBuckets& buckets,
                                                         int rank);

// ShardGradSpans: the gradients of the same pieces as DistributedOptimizerTensors (every
// tensor, in arena order), for ClipGradsByTotalNorm on the shard a DP rank updates (Scale
// is elementwise, so clipping the pieces of every rank equals clipping whole tensors).
std::vector<GradSpan> ShardGradSpans(ParameterStore& store, const DataParallelBuckets& buckets,
                                     int rank);

// ShardGradNormRanges: the arena ranges ShardGradNormSquared sums, in its order: bucket
// by bucket, tensor by tensor of the bucket, the piece of each tensor `counts` selects
// that lies in DP rank `rank`'s shard (empty pieces left out). A backend that keeps the
// gradients elsewhere (GptStage::GradSumSquares on a device) sums the same ranges in the
// same order, so the norm has the same bits.
std::vector<GradBucket> ShardGradNormRanges(
    const ParameterStore& store, const DataParallelBuckets& buckets, int rank,
    const std::function<bool(const ParameterInfo&)>& counts);

// ShardGradNormSquared: sum of g^2 (fp64) over the gradient elements DP rank `rank` owns
// (ShardOf every bucket), counting only tensors with counts(store.info(i)) true (the
// caller leaves out, e.g., the last stage's tied copy of the word embeddings); the caller
// sums the dp results in rank order (Megatron: get_grad_norm_fp32 after the reduce).
// Summation order, fixed: buckets in order; inside a bucket's shard, the counted tensor
// pieces in arena order, each summed by kernels::cpu::SumSquares (blocks of 4096 from the
// piece's first element, 8 fp64 lanes) and added to the running fp64 total. It reads only
// the shard, so it gives the same bits whether the grads were all-reduced or
// reduce-scattered; it does not depend on ctx.num_threads.
double ShardGradNormSquared(const kernels::ExecContext& ctx, const ParameterStore& store,
                            const DataParallelBuckets& buckets, int rank,
                            const std::function<bool(const ParameterInfo&)>& counts);

}  // namespace mxmaca::layers

#endif  // MXMACA_LAYERS_GRAD_BUCKETS_H_
