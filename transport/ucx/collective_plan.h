// transport/ucx/collective_plan.h (internal to transport/ucx): collectives as programs of
// steps, independent of UCX so the algorithms can be checked by a loopback executor.
//
// A Plan is what one rank does for one operation: a list of Steps; each Step posts its
// sends and receives together (Xfer: peer global rank, buffer, bytes, tag step) and, once
// all have completed, runs `after` (a reduction, a verdict). `before` runs just before the
// step's transfers are posted. Zero-byte transfers are left out on both sides (both sides
// know every length). Within a step a rank receives at most one message from each peer,
// and a message's tag step field is the step's index in the plan (unless an Xfer sets its
// own), so the pair (sender, tag) identifies a message of one operation uniquely.
//
// Shapes: n = group size, me = this rank's index in the group, count in elements.
// Summation orders are documented in ucx_communicator.h; SumInRankOrder is the
// bit-identity primitive (InProcessHub's order).
#ifndef MXMACA_TRANSPORT_UCX_COLLECTIVE_PLAN_H_
#define MXMACA_TRANSPORT_UCX_COLLECTIVE_PLAN_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace mxmaca::transport::ucx {

// kStepIndexTag: Xfer::tag_step value meaning "the index of my step in the plan".
inline constexpr uint32_t kStepIndexTag = 0xffffffffu;

// Xfer: one message of a step. For a send, `buffer` is read; for a receive, written.
struct Xfer {
  int peer = -1;                      // global rank of the other side
  uint32_t tag_step = kStepIndexTag;  // the tag's step field
  void* buffer = nullptr;
  int64_t bytes = 0;
  // exact_length: a receive must get exactly `bytes` (else the op fails with a mismatch);
  // when false it may get fewer (descriptors) and `received` says how many.
  bool exact_length = true;
  // Executor state.
  void* request = nullptr;
  bool complete = false;
  int64_t received = -1;
  void* owner = nullptr;  // the executor's operation record
};

// Step: transfers posted together, then `after`.
struct Step {
  std::vector<Xfer> sends;
  std::vector<Xfer> recvs;
  std::function<void()> before;         // may be empty
  std::function<absl::Status()> after;  // may be empty; an error fails the operation
};

// ScratchPool: reusable scratch buffers (large ones would otherwise be mmapped, faulted
// in and unmapped on every operation). Thread-safe; keeps at most `max_bytes` idle.
class ScratchPool {
 public:
  explicit ScratchPool(int64_t max_bytes) : max_bytes_(max_bytes) {}
  // Get: a buffer of at least `bytes` (contents undefined).
  std::unique_ptr<char[]> Get(int64_t bytes, int64_t* capacity);
  // Put: gives a buffer of `capacity` bytes back.
  void Put(std::unique_ptr<char[]> buffer, int64_t capacity);

 private:
  const int64_t max_bytes_;
  std::mutex mu_;
  int64_t idle_bytes_ = 0;
  std::multimap<int64_t, std::unique_ptr<char[]>> idle_;  // by capacity
};

// Plan: the steps and the scratch memory they use (owned here; Steps point into it).
// Built once on the posting thread, then only the executor touches it. Not movable once
// built (closures hold its address): keep it in a unique_ptr.
struct Plan {
  std::vector<Step> steps;
  std::vector<std::pair<std::unique_ptr<char[]>, int64_t>> scratch;  // buffer, capacity
  ScratchPool* pool = nullptr;  // where scratch comes from and returns to; may be null

  Plan() = default;
  explicit Plan(ScratchPool* p) : pool(p) {}
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan();

  // Scratch: `bytes` of owned, uninitialised memory (at least 1 byte).
  char* Scratch(int64_t bytes);
};

// Members: the group as the plan sees it.
struct Members {
  std::vector<int> ranks;  // global ranks, group order
  int me = 0;              // index of this rank
  int size() const { return static_cast<int>(ranks.size()); }
};

// Chunks: [n] offsets and lengths (elements) splitting `count` as evenly as possible, the
// first count % n chunks one longer.
struct Chunks {
  std::vector<int64_t> offset, length;
};
Chunks SplitEvenly(int64_t count, int n);

// SumInRankOrder: out[i] = ((src[0][i] + src[1][i]) + ...) + src[n-1][i], fp32, for
// i in [0, length). `out` may equal any src pointer (each element is read before written).
void SumInRankOrder(const std::vector<const float*>& src, int64_t length, float* out);

// Builders: append the data steps of one operation to `plan` (after a descriptor step, if
// the executor put one first).
// AllReduceRankOrder: pairwise reduce-scatter in rank order + pairwise all-gather.
void BuildAllReduceRankOrder(const Members& m, const float* send, float* recv, int64_t count,
                             Plan* plan);
// AllReduceRing: ring reduce-scatter (ring order) + ring all-gather.
void BuildAllReduceRing(const Members& m, const float* send, float* recv, int64_t count,
                        Plan* plan);
// ReduceScatterRankOrder / Ring: send [n * recv_count], recv [recv_count].
void BuildReduceScatterRankOrder(const Members& m, const float* send, float* recv,
                                 int64_t recv_count, Plan* plan);
void BuildReduceScatterRing(const Members& m, const float* send, float* recv, int64_t recv_count,
                            Plan* plan);
// AllGather: send [bytes], recv [n * bytes]; ring or pairwise.
void BuildAllGather(const Members& m, const void* send, void* recv, int64_t bytes, bool ring,
                    Plan* plan);
// Broadcast: root's `buffer` [bytes] to every member; scatter + ring all-gather or direct.
void BuildBroadcast(const Members& m, int root, void* buffer, int64_t bytes, bool ring, Plan* plan);
// AllToAllV: counts and displacements in bytes.
void BuildAllToAllV(const Members& m, const void* send, const std::vector<int64_t>& send_bytes,
                    const std::vector<int64_t>& send_offsets, void* recv,
                    const std::vector<int64_t>& recv_bytes,
                    const std::vector<int64_t>& recv_offsets, Plan* plan);

}  // namespace mxmaca::transport::ucx

#endif  // MXMACA_TRANSPORT_UCX_COLLECTIVE_PLAN_H_
