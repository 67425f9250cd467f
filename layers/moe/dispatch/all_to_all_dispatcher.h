// layers/moe/dispatch/all_to_all_dispatcher.h: AllToAllDispatcher, Megatron-Core's
// MoEAlltoAllTokenDispatcher data movement (--moe-token-dispatcher-type alltoall) over a
// Communicator.
//
// Dispatch on EP rank d (P = EP size, L local experts, h hidden; token_dispatcher.h):
//   1. AllGather of every rank's count header [E + 2] int64 (Megatron:
//      gather_from_sequence_parallel_region(num_local_tokens_per_expert)); every rank
//      derives input_splits[j] = RowsBetween(d, j) and output_splits[j] = RowsBetween(j, d).
//   2. AllToAllV of the rows: rank d's rows for rank j's experts are contiguous in its
//      global-expert-major input, so the input is sent in place; received blocks are
//      source-rank-major.
//   3. GatherExpertInputs regroups them local-expert-major (sort_chunks_by_idxs); skipped
//      when L == 1 (the all-to-all receives straight into the output).
// Combine: ScatterExpertOutputs (restore_output_by_local_experts; skipped when L == 1),
// then the reverse AllToAllV, received in place into the [T, h] output.
// Messages per dispatch: one all-gather and one all-to-all-v on the EP group (the backend
// sends one message per ordered rank pair for each); combine: one all-to-all-v.
#ifndef MXMACA_LAYERS_MOE_DISPATCH_ALL_TO_ALL_DISPATCHER_H_
#define MXMACA_LAYERS_MOE_DISPATCH_ALL_TO_ALL_DISPATCHER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "layers/moe/dispatch/token_dispatcher.h"

namespace mxmaca::layers::moe::dispatch {

class AllToAllDispatcher : public TokenDispatcher {
 public:
  // Create: Errors: those of ValidateDispatcherOptions.
  static absl::StatusOr<std::unique_ptr<AllToAllDispatcher>> Create(DispatcherOptions options);

  const char* name() const override { return "alltoall"; }

 protected:
  void ExchangeCounts(std::vector<int64_t> header, LayoutDone done) override {
    ExchangeCountsByAllGather(std::move(header), std::move(done));
  }
  void MoveToExperts(std::shared_ptr<const DispatchLayout> layout, const float* rows,
                     RowsDone done) override;
  void MoveFromExperts(std::shared_ptr<const DispatchLayout> layout, const float* rows,
                       RowsDone done) override;

 private:
  explicit AllToAllDispatcher(DispatcherOptions options) : TokenDispatcher(std::move(options)) {}
};

}  // namespace mxmaca::layers::moe::dispatch

#endif  // MXMACA_LAYERS_MOE_DISPATCH_ALL_TO_ALL_DISPATCHER_H_
