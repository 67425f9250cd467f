// api/train/params_norm.cc: see params_norm.h.
#include "api/train/params_norm.h"

#include <algorithm>

#include "kernels/cpu/elementwise.h"

namespace mxmaca::api {

double RankParamsNormSquared(const kernels::ExecContext& exec, actors::StageProgram& program,
                             const std::vector<layers::DataParallelBuckets>& buckets,
                             int grad_group_rank) {
  double total = 0.0;
  for (int c = 0; c < program.num_chunks(); ++c) {
    const layers::ParameterStore& store = program.parameters(c);
    const layers::DataParallelBuckets& bs = buckets.at(c);
    for (int b = 0; b < bs.num_buckets(); ++b) {
      const layers::GradBucket shard = bs.ShardOf(b, grad_group_rank);
      for (int i : bs.TensorsOfBucket(b)) {
        const layers::GradBucket& t = bs.tensors[i];
        const int64_t begin = std::max(t.begin, shard.begin), end = std::min(t.end, shard.end);
        if (end <= begin || !program.counts_toward_grad_norm(c, i)) continue;
        total += kernels::cpu::SumSquares(exec, store.param(i) + (begin - t.begin), end - begin);
      }
    }
    const int64_t expert_begin = program.expert_region_begin(c);
    if (program.expert_data_parallel_rank(c) == 0 && expert_begin < store.arena_elements()) {
      layers::ParameterStore& mutable_store = program.parameters(c);
      total += kernels::cpu::SumSquares(exec, mutable_store.params_arena().data() + expert_begin,
                                        store.arena_elements() - expert_begin);
    }
  }
  return total;
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

}  // namespace mxmaca::api
