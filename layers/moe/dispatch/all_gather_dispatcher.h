// layers/moe/dispatch/all_gather_dispatcher.h: AllGatherDispatcher, Megatron-Core's
// MoEAllGatherTokenDispatcher data movement (--moe-token-dispatcher-type allgather) over a
// Communicator: every EP rank gathers every rank's rows and keeps those of its experts;
// combine is the conjugate reduce-scatter.
//
// Dispatch on EP rank d (P = EP size, h hidden, T_s rows of rank s, Tmax = max_s T_s):
//   1. AllGather of the count headers [E + 2] int64 (as AllToAllDispatcher).
//   2. AllGather of the rows, each rank's [T_s, h] padded with zeros to [Tmax, h]
//      (AllGather needs equal counts) -> [P * Tmax, h].
//   3. Rank d copies out the chunks of its experts, local-expert-major, source-minor.
// Combine (the conjugate, reduce-scatter): rank d builds [P * Tmax, h] filled with -0.0f,
// writes each of its expert outputs at the gathered position the row came from, and
// ReduceScatterSum gives every rank s its block [Tmax, h], of which the first T_s rows are
// the output.
//
// Summation order and exactness. The reduce-scatter sums P contributions per element in
// group-rank order, ((x_0 + x_1) + ...) + x_{P-1} (in-process and UCX rank-order mode;
// UCX ring mode starts elsewhere). Every dispatched row went to exactly one expert, so
// exactly one x_k is the expert's value v and every other is -0.0f; in IEEE 754 binary32,
// -0 + -0 = -0 and v + (-0) = (-0) + v = v for every v (including +0, -0, inf and NaN),
// so the sum is v bit for bit in ANY order. (Filling with +0.0f would turn an output of -0
// into +0.) Hence the combine is exact and equals AllToAllDispatcher's. Megatron instead
// reduce-scatters after the local unpermute, i.e. it sums the top-k weighted outputs of a
// token across ranks in rank order; here that weighted sum stays with the local unpermute
// (layers/moe/), in its own fixed order.
//
// Cost: every rank receives (P - 1) * Tmax rows per dispatch and sends P - 1 blocks of
// Tmax rows per combine, against the all-to-all's exact splits; it suits small P or
// near-uniform T_s (Megatron recommends it for small EP).
#ifndef MXMACA_LAYERS_MOE_DISPATCH_ALL_GATHER_DISPATCHER_H_
#define MXMACA_LAYERS_MOE_DISPATCH_ALL_GATHER_DISPATCHER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "layers/moe/dispatch/token_dispatcher.h"

namespace mxmaca::layers::moe::dispatch {

class AllGatherDispatcher : public TokenDispatcher {
 public:
  // Create: Errors: those of ValidateDispatcherOptions.
  static absl::StatusOr<std::unique_ptr<AllGatherDispatcher>> Create(DispatcherOptions options);

  const char* name() const override { return "allgather"; }

 protected:
  void ExchangeCounts(std::vector<int64_t> header, LayoutDone done) override {
    ExchangeCountsByAllGather(std::move(header), std::move(done));
  }
  void MoveToExperts(std::shared_ptr<const DispatchLayout> layout, const float* rows,
                     RowsDone done) override;
  void MoveFromExperts(std::shared_ptr<const DispatchLayout> layout, const float* rows,
                       RowsDone done) override;

 private:
  explicit AllGatherDispatcher(DispatcherOptions options) : TokenDispatcher(std::move(options)) {}
};

}  // namespace mxmaca::layers::moe::dispatch

#endif  // MXMACA_LAYERS_MOE_DISPATCH_ALL_GATHER_DISPATCHER_H_
