// layers/moe/dispatch/token_dispatcher.h: TokenDispatcher, the expert-parallel token
// exchange of an MoE layer (issue 7), and what every dispatcher shares.
//
// Shape legend (as in dispatch_layout.h): P = EP size, E = experts, L = E / P local experts,
// h = hidden, T = rows this rank dispatches, N = rows this rank's experts receive. Rows are
// fp32, row-major, [rows, h].
//
// Data movement (Megatron-Core megatron/core/transformer/moe/token_dispatcher.py,
// token_permutation / token_unpermutation, after the local permute and before the local
// unpermute, which live in layers/moe/):
//   Dispatch  in:  rows [T, h] in global-expert-major order, tokens_per_expert [E]
//             out: rows [N, h] local-expert-major, source-rank-minor (dispatch_layout.h),
//                  tokens_per_local_expert [L], and the DispatchLayout every later call
//                  of this micro-batch needs
//             1. the count exchange: every EP rank learns every rank's tokens_per_expert
//                (and hidden size), so all agree on every split;
//             2. the rows move to the ranks of their experts;
//             3. the received rows are regrouped local-expert-major.
//   Combine   in:  expert outputs [N, h] in Dispatch's output order
//             out: [T, h], each row back on the rank that dispatched it, at its original
//                  position (the exact reverse of Dispatch's movement).
//   DispatchBackward(grad of Dispatch's output [N, h]) = Combine's movement -> [T, h].
//   CombineBackward(grad of Combine's output [T, h])   = Dispatch's movement -> [N, h]
//                  (no count exchange: the layout is reused).
// Every dispatcher moves rows exactly (bit copies), so all of them produce the same bits
// for the same inputs.
//
// Threads and completion: every call only posts and returns; `done` runs once, on the
// thread of the transport's last completion (or through Options::executor), with the
// result or an error. `rows` must stay valid and unchanged until `done` runs; outputs are
// owned by the result. All EP ranks must make the same sequence of calls (as for any
// collective), each on its own Communicator endpoint.
//
// Errors (to `done`): InvalidArgument for this rank's bad input (the other ranks are told
// through the count exchange and fail with FailedPrecondition instead of waiting);
// FailedPrecondition when ranks disagree (hidden size) or a layout from another group is
// passed; whatever the Communicator reports (DeadlineExceeded when a peer never posts and
// the backend's watchdog fires, mismatch reports, Unavailable).
#ifndef MXMACA_LAYERS_MOE_DISPATCH_TOKEN_DISPATCHER_H_
#define MXMACA_LAYERS_MOE_DISPATCH_TOKEN_DISPATCHER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "layers/moe/dispatch/buffer_pool.h"
#include "layers/moe/dispatch/dispatch_layout.h"
#include "layers/moe/dispatch/internal/step_chain.h"
#include "transport/communicator.h"
#include "transport/process_group.h"

namespace mxmaca::layers::moe::dispatch {

// DispatcherOptions: what every dispatcher needs.
struct DispatcherOptions {
  // comm: this rank's endpoint (not owned; must outlive the dispatcher and its calls).
  transport::Communicator* comm = nullptr;
  // ep_group: the expert_model_parallel group (RankView::expert_model_parallel_group()).
  transport::ProcessGroup ep_group;
  // num_experts: E, a multiple of ep_group.size(); expert e lives on EP rank e / L.
  int num_experts = 0;
  // executor: runs continuations between steps (an actor passes "send myself a message");
  // empty: inline on the completing thread.
  internal::Executor executor;
  // buffer_pool: staging and output buffers; one pool can serve all dispatchers (MoE
  // layers) of a rank. Null: the dispatcher makes its own (BufferPool defaults).
  std::shared_ptr<BufferPool> buffer_pool;
};

// ValidateDispatcherOptions: InvalidArgument when comm is null, E < 1, E % P != 0, or
// comm->rank() is not ep_group.ranks[ep_group.rank_in_group].
absl::Status ValidateDispatcherOptions(const DispatcherOptions& options);

// DispatchResult: what Dispatch gives the local experts.
struct DispatchResult {
  std::vector<float> rows;                       // [N, h] fp32, local-expert-major
  std::vector<int64_t> tokens_per_local_expert;  // [L]
  std::shared_ptr<const DispatchLayout> layout;  // for Combine and the backward passes
};

using DispatchDone = std::function<void(absl::StatusOr<DispatchResult>)>;
// RowsDone: rows [n, h] fp32.
using RowsDone = std::function<void(absl::StatusOr<std::vector<float>>)>;
using LayoutDone = std::function<void(absl::StatusOr<std::shared_ptr<const DispatchLayout>>)>;

// TokenDispatcher: one EP rank's dispatcher. At most ONE call (Dispatch, Combine or a
// backward) may be in flight per EP group and rank: start the next one from (or after) the
// previous one's `done`. The calls post several operations on the EP group one step after
// another, and two calls in flight would interleave those posts differently on different
// ranks, which the transport reports as a mismatch. The dispatcher must outlive its calls.
class TokenDispatcher {
 public:
  explicit TokenDispatcher(DispatcherOptions options)
      : options_(std::move(options)),
        pool_(options_.buffer_pool ? options_.buffer_pool : std::make_shared<BufferPool>()) {}
  virtual ~TokenDispatcher() = default;

