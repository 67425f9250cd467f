// actors/compute_pool.h: the pool of compute threads and per-actor strands.
//
// docs/ARCHITECTURE.md, "Threads": CAF workers handle messages only; compute runs on per-actor
// strands of a pool sized to the cores. A Strand is a FIFO of tasks that never runs two
// of its tasks at once (an actor's device "stream" on CPU); the pool runs ready strands
// on its threads, one task at a time per strand, round-robin across strands. A task that
// finishes reports back to its actor by message (never by blocking a CAF worker).
#ifndef MXMACA_ACTORS_COMPUTE_POOL_H_
#define MXMACA_ACTORS_COMPUTE_POOL_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace mxmaca::actors {

class ComputePool;

// Strand: a serial queue of compute tasks bound to a ComputePool.
class Strand {
 public:
  // Post: appends `task`; it runs after every task posted before it on this strand.
  // Thread-safe. Tasks must not throw (wrap failures into messages).
  void Post(std::function<void()> task);

 private:
  friend class ComputePool;
  explicit Strand(ComputePool* pool) : pool_(pool) {}
  ComputePool* pool_;
  std::deque<std::function<void()>> tasks_;  // guarded by pool_->mu_
  bool scheduled_ = false;                   // in the ready queue or running
};

// ComputePool: `num_threads` compute threads (>= 1), joined on destruction after the
// queued tasks have run.
class ComputePool {
 public:
  explicit ComputePool(int num_threads);
  ~ComputePool();
  ComputePool(const ComputePool&) = delete;
  ComputePool& operator=(const ComputePool&) = delete;

  // MakeStrand: a new strand; it must not outlive the pool.
  std::shared_ptr<Strand> MakeStrand();
  int num_threads() const { return static_cast<int>(threads_.size()); }

 private:
  friend class Strand;
  void Schedule(Strand* strand);  // requires mu_ held
  void WorkerLoop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Strand*> ready_;
  std::vector<std::shared_ptr<Strand>> strands_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace mxmaca::actors

#endif  // MXMACA_ACTORS_COMPUTE_POOL_H_
