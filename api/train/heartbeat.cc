// api/train/heartbeat.cc: see heartbeat.h.
#include "api/train/heartbeat.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace mxmaca::api {

// Shared: what the communicator's callbacks touch. A pending receive or send holds it (its
// buffers live here) until its callback ran — at the latest when the communicator is
// closed; the repost closure holds it weakly (no cycle).
struct Heartbeat::Shared {
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  bool quiet = false;  // Quiesce(): keep sending, report nothing
  bool closing = false;  // Closing(): a peer's endpoint failing is not reported
  absl::Time last_seen = absl::Now();
  int64_t send_value = 1;
  int64_t recv_value = 0;
  std::function<void()> post_receive;
  std::function<void(const std::string&)> lost;  // on_lost for the previous rank, once
};

std::unique_ptr<Heartbeat> Heartbeat::Start(transport::Communicator* comm, int world_size,
                                            int64_t group_id, absl::Duration period,
                                            absl::Duration timeout, OnLost on_lost) {
  std::unique_ptr<Heartbeat> h(new Heartbeat());
  h->comm_ = comm;
  h->group_.id = group_id;
  h->group_.kind = transport::GroupKind::kWorld;
  h->group_.index = 3;
  for (int r = 0; r < world_size; ++r) h->group_.ranks.push_back(r);
  h->group_.rank_in_group = comm->rank();
  h->next_ = (comm->rank() + 1) % world_size;
  h->previous_ = (comm->rank() + world_size - 1) % world_size;
  h->period_ = period;
  h->timeout_ = timeout;
  h->on_lost_ = std::move(on_lost);
  h->shared_ = std::make_shared<Shared>();
  h->shared_->lost = [on_lost = h->on_lost_, previous = h->previous_](const std::string& why) {
    on_lost(previous, why);
  };
  h->PostReceive();
  h->thread_ = std::thread([raw = h.get()] { raw->Run(); });
  return h;
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->stopping = true;
    shared_->post_receive = nullptr;
    shared_->lost = nullptr;
  }
  shared_->cv.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Heartbeat::PostReceive() {
  std::weak_ptr<Shared> weak = shared_;
  transport::Communicator* comm = comm_;
  const transport::ProcessGroup group = group_;
  const int previous = previous_;
  // One receive posted at a time; each completion posts the next (FIFO per channel).
  shared_->post_receive = [weak, comm, group, previous] {
    std::shared_ptr<Shared> held = weak.lock();
    if (!held) return;
    comm->Recv(group, previous, &held->recv_value, 1, transport::DataType::kInt64,
               [held](const transport::CollectiveInfo&, absl::Status status) {
                 std::function<void()> again;
                 std::function<void(const std::string&)> lost;
                 {
                   std::lock_guard<std::mutex> lock(held->mu);
                   if (held->stopping || held->quiet || absl::IsCancelled(status)) return;
                   // Closing: a peer that passed the close barrier first closes its
                   // endpoints; silence is still reported (Run) until Quiesce.
                   if (!status.ok() && held->closing) return;
                   if (!status.ok()) {  // the peer's endpoint failed: it is gone
                     held->stopping = true;
                     lost = held->lost;
                   } else {
                     held->last_seen = absl::Now();
                     again = held->post_receive;
                   }
                 }
                 if (lost) lost(std::string(status.message()));
                 if (again) again();
               });
  };
  shared_->post_receive();
}

void Heartbeat::Closing() {
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->closing = true;
}

void Heartbeat::Quiesce() {
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->quiet = true;
}

void Heartbeat::Run() {
  auto shared = shared_;
  std::unique_lock<std::mutex> lock(shared->mu);
  while (!shared->stopping) {
    lock.unlock();
    comm_->Send(group_, next_, &shared->send_value, 1, transport::DataType::kInt64,
                [shared](const transport::CollectiveInfo&, absl::Status) {});  // holds it
    lock.lock();
    const absl::Duration silent = absl::Now() - shared->last_seen;
    if (!shared->quiet && silent > timeout_) {
      shared->stopping = true;
      lock.unlock();
      on_lost_(previous_, absl::StrFormat("no heartbeat for %.1f s (its process is hung or "
                                          "unreachable)",
                                          absl::ToDoubleSeconds(silent)));
      return;
    }
    shared->cv.wait_for(lock, absl::ToChronoNanoseconds(period_));
  }
}

}  // namespace mxmaca::api
