// layers/moe/dispatch/internal/step_chain.h: runs a short program of communication steps
// without blocking a thread (docs/ARCHITECTURE.md "Collectives never block a thread").
//
// A step is a function that posts any number of Communicator operations (taking a
// DoneCallback from StepContext::Done() for each) and may do local work (copies) before
// posting. The next step starts when every operation the step posted has completed; the
// chain ends, calling `finish` once, after the last step or after the first step in which
// an operation or the step function failed (the failing step's other operations are still
// waited for, so no buffer is released while the transport may touch it). Continuations
// run inline on the thread of the last completion (possibly the poster's own thread,
// before its post returns) or through `executor` when given.
#ifndef MXMACA_LAYERS_MOE_DISPATCH_INTERNAL_STEP_CHAIN_H_
#define MXMACA_LAYERS_MOE_DISPATCH_INTERNAL_STEP_CHAIN_H_

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "transport/communicator.h"

namespace mxmaca::layers::moe::dispatch::internal {

// Executor: runs a continuation (e.g. as a message to the owning actor); empty = inline.
using Executor = std::function<void(std::function<void()>)>;

class StepChain;

// StepContext: handed to a step function; Done() gives the callback for one posted
// operation (call it once per operation, before posting it).
class StepContext {
 public:
  explicit StepContext(std::shared_ptr<StepChain> chain) : chain_(std::move(chain)) {}
  transport::DoneCallback Done();

 private:
  std::shared_ptr<StepChain> chain_;
};

// Step: posts the operations of one step; a non-OK return ends the chain after the
// operations already posted complete.
using Step = std::function<absl::Status(StepContext& ctx)>;

// RunSteps: runs `steps` in order and then calls finish(status) exactly once.
void RunSteps(std::vector<Step> steps, std::function<void(absl::Status)> finish, Executor executor);

class StepChain : public std::enable_shared_from_this<StepChain> {
 public:
  StepChain(std::vector<Step> steps, std::function<void(absl::Status)> finish, Executor executor)
      : steps_(std::move(steps)), finish_(std::move(finish)), executor_(std::move(executor)) {}

  // RunNext: starts step next_ (or finishes).
  void RunNext();
  // Acquire / Release: one outstanding operation (or the posting step itself).
  void Acquire() { pending_.fetch_add(1, std::memory_order_relaxed); }
  void Release();
  void Fail(absl::Status status);

 private:
  std::vector<Step> steps_;
  size_t next_ = 0;
  std::function<void(absl::Status)> finish_;
  Executor executor_;
  std::atomic<int> pending_{0};
  absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mxmaca::layers::moe::dispatch::internal

#endif  // MXMACA_LAYERS_MOE_DISPATCH_INTERNAL_STEP_CHAIN_H_