  // name: "alltoall", "allgather" or "hierarchical" (Megatron's
  // --moe-token-dispatcher-type spelling where it has one).
  virtual const char* name() const = 0;
  const DispatcherOptions& options() const { return options_; }

  // Dispatch: see the banner. rows [num_rows, hidden] fp32 (null allowed when num_rows is
  // 0); tokens_per_expert [E] int64 summing to num_rows.
  void Dispatch(const float* rows, int64_t num_rows, int64_t hidden,
                const std::vector<int64_t>& tokens_per_expert, DispatchDone done);

  // Combine: expert_rows [layout->OutputRows(me), h] -> [layout->InputRows(me), h].
  // Errors: FailedPrecondition when the layout is null, comes from another group or
  // num_rows differs from the layout's N.
  void Combine(const std::shared_ptr<const DispatchLayout>& layout, const float* expert_rows,
               int64_t num_rows, RowsDone done);

  // DispatchBackward: the input gradient of Dispatch; grad [N, h] -> [T, h]. Same movement
  // and errors as Combine.
  void DispatchBackward(const std::shared_ptr<const DispatchLayout>& layout, const float* grad,
                        int64_t num_rows, RowsDone done) {
    Combine(layout, grad, num_rows, std::move(done));
  }

  // CombineBackward: the input gradient of Combine; grad [T, h] -> [N, h]. Same movement
  // as Dispatch (without the count exchange). Errors as Combine, against T.
  void CombineBackward(const std::shared_ptr<const DispatchLayout>& layout, const float* grad,
                       int64_t num_rows, RowsDone done);

  // Recycle: hands a result buffer (DispatchResult::rows, a Combine or backward output)
  // back once its contents are no longer needed; later calls reuse its memory (warm pages)
  // for their outputs and staging. Optional: dropping results is correct, only slower.
  void Recycle(std::vector<float> rows) { pool_->Give(std::move(rows)); }

 protected:
  // ExchangeCounts: every EP rank's CountHeader [E + 2] -> the layout (all ranks).
  virtual void ExchangeCounts(std::vector<int64_t> header, LayoutDone done) = 0;
  // MoveToExperts: rows [T, h] -> [N, h] (dispatch order). MoveFromExperts: the reverse.
  virtual void MoveToExperts(std::shared_ptr<const DispatchLayout> layout, const float* rows,
                             RowsDone done) = 0;
  virtual void MoveFromExperts(std::shared_ptr<const DispatchLayout> layout, const float* rows,
                               RowsDone done) = 0;

  // ExchangeCountsByAllGather: the count exchange as one all-gather of [E + 2] int64 over
  // the EP group (Megatron gathers num_local_tokens_per_expert the same way).
  void ExchangeCountsByAllGather(std::vector<int64_t> header, LayoutDone done);

  int ep_rank() const { return options_.ep_group.rank_in_group; }
  int ep_size() const { return options_.ep_group.size(); }

  DispatcherOptions options_;
  // pool_: staging and output buffers (shared with in-flight calls).
  std::shared_ptr<BufferPool> pool_;
};

// DispatchAndWait, CombineAndWait, DispatchBackwardAndWait, CombineBackwardAndWait: the same calls,
// blocking the calling thread until `done` (for tests, benchmarks and single-threaded tools; actors
// use the callbacks). `timeout` bounds the wait: on expiry DeadlineExceeded is returned, and the
// caller must then keep `rows` alive until the process ends (the operation may still complete
// later; the transport's own timeout is what normally ends a stuck exchange).
absl::StatusOr<DispatchResult> DispatchAndWait(TokenDispatcher& dispatcher, const float* rows,
                                               int64_t num_rows, int64_t hidden,
                                               const std::vector<int64_t>& tokens_per_expert,
                                               absl::Duration timeout = absl::InfiniteDuration());
absl::StatusOr<std::vector<float>> CombineAndWait(
    TokenDispatcher& dispatcher, const std::shared_ptr<const DispatchLayout>& layout,
    const float* expert_rows, int64_t num_rows, absl::Duration timeout = absl::InfiniteDuration());
absl::StatusOr<std::vector<float>> DispatchBackwardAndWait(
    TokenDispatcher& dispatcher, const std::shared_ptr<const DispatchLayout>& layout,
    const float* grad, int64_t num_rows, absl::Duration timeout = absl::InfiniteDuration());
absl::StatusOr<std::vector<float>> CombineBackwardAndWait(
    TokenDispatcher& dispatcher, const std::shared_ptr<const DispatchLayout>& layout,
    const float* grad, int64_t num_rows, absl::Duration timeout = absl::InfiniteDuration());

}  // namespace mxmaca::layers::moe::dispatch

#endif  // MXMACA_LAYERS_MOE_DISPATCH_TOKEN_DISPATCHER_H_
