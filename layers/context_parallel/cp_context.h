// layers/context_parallel/cp_context.h: one rank's context-parallel (CP) context as the
// GPT layers use it in training (issue 9): the CP group and its communicator endpoint,
// and the original sequence positions of the rank's local tokens.
//
// A GptStage created with a ContextParallelContext of size CP > 1 holds s_local = s / CP
// tokens of every sequence: CP rank r's chunks r and 2 CP - 1 - r of Megatron's 2 x CP
// layout (cp_layout.h). Its core attention runs ContextParallelAttention over `group`
// (cp_attention.h); RoPE angles, learned positions and document masks use the original
// positions (CpRowPositions); the loss numerator and token count are summed over the
// group (cp_batch.h AllReduceCpLoss). The parameters are replicated over CP: their
// gradients are summed over the data-parallel x context-parallel group by the runtime.
#ifndef MXMACA_LAYERS_CONTEXT_PARALLEL_CP_CONTEXT_H_
#define MXMACA_LAYERS_CONTEXT_PARALLEL_CP_CONTEXT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "layers/context_parallel/cp_layout.h"
#include "transport/communicator.h"
#include "transport/process_group.h"
#include "transport/rank_grid.h"

namespace mxmaca::layers::cp {

// ContextParallelContext: a rank's CP group (RankView::context_parallel_group(), Megatron's
// get_context_parallel_group), its index in it and the group size; `comm` is the rank's
// endpoint (not owned; must outlive the users). size 1: no context parallelism.
struct ContextParallelContext {
  transport::Communicator* comm = nullptr;
  transport::ProcessGroup group;
  int rank = 0;
  int size = 1;
  // timeout: how long one ring transfer or the loss all-reduce may wait for a peer.
  absl::Duration timeout = absl::Minutes(5);

  // enabled: size > 1.
  bool enabled() const { return size > 1; }
};

// ContextParallelContextFor: the context of the rank `view` describes, with `comm` as its
// endpoint and `timeout` for its transfers.
ContextParallelContext ContextParallelContextFor(const transport::RankView& view,
                                                 transport::Communicator* comm,
                                                 absl::Duration timeout = absl::Minutes(5));

// ValidateContextParallelContext: InvalidArgument when size < 1, rank outside [0, size),
// size > 1 without a communicator, or a group whose size / rank_in_group differ.
absl::Status ValidateContextParallelContext(const ContextParallelContext& cp);

// CpRowPositions: the original positions int32 [b * s_local] (row-major [b, s_local],
// every row the same) of CP rank `rank`'s local tokens: what a position index i % s is
// on an unsharded stage. Requires 0 <= rank < layout.cp_size (invariant).
std::vector<int32_t> CpRowPositions(const CpLayout& layout, int64_t rank, int64_t b);

// CpTokenRun: `rows` consecutive rows of a local token-major tensor that hold
// consecutive original positions: local row `local_row` is row `global_row` of the full
// [b, s] (global_row = bi s + original position).
struct CpTokenRun {
  int64_t local_row = 0;
  int64_t global_row = 0;
  int64_t rows = 0;
};

// CpLocalTokenRuns: the runs covering CP rank `rank`'s local rows of a [b, rows, w]
// tensor, in local order: rows = s_local (sp_size 1), or the SP shard
// [sp_rank s_local / sp_size, (sp_rank + 1) s_local / sp_size) of each sequence. Used to
// key dropout masks by the unsharded element index (global_row w + column), so masks
// do not depend on the CP (or TP) layout. Requires 0 <= rank < CP, sp_size >= 1 dividing
// s_local, 0 <= sp_rank < sp_size (invariants).
std::vector<CpTokenRun> CpLocalTokenRuns(const CpLayout& layout, int64_t rank, int64_t b,
                                         int64_t sp_rank, int64_t sp_size);

}  // namespace mxmaca::layers::cp

#endif  // MXMACA_LAYERS_CONTEXT_PARALLEL_CP_CONTEXT_H_
