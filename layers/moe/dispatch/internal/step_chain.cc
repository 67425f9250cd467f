// layers/moe/dispatch/internal/step_chain.cc: the step program runner.
#include "layers/moe/dispatch/internal/step_chain.h"

#include <utility>

namespace mxmaca::layers::moe::dispatch::internal {

transport::DoneCallback StepContext::Done() {
  chain_->Acquire();
  std::shared_ptr<StepChain> chain = chain_;
  return [chain](const transport::CollectiveInfo&, absl::Status status) {
    if (!status.ok()) chain->Fail(std::move(status));
    chain->Release();
  };
}

void RunSteps(std::vector<Step> steps, std::function<void(absl::Status)> finish,
              Executor executor) {
  auto chain =
      std::make_shared<StepChain>(std::move(steps), std::move(finish), std::move(executor));
  chain->RunNext();
}

void StepChain::Fail(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (status_.ok()) status_ = std::move(status);
}

void StepChain::RunNext() {
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    status = status_;
  }
  if (!status.ok() || next_ == steps_.size()) {
    std::function<void(absl::Status)> finish = std::move(finish_);
    steps_.clear();  // release the buffers the steps captured before the caller continues
    finish(std::move(status));
    return;
  }
  Step step = std::move(steps_[next_++]);
  // The posting token: the step's operations may all complete (inline) before it returns.
  pending_.store(1, std::memory_order_relaxed);
  StepContext ctx(shared_from_this());
  absl::Status posted = step(ctx);
  if (!posted.ok()) Fail(std::move(posted));
  Release();
}

void StepChain::Release() {
  if (pending_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (executor_) {
    std::shared_ptr<StepChain> self = shared_from_this();
    executor_([self]() { self->RunNext(); });
  } else {
    RunNext();
  }
}

}  // namespace mxmaca::layers::moe::dispatch::internal
