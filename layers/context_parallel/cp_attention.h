// layers/context_parallel/cp_attention.h: ContextParallelAttention, the core attention of
// one transformer layer on one context-parallel (CP) rank, forward and backward, with the
// K/V blocks travelling around the CP ring over a Communicator (issue 9).
//
// Shapes (fp32, row-major) as layers/context_parallel/ring_attention.h: b = micro-batch,
// np = local query heads, ng = local K/V groups, hn = head dim, s_local = s / CP (this
// rank's two chunks of Megatron's 2 x CP layout, cp_layout.h):
//   q, out, dout, dq   [b, np, s_local, hn]
//   k, v, dk, dv       [b, ng, s_local, hn]    (this rank's own K/V)
//   lse                [b, np, s_local]         (forward stash for the backward)
//   doc_start          int32 [b, s_local]       (original positions; nullptr: causal)
//
// The ring (TransformerEngine's AttnFuncWithCPAndKVP2P, one K/V block per step). Let r be
// this rank's index in the CP group, next = (r + 1) mod CP, prev = (r - 1) mod CP. At
// ring step i (0 <= i < CP) rank r holds the K/V block of rank (r - i) mod CP.
//   Forward, step i:
//     1. if i < CP-1: post Send(K held) and Send(V held) to next, Recv(K), Recv(V) from
//        prev into the other of two receive buffers (non-blocking posts);
//     2. RingAttentionForward::Step on the held block (the transfers run meanwhile);
//     3. if i < CP-1: wait for the four transfers; the received block is held next.
//   then RingAttentionForward::Finish -> out, lse.
//   Backward, step i (the dK/dV accumulators travel with their block, so after CP steps
//   each block's dk/dv, summed over every rank, arrives back at its owner; dq stays local):
//     1. if i < CP-1: post Send(K), Send(V) to next, Recv(K), Recv(V) from prev;
//     2. if i > 0: wait for the dK/dV of the held block posted at step i-1;
//     3. RingAttentionBackward::Step(accumulate = true) into the held dK/dV (zeros at
//        step 0: this rank's own block);
//     4. post Send(dK), Send(dV) to next, Recv(dK), Recv(dV) from prev (at i = CP-1 the
//        receive is this rank's own block's finished dk/dv, written into the caller's
//        dk/dv);
//     5. if i < CP-1: wait for the K/V transfers of step 1.
//   then wait for the last dK/dV and RingAttentionBackward::Finish -> dq.
// Message order and matching: every rank posts the same sequence of operations on the CP
// group (forward per step K then V; backward per step K, V, then dK, dV), and the
// Communicator matches point-to-point messages FIFO per channel (group, src, dst), so the
// k-th Send from prev pairs with this rank's k-th Recv from prev; all messages of one
// layer call are equal-sized fp32 blocks of b ng s_local hn elements. Forward sends
// 2 (CP - 1) messages per rank, backward 2 (CP - 1) + 2 CP. CP = 1 sends nothing.
// Numerics: block arrival order is the ring order (r, r-1, ..., r+1), and a block's dk/dv
// sums its contributions in ring order (owner j, then j+1, ..., j-1): bit-identical to a
// sequential simulation with that order; within fp32 rounding of the unsharded attention.
//
// Overlap: a K/V transfer of step i+1 runs during the compute of step i. The dK/dV of
// step i is produced by step i's compute on the previous rank, so its hop is on the
// critical path (as in TransformerEngine's backward, where the dK/dV exchange is waited
// on before the next accumulation). Timings in CpAttentionTimes measure what was hidden.
//
// Threads: Forward/Backward run on the calling thread (the CP rank's compute strand) and
// block only while waiting for this rank's transfers, with Options::transfer_timeout; the
// Communicator's callbacks may fire on any thread. A ContextShardActor that must not
// block would drive the same steps from completion messages instead.
#ifndef MXMACA_LAYERS_CONTEXT_PARALLEL_CP_ATTENTION_H_
#define MXMACA_LAYERS_CONTEXT_PARALLEL_CP_ATTENTION_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kernels/exec_context.h"
#include "layers/context_parallel/memory_cap.h"
#include "layers/context_parallel/ring_attention.h"
#include "transport/communicator.h"
#include "transport/process_group.h"

namespace mxmaca::layers::cp {

class PendingTransfers;  // pending_transfers.h

// CpAttentionTimes: where one Forward or Backward call spent its wall-clock time on this
// rank (seconds) and what it sent.
struct CpAttentionTimes {
  double compute_seconds = 0.0;   // inside RingAttention* Begin/Step/Finish
  double post_seconds = 0.0;      // inside Communicator Send/Recv posts (the in-process
                                  // backend copies inline in the last poster's call)
  double wait_seconds = 0.0;      // blocked waiting for transfers to complete
  double transfer_seconds = 0.0;  // sum over this rank's receives of post-to-completion
  double total_seconds = 0.0;     // the whole call
  int64_t messages_sent = 0;
  int64_t bytes_sent = 0;

