// layers/context_parallel/cp_context.cc: see cp_context.h.
#include "layers/context_parallel/cp_context.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace mxmaca::layers::cp {

ContextParallelContext ContextParallelContextFor(const transport::RankView& view,
                                                 transport::Communicator* comm,
                                                 absl::Duration timeout) {
  ContextParallelContext cp;
  cp.comm = comm;
  cp.group = view.context_parallel_group();
  cp.rank = view.context_parallel_rank();
  cp.size = view.context_parallel_world_size();
  cp.timeout = timeout;
  return cp;
}

absl::Status ValidateContextParallelContext(const ContextParallelContext& cp) {
  if (cp.size < 1 || cp.rank < 0 || cp.rank >= cp.size) {
    return absl::InvalidArgumentError(absl::StrCat("context parallel: rank ", cp.rank,
                                                   " of size ", cp.size,
                                                   ", expected 0 <= rank < size"));
  }
  if (cp.size == 1) return absl::OkStatus();
  if (cp.comm == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("context parallel: size ", cp.size, " needs a communicator"));
  }
  if (cp.group.size() != cp.size || cp.group.rank_in_group != cp.rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "context parallel: the group has ", cp.group.size(), " ranks with this one at index ",
        cp.group.rank_in_group, ", the context says rank ", cp.rank, " of ", cp.size));
  }
  return absl::OkStatus();
}

std::vector<int32_t> CpRowPositions(const CpLayout& layout, int64_t rank, int64_t b) {
  const int64_t sl = layout.LocalSeq();
  std::vector<int32_t> pos(static_cast<size_t>(b * sl));
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t t = 0; t < sl; ++t) {
      pos[static_cast<size_t>(bi * sl + t)] = static_cast<int32_t>(layout.GlobalPosition(rank, t));
    }
  }
  return pos;
}

std::vector<CpTokenRun> CpLocalTokenRuns(const CpLayout& layout, int64_t rank, int64_t b,
                                         int64_t sp_rank, int64_t sp_size) {
  const int64_t sl = layout.LocalSeq(), n = sl / sp_size, lo = sp_rank * n, hi = lo + n;
  std::vector<CpTokenRun> runs;
  for (int64_t bi = 0; bi < b; ++bi) {
    // The local sequence is two chunks: [0, c) and [c, 2c), each contiguous originally.
    for (const auto& [a, e] : {std::pair<int64_t, int64_t>{0, layout.chunk}, {layout.chunk, sl}}) {
      const int64_t from = std::max(a, lo), to = std::min(e, hi);
      if (from >= to) continue;
      CpTokenRun run;
      run.local_row = bi * n + (from - lo);
      run.global_row = bi * layout.seq + layout.GlobalPosition(rank, from);
      run.rows = to - from;
      runs.push_back(run);
    }
  }
  return runs;
}

}  // namespace mxmaca::layers::cp
