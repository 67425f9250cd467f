// api/train/params_norm.cc: see params_norm.h.
#include "api/train/params_norm.h"

#include <algorithm>

#include "kernels/cpu/elementwise.h"

namespace mxmaca::api {

namespace {

// ForEachCountedPiece: calls f(param, grad, n) for every counted piece of `program`'s
// parameters and gradients this rank owns (params_norm.h RankParamsNormSquared), in arena
// order, then for the expert region on expert-data-parallel rank 0.
template <typename F>
void ForEachCountedPiece(actors::StageProgram& program,
                         const std::vector<layers::DataParallelBuckets>& buckets,
                         int grad_group_rank, F f) {
  for (int c = 0; c < program.num_chunks(); ++c) {
    layers::ParameterStore& store = program.parameters(c);
    const layers::DataParallelBuckets& bs = buckets.at(c);
    for (int b = 0; b < bs.num_buckets(); ++b) {
      const layers::GradBucket shard = bs.ShardOf(b, grad_group_rank);
      for (int i : bs.TensorsOfBucket(b)) {
        const layers::GradBucket& t = bs.tensors[i];
        const int64_t begin = std::max(t.begin, shard.begin), end = std::min(t.end, shard.end);
        if (end <= begin || !program.counts_toward_grad_norm(c, i)) continue;
        f(store.param(i) + (begin - t.begin), store.grad(i) + (begin - t.begin), end - begin);
      }
    }
    const int64_t expert_begin = program.expert_region_begin(c);
    if (program.expert_data_parallel_rank(c) == 0 && expert_begin < store.arena_elements()) {
      f(store.params_arena().data() + expert_begin, store.grads_arena().data() + expert_begin,
        store.arena_elements() - expert_begin);
    }
  }
}

}  // namespace

double RankParamsNormSquared(const kernels::ExecContext& exec, actors::StageProgram& program,
                             const std::vector<layers::DataParallelBuckets>& buckets,
                             int grad_group_rank) {
  double total = 0.0;
  ForEachCountedPiece(program, buckets, grad_group_rank,
                      [&](const float* param, const float*, int64_t n) {
                        total += kernels::cpu::SumSquares(exec, param, n);
                      });
  return total;
}

int64_t RankGradZeros(actors::StageProgram& program,
                      const std::vector<layers::DataParallelBuckets>& buckets,
                      int grad_group_rank) {
  int64_t zeros = 0;
  ForEachCountedPiece(program, buckets, grad_group_rank,
                      [&](const float*, const float* grad, int64_t n) {
                        for (int64_t k = 0; k < n; ++k) zeros += grad[k] == 0.0f ? 1 : 0;
                      });
  return zeros;
}

std::function<double()> ParamsNormSquaredOf(const std::vector<StageRank>& ranks,
                                            int32_t context_parallel_size,
                                            const kernels::ExecContext& exec) {
  std::vector<StageRank> sorted = ranks;
  std::sort(sorted.begin(), sorted.end(),
            [](const StageRank& a, const StageRank& b) { return a.rank < b.rank; });
  const int32_t cp = std::max<int32_t>(1, context_parallel_size);
  return [sorted, cp, exec]() {
    double total = 0.0;
    for (const StageRank& r : sorted) {
      total += RankParamsNormSquared(exec, *r.program, r.buckets,
                                     r.data_parallel_rank * cp + r.context_parallel_rank);
    }
    return total;
  };
}

std::function<int64_t()> GradZerosOf(const std::vector<StageRank>& ranks,
                                     int32_t context_parallel_size) {
  const int32_t cp = std::max<int32_t>(1, context_parallel_size);
  return [ranks, cp]() {
    int64_t total = 0;
    for (const StageRank& r : ranks) {
      total +=
          RankGradZeros(*r.program, r.buckets, r.data_parallel_rank * cp + r.context_parallel_rank);
    }
    return total;
  };
}

}  // namespace mxmaca::api