  // HiddenFraction: the fraction of the receives' time in flight that overlapped compute,
  // 1 - wait_seconds / transfer_seconds clamped to [0, 1] (1 when nothing was received).
  double HiddenFraction() const;
  // Add: sums another call's times (for totals over ranks or iterations).
  void Add(const CpAttentionTimes& o);
};

// ContextParallelAttention: the attention of one layer on one CP rank. Reusable for any
// number of micro-batches; one call at a time (not thread-safe).
class ContextParallelAttention {
 public:
  struct Options {
    // transfer_timeout: how long a wait for this rank's transfers may block before the
    // call fails with DeadlineExceeded listing the missing transfers.
    absl::Duration transfer_timeout = absl::Minutes(5);
    // memory_cap: when set, Create charges the state and ring buffers (StateBytes) to it
    // for the object's lifetime; a configuration that does not fit fails with
    // ResourceExhausted naming the shard.
    ShardMemoryCap* memory_cap = nullptr;
    // num_threads: the ctx.num_threads the calls will use (the per-thread tile scratch
    // charged to memory_cap).
    int num_threads = 1;
  };

  // Create: config.layout.cp_size must equal cp_group.size(); this rank is
  // cp_group.rank_in_group (RankView::context_parallel_rank()). `comm` is borrowed and
  // must outlive the object. Errors: InvalidArgument for a null comm, a bad config
  // (RingAttentionForward::Create's errors) or a group whose size is not CP or which
  // does not contain comm->rank() at rank_in_group; ResourceExhausted from the memory cap.
  static absl::StatusOr<std::unique_ptr<ContextParallelAttention>> Create(
      const RingAttentionConfig& config, transport::Communicator* comm,
      const transport::ProcessGroup& cp_group, const Options& options);
  static absl::StatusOr<std::unique_ptr<ContextParallelAttention>> Create(
      const RingAttentionConfig& config, transport::Communicator* comm,
      const transport::ProcessGroup& cp_group) {
    return Create(config, comm, cp_group, Options());
  }

  // Forward: out [b, np, s_local, hn] and lse [b, np, s_local] of this rank's queries
  // against the whole sequence's keys (causal, document-masked when doc_start is set).
  // Every CP rank of the group must call Forward for the same micro-batch (the ring
  // needs all of them). times (optional) receives this call's timings.
  // Errors: RingAttentionForward's (InvalidArgument for null inputs, bad doc_start);
  // transfer errors from the Communicator (prefixed with the ring step and message);
  // DeadlineExceeded when a transfer does not complete within transfer_timeout. A rank
  // that fails before posting (e.g. a bad doc_start) leaves its peers waiting until their
  // timeout: the supervisor ends the job on the first error.
  absl::Status Forward(const kernels::ExecContext& ctx, const float* q, const float* k,
                       const float* v, const int32_t* doc_start, float* out, float* lse,
                       CpAttentionTimes* times = nullptr);

  // Backward: dq [b, np, s_local, hn] and this rank's own K/V block's dk, dv
  // [b, ng, s_local, hn] (summed over every rank's queries), given the forward's inputs,
  // out and lse, and dout. Overwrites dq, dk, dv. Collective over the CP group as
  // Forward. Errors: as Forward, and InvalidArgument for null out/dout/lse/dq/dk/dv.
  absl::Status Backward(const kernels::ExecContext& ctx, const float* q, const float* k,
                        const float* v, const int32_t* doc_start, const float* out,
                        const float* lse, const float* dout, float* dq, float* dk, float* dv,
                        CpAttentionTimes* times = nullptr);

  // StateBytes: the bytes one rank's object holds: max(forward, backward) ring-attention
  // state (RingAttention*::StateBytes) + the K/V receive buffers (2 K/V blocks; 1 when
  // CP = 2, none when CP = 1) + the travelling dK/dV buffers (2 blocks when CP > 1), with
  // a block = 2 b ng s_local hn floats. The caller's q/k/v/out/lse/gradients are extra.
  static int64_t StateBytes(const RingAttentionConfig& config, int num_threads);

  // cp_rank / cp_size: this rank's index in the CP group and the group size.
  int64_t cp_rank() const { return rank_; }
  int64_t cp_size() const { return config_.layout.cp_size; }
  const RingAttentionConfig& config() const { return config_; }

 private:
  ContextParallelAttention(const RingAttentionConfig& config, transport::Communicator* comm,
                           const transport::ProcessGroup& group, const Options& options);

  // PostBlock: posts Send(a), Send(b) to next and Recv(ra), Recv(rb) from prev on
  // `pending`; `what` names the pair ("K/V" or "dK/dV") for error reports.
  void PostBlock(const char* what, int64_t step, const float* a, const float* b, float* ra,
                 float* rb, PendingTransfers* pending, CpAttentionTimes* times);
  absl::Status WaitFor(const char* phase, int64_t step, PendingTransfers* pending,
                       CpAttentionTimes* times);

  RingAttentionConfig config_;
  transport::Communicator* comm_;
  transport::ProcessGroup group_;
  Options options_;
  int64_t rank_ = 0;
  int64_t block_elems_ = 0;  // b ng s_local hn
  CappedReservation reservation_;
  std::unique_ptr<RingAttentionForward> fwd_;
  std::unique_ptr<RingAttentionBackward> bwd_;
  // Ring buffers: kv_[i] holds K then V of one block (2 block_elems_ floats); dkv_[i]
  // holds a travelling dK then dV.
  std::vector<float> kv_[2];
  std::vector<float> dkv_[2];
};

}  // namespace mxmaca::layers::cp

#endif  // MXMACA_LAYERS_CONTEXT_PARALLEL_CP_ATTENTION_H_
