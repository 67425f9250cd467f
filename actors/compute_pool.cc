// actors/compute_pool.cc: see compute_pool.h.
#include "actors/compute_pool.h"

#include <utility>

namespace mxmaca::actors {

void Strand::Post(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(pool_->mu_);
  tasks_.push_back(std::move(task));
  if (!scheduled_) {
    scheduled_ = true;
    pool_->Schedule(this);
  }
}

ComputePool::ComputePool(int num_threads) {
  if (num_threads < 1) num_threads = 1;
  threads_.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i) threads_.emplace_back([this] { WorkerLoop(); });
}

ComputePool::~ComputePool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

std::shared_ptr<Strand> ComputePool::MakeStrand() {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Strand> s(new Strand(this));
  strands_.push_back(s);
  return s;
}

void ComputePool::Schedule(Strand* strand) {
  ready_.push_back(strand);
  cv_.notify_one();
}

void ComputePool::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !ready_.empty(); });
    if (ready_.empty()) return;  // stop_ and nothing left to run
    Strand* strand = ready_.front();
    ready_.pop_front();
    std::function<void()> task = std::move(strand->tasks_.front());
    strand->tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
    if (strand->tasks_.empty()) {
      strand->scheduled_ = false;
    } else {
      ready_.push_back(strand);  // round-robin: other strands get a turn first
      cv_.notify_one();
    }
  }
}

}  // namespace mxmaca::actors
