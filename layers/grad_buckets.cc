// layers/grad_buckets.cc: see grad_buckets.h.
#include "layers/grad_buckets.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/elementwise.h"

namespace mxmaca::layers {
namespace {

constexpr int64_t kShardAlignElements = 16;  // 64 bytes of fp32

// Intersect: [max(begins), min(ends)), empty (size() <= 0) when disjoint.
GradBucket Intersect(const GradBucket& a, const GradBucket& b) {
  return {std::max(a.begin, b.begin), std::min(a.end, b.end)};
}

}  // namespace

GradBucket DataParallelBuckets::ShardOf(int bucket, int rank) const {
  const GradBucket& b = buckets[bucket];
  const int64_t shard = b.size() / data_parallel_size;
  return {b.begin + rank * shard, b.begin + (rank + 1) * shard};
}

std::vector<int> DataParallelBuckets::BucketsOfTensor(int tensor) const {
  std::vector<int> out;
  const GradBucket& t = tensors[tensor];
  for (int b = 0; b < num_buckets(); ++b) {
    if (Intersect(t, buckets[b]).size() > 0) out.push_back(b);
  }
  return out;
}

std::vector<int> DataParallelBuckets::TensorsOfBucket(int bucket) const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(tensors.size()); ++i) {
    if (Intersect(tensors[i], buckets[bucket]).size() > 0) out.push_back(i);
  }
  return out;
}

absl::StatusOr<DataParallelBuckets> BuildDataParallelBuckets(const ParameterStore& store, int dp,
                                                             int64_t bucket_elements,
                                                             int64_t end) {
  if (dp < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("data-parallel buckets: data_parallel_size ", dp, " must be >= 1"));
  }
  if (!store.finalized()) {
    return absl::FailedPreconditionError(
        "data-parallel buckets: the parameter store is not finalized");
  }
  const int64_t unit = static_cast<int64_t>(dp) * kShardAlignElements;
  const int64_t arena = store.arena_elements();
  if (arena % unit != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data-parallel buckets: arena of ", arena, " elements is not a multiple of dp (", dp,
        ") * ", kShardAlignElements, " = ", unit, "; finalize the parameter store with "
        "Finalize(", unit, ") (it would pad to ", (arena + unit - 1) / unit * unit, ")"));
  }
  if (end >= 0 && (end > arena || end % unit != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("data-parallel buckets: end ", end,
                                                   " is past the arena (", arena,
                                                   ") or not a multiple of ", unit));
  }
  const int64_t covered = end >= 0 ? end : arena;
  DataParallelBuckets out;
  out.data_parallel_size = dp;
  out.arena_elements = arena;
  for (int i = 0; i < store.size(); ++i) {
    const ParameterInfo& info = store.info(i);
    out.tensors.push_back({info.arena_offset, info.arena_offset + info.numel});
  }
  const int64_t size =
      bucket_elements <= 0 ? std::max<int64_t>(covered, unit)
                           : (bucket_elements + unit - 1) / unit * unit;
  for (int64_t begin = 0; begin < covered; begin += size) {
    out.buckets.push_back({begin, std::min(covered, begin + size)});
  }
  return out;
}

std::vector<OptimizerTensor> DistributedOptimizerTensors(ParameterStore& store,
                                                         const DataParallelBuckets& buckets,
                                                         int rank) {
  std::vector<OptimizerTensor> out;
  float* params = store.params_arena().data();
  const float* grads = store.grads_arena().data();
  for (int b = 0; b < buckets.num_buckets(); ++b) {
    const GradBucket shard = buckets.ShardOf(b, rank);
    for (int i : buckets.TensorsOfBucket(b)) {
      const GradBucket piece = Intersect(buckets.tensors[i], shard);
      if (piece.size() <= 0) continue;
      const ParameterInfo& info = store.info(i);
      OptimizerTensor t;
      t.name = info.spec.name;
      t.param = params + piece.begin;
      t.grad = grads + piece.begin;
      t.numel = piece.size();
      t.apply_weight_decay = info.spec.weight_decay;
      t.flat_offset = piece.begin - info.arena_offset;
      t.is_decoupled_lr = IsEmbeddingOrOutputParameter(info.spec.name);
      out.push_back(std::move(t));
    }
  }
  return out;
}

std::vector<GradSpan> ShardGradSpans(ParameterStore& store, const DataParallelBuckets& buckets,
                                     int rank) {
  std::vector<GradSpan> out;
  float* grads = store.grads_arena().data();
  for (int b = 0; b < buckets.num_buckets(); ++b) {
    const GradBucket shard = buckets.ShardOf(b, rank);
    for (int i : buckets.TensorsOfBucket(b)) {
      const GradBucket piece = Intersect(buckets.tensors[i], shard);
      if (piece.size() > 0) out.push_back({grads + piece.begin, piece.size()});
    }
  }
  return out;
}

std::vector<GradBucket> ShardGradNormRanges(
    const ParameterStore& store, const DataParallelBuckets& buckets, int rank,
    const std::function<bool(const ParameterInfo&)>& counts) {
  std::vector<GradBucket> out;
  for (int b = 0; b < buckets.num_buckets(); ++b) {
    const GradBucket shard = buckets.ShardOf(b, rank);
    for (int i : buckets.TensorsOfBucket(b)) {
      const GradBucket piece = Intersect(buckets.tensors[i], shard);
      if (piece.size() <= 0 || !counts(store.info(i))) continue;
      out.push_back(piece);
    }
  }
  return out;
}

double ShardGradNormSquared(const kernels::ExecContext& ctx, const ParameterStore& store,
                            const DataParallelBuckets& buckets, int rank,
                            const std::function<bool(const ParameterInfo&)>& counts) {
  const float* grads = store.grads_arena().data();
  double total = 0.0;
  for (const GradBucket& r : ShardGradNormRanges(store, buckets, rank, counts)) {
    total += kernels::cpu::SumSquares(ctx, grads + r.begin, r.size());
  }
  return total;
}

}  // namespace mxmaca::layers
