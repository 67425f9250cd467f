// api/train/heartbeat.h: noticing a hung peer in a multi-process job (issue 6, "no
// heartbeat"). A process that dies or drops its connection is noticed by UCX at once
// (peer-failure mode); one that is alive but stuck (SIGSTOP, a hung driver, a livelock)
// keeps its sockets open and would only be caught by the collective timeout
// (--distributed-timeout-minutes). So every process sends a small heartbeat to the next
// rank in a ring every `period` from a thread of its own, and expects one from the
// previous rank: when none arrived for `timeout`, `on_lost` runs once with that rank.
// The rank that then exits is noticed by its other peers through UCX, so a hung process
// ends the whole job within about `timeout`.
#ifndef MXMACA_API_TRAIN_HEARTBEAT_H_
#define MXMACA_API_TRAIN_HEARTBEAT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "transport/communicator.h"
#include "transport/process_group.h"

namespace mxmaca::api {

class Heartbeat {
 public:
  // OnLost: `rank` is gone; `reason` says how ("no heartbeat for 8.0 s ..." or the
  // transport's error when the heartbeat receive failed). Runs once, on the heartbeat
  // thread or the communicator's.
  using OnLost = std::function<void(int rank, const std::string& reason)>;

  // Start: rank comm->rank() of a job of `world_size` (>= 2) processes, over `comm` (must
  // outlive the Heartbeat) on group id `group_id` (outside the job's RankGrid ids).
  static std::unique_ptr<Heartbeat> Start(transport::Communicator* comm, int world_size,
                                          int64_t group_id, absl::Duration period,
                                          absl::Duration timeout, OnLost on_lost);
  // Closing: this process enters the orderly close (UcxCommunicator::Close): a peer's
  // endpoint failing is no longer reported (the first peers through the close barrier
  // close theirs), but a silent peer still is, until Quiesce.
  void Closing();
  // Quiesce: the job is ending (call it before UcxCommunicator::Close): heartbeats are
  // still sent, so peers still in their last iteration do not report this process, but a
  // silent or vanished peer is no longer reported (peers exit one by one after Close).
  void Quiesce();
  // ~Heartbeat: stops the thread; later completions are ignored. Destroy it after the
  // communicator is closed (or never posts again): a pending receive keeps only the
  // heartbeat's own buffers alive.
  ~Heartbeat();

  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  struct Shared;
  Heartbeat() = default;
  void Run();
  void PostReceive();

  transport::Communicator* comm_ = nullptr;
  transport::ProcessGroup group_;
  int next_ = 0, previous_ = 0;
  absl::Duration period_, timeout_;
  OnLost on_lost_;
  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_HEARTBEAT_H_
