// transport/ucx/ucx_communicator.cc: UCX context/worker/endpoints, the progress thread and
// the step executor of the UCX backend (see the header for protocol and numerics).
#include "transport/ucx/ucx_communicator.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "transport/ucx/collective_plan.h"
#include "transport/ucx/descriptor.h"
#include "transport/ucx/verify_plan.h"

namespace mxmaca::transport::ucx {
namespace {

// Tag layout (see the header): p2p:1 | sender:14 | group:20 | sequence:16 | step:13.
constexpr int kRankBits = 14;
constexpr int kGroupBits = 20;
constexpr int kSeqBits = 16;
constexpr int kStepBits = 13;
constexpr int kMaxRingGroup = 4096;  // 2 * (n - 1) + 1 steps must fit kStepBits

ucp_tag_t MakeTag(bool p2p, int sender, int64_t group, uint64_t sequence, uint32_t step) {
  return (static_cast<uint64_t>(p2p) << 63) |
         (static_cast<uint64_t>(sender) << (kGroupBits + kSeqBits + kStepBits)) |
         (static_cast<uint64_t>(group) << (kSeqBits + kStepBits)) |
         ((sequence & ((1u << kSeqBits) - 1)) << kStepBits) |
         (static_cast<uint64_t>(step) & ((1u << kStepBits) - 1));
}

// UcsStatus: a ucp failure as Unavailable with the UCX text (the one checking path for
// UCX codes, STYLE.md "Vendor calls ... go through one checking macro").
absl::Status UcsStatus(ucs_status_t s, absl::string_view what) {
  if (s == UCS_OK) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("UcxCommunicator: ", what, ": ", ucs_status_string(s)));
}
#define MXMACA_UCS_RETURN_IF_ERROR(expr, what) MXMACA_RETURN_IF_ERROR(UcsStatus((expr), (what)))

bool Overflows(int64_t count, int64_t elem) { return count > (INT64_MAX / 4) / elem; }

}  // namespace

// Operation: one posted operation as the progress thread runs it.
struct Operation {
  uint64_t id = 0;
  CollectiveInfo info;
  DoneCallback done;
  bool p2p = false;
  std::unique_ptr<Plan> plan;
  absl::Time posted;
  size_t step = 0;
  int outstanding = 0;   // live UCX requests (also after failure)
  int step_pending = 0;  // transfers of the current step not complete
  bool finished = false;
  // posting: the executor is inside PostStep; a callback that UCX runs synchronously
  // within a post call only records its completion then.
  bool posting = false;
  bool verify_step = false;  // steps[0] is the descriptor exchange
  UcxCommunicator::Impl* impl = nullptr;
};

class UcxCommunicator::Impl {
 public:
  Impl(Options options, int rank, int world_size, std::unique_ptr<Rendezvous> rendezvous)
      : options_(std::move(options)),
        rank_(rank),
        world_size_(world_size),
        rendezvous_(std::move(rendezvous)) {}
  ~Impl() { Shutdown(/*flush=*/false); }

  absl::Status Init();
  absl::Status Close(const std::function<void()>& all_arrived);
  void Shutdown(bool flush);

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  const Options& options() const { return options_; }
  absl::Time Now() const { return options_.clock ? options_.clock() : absl::Now(); }
  int pending() const { return pending_.load(); }

  // PostArgs: everything one call says, before the plan is built.
  struct PostArgs {
    CollectiveInfo info;  // op, dtype, count, peer set by the caller
    int root_index = -1;
    std::string invalid;
    std::vector<int64_t> send_counts, recv_counts;  // all-to-all-v
    DoneCallback done;
    std::function<void(const Members&, Plan*)> build;  // data steps (collectives)
    const void* p2p_send = nullptr;                    // send: the caller's buffer
    void* p2p_recv = nullptr;                          // recv: the caller's buffer
  };
  CollectiveInfo Post(const ProcessGroup& group, PostArgs args);
  std::vector<absl::Status> CheckTimeouts(absl::Time now);
  std::vector<std::string> WaitingReports(absl::Time now, absl::Duration older_than, int limit);

  // Executor (progress thread only).
  void OnPeerFailed(int peer, ucs_status_t status);
  static void EndpointFailed(void* arg, ucp_ep_h ep, ucs_status_t status) {
    auto* p = static_cast<PeerArg*>(arg);
    p->impl->OnPeerFailed(p->rank, status);
  }
  void OnXfer(Operation* op, Xfer* x, ucs_status_t status, int64_t length, bool is_recv);

 private:
  void Run();
  bool Enqueue(std::function<void()> task);
  void Start(std::shared_ptr<Operation> op);
  void PostStep(Operation* op);
  void PostSend(Operation* op, Xfer* x);
  void PostRecv(Operation* op, Xfer* x);
  void Posted(Operation* op, Xfer* x, ucs_status_ptr_t r, bool is_recv);
  bool RunAfter(Operation* op);
  void Finish(Operation* op, absl::Status status);
  void MaybeErase(Operation* op);
  absl::Status CheckXfer(const Operation& op, const Xfer& x, ucs_status_t status, int64_t length,
                         bool is_recv) const;
  std::string TimeoutReport(const Operation& op, absl::Time now) const;

  const Options options_;
  const int rank_;
  const int world_size_;
  std::unique_ptr<Rendezvous> rendezvous_;
  ScratchPool scratch_pool_{int64_t{512} << 20};  // idle scratch kept: up to 512 MiB

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<ucp_ep_h> eps_;
  // PeerArg: what the endpoint error callback of one peer gets.
  struct PeerArg {
    Impl* impl;
    int rank;
  };
  std::vector<PeerArg> peer_args_;
  std::vector<absl::Status> failed_peers_;  // progress thread: non-OK once a peer failed
  int wake_fd_ = -1;
  std::thread thread_;
  bool shut_down_ = false;

  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Sequence counters: (group, rank, -1, 0) collectives; (group, src, dst, side) p2p.
  std::map<std::tuple<int64_t, int, int, int>, uint64_t> counters_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int> pending_{0};

  // Progress thread only.
  std::map<uint64_t, std::shared_ptr<Operation>> active_;
};

namespace {

void SendCallback(void* request, ucs_status_t status, void* user_data) {
  Xfer* x = static_cast<Xfer*>(user_data);
  ucp_request_free(request);
  x->request = nullptr;
  Operation* op = static_cast<Operation*>(x->owner);
  op->impl->OnXfer(op, x, status, -1, /*is_recv=*/false);
}

void RecvCallback(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                  void* user_data) {
  Xfer* x = static_cast<Xfer*>(user_data);
  ucp_request_free(request);
  x->request = nullptr;
  Operation* op = static_cast<Operation*>(x->owner);
  const int64_t length =
      (status == UCS_OK && info != nullptr) ? static_cast<int64_t>(info->length) : -1;
  op->impl->OnXfer(op, x, status, length, /*is_recv=*/true);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Set-up and shut-down.

absl::Status UcxCommunicator::Impl::Init() {
  if (world_size_ > (1 << kRankBits)) {
    return absl::InvalidArgumentError(absl::StrCat("UcxCommunicator: world size ", world_size_,
                                                   " exceeds the tag limit ", 1 << kRankBits));
  }
  ucp_config_t* config = nullptr;
  MXMACA_UCS_RETURN_IF_ERROR(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
  ucp_params_t params = {};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                      UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  params.estimated_num_eps = static_cast<size_t>(world_size_);
  const ucs_status_t init = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  MXMACA_UCS_RETURN_IF_ERROR(init, "ucp_init");

  ucp_worker_params_t wp = {};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // Serialized: created here, then used only by the progress thread (and by Shutdown after
  // that thread has ended).
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  MXMACA_UCS_RETURN_IF_ERROR(ucp_worker_create(context_, &wp, &worker_), "ucp_worker_create");

  ucp_address_t* address = nullptr;
  size_t address_size = 0;
  MXMACA_UCS_RETURN_IF_ERROR(ucp_worker_get_address(worker_, &address, &address_size),
                             "ucp_worker_get_address");
  std::string blob(reinterpret_cast<const char*>(address), address_size);
  ucp_worker_release_address(worker_, address);
  MXMACA_ASSIGN_OR_RETURN(std::vector<std::string> addresses, rendezvous_->AllGather(blob));

  eps_.assign(world_size_, nullptr);
  failed_peers_.assign(world_size_, absl::OkStatus());
  peer_args_.resize(world_size_);
  for (int r = 0; r < world_size_; ++r) peer_args_[r] = {this, r};
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_) continue;
    ucp_ep_params_t ep = {};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = reinterpret_cast<const ucp_address_t*>(addresses[r].data());
    if (options_.detect_peer_failure) {
      ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = EndpointFailed;
      ep.err_handler.arg = &peer_args_[r];
    }
    MXMACA_UCS_RETURN_IF_ERROR(ucp_ep_create(worker_, &ep, &eps_[r]),
                               absl::StrCat("ucp_ep_create to rank ", r));
  }
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return absl::UnavailableError("UcxCommunicator: eventfd() failed");
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

absl::Status UcxCommunicator::Impl::Close(const std::function<void()>& all_arrived) {
  // Every rank has finished its operations once all have reached this barrier.
  absl::Status status = rendezvous_->Barrier();
  if (!status.ok()) {
    Shutdown(/*flush=*/false);
    return status;
  }
  if (all_arrived) all_arrived();
  Shutdown(/*flush=*/true);
  return rendezvous_->Barrier();
}

void UcxCommunicator::Impl::Shutdown(bool flush) {
  if (shut_down_) return;
  shut_down_ = true;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)::write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
  // Operations still in flight: cancelled.
  std::vector<std::shared_ptr<Operation>> left;
  for (auto& [id, op] : active_) left.push_back(op);
  for (auto& op : left) {
    Finish(op.get(),
           absl::CancelledError(absl::StrCat("UcxCommunicator: ", op->info.ToString(),
                                             ": the communicator was closed before it completed")));
  }
  if (worker_ != nullptr) {
    std::vector<ucs_status_ptr_t> closing;
    for (ucp_ep_h& ep : eps_) {
      if (ep == nullptr) continue;
      ucp_request_param_t p = {};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      const size_t peer = static_cast<size_t>(&ep - eps_.data());
      const bool failed = peer < failed_peers_.size() && !failed_peers_[peer].ok();
      p.flags = (flush && !failed) ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &p);
      if (r != nullptr && !UCS_PTR_IS_ERR(r)) closing.push_back(r);
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (!closing.empty() && absl::Now() < deadline) {
      ucp_worker_progress(worker_);
      for (size_t i = 0; i < closing.size();) {
        if (ucp_request_check_status(closing[i]) != UCS_INPROGRESS) {
          ucp_request_free(closing[i]);
          closing.erase(closing.begin() + i);
        } else {
          ++i;
        }
      }
    }
    eps_.clear();
    // Requests of cancelled operations: give their callbacks a chance to run.
    for (int i = 0; i < 100 && !active_.empty(); ++i) ucp_worker_progress(worker_);
    active_.clear();
    ucp_worker_destroy(worker_);
    worker_ = nullptr;
  }
  if (context_ != nullptr) {
    ucp_cleanup(context_);
    context_ = nullptr;
  }
  if (wake_fd_ >= 0) {
    ::close(wake_fd_);
    wake_fd_ = -1;
  }
}

// ---------------------------------------------------------------------------------------
// Progress thread.

bool UcxCommunicator::Impl::Enqueue(std::function<void()> task) {
  {
    absl::MutexLock lock(&mu_);
    // Once stopping, the progress thread takes no more work (it ran everything queued
    // before; see Run).
    if (stop_) return false;
    tasks_.push_back(std::move(task));
  }
  const uint64_t one = 1;
  (void)::write(wake_fd_, &one, sizeof(one));
  return true;
}

void UcxCommunicator::Impl::Run() {
  int efd = -1;
  if (ucp_worker_get_efd(worker_, &efd) != UCS_OK) efd = -1;
  absl::Time last_activity = absl::Now();
  while (true) {
    uint64_t drained;
    (void)::read(wake_fd_, &drained, sizeof(drained));
    std::deque<std::function<void()>> tasks;
    bool stop;
    {
      absl::MutexLock lock(&mu_);
      tasks.swap(tasks_);
      stop = stop_;
    }
    for (auto& task : tasks) task();
    if (stop) break;
    bool progressed = false;
    while (ucp_worker_progress(worker_) != 0) progressed = true;
    const absl::Time now = absl::Now();
    if (!tasks.empty() || progressed) {
      last_activity = now;
      continue;
    }
    if (!active_.empty()) {
      absl::Duration spin = options_.spin;
      for (const auto& [id, op] : active_) {
        if (!op->p2p) {
          spin = std::max(spin, options_.collective_spin);
          break;
        }
      }
      if (now - last_activity < spin) continue;
    }
    if (efd < 0) {
      // No event fd for these transports: nap briefly while operations are in flight.
      pollfd p = {wake_fd_, POLLIN, 0};
      ::poll(&p, 1, active_.empty() ? 100 : 1);
      continue;
    }
    const ucs_status_t armed = ucp_worker_arm(worker_);
    if (armed == UCS_ERR_BUSY) continue;
    pollfd p[2] = {{efd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    ::poll(p, 2, armed == UCS_OK ? -1 : 1);
  }
}

// ---------------------------------------------------------------------------------------
// Posting (any thread).

CollectiveInfo UcxCommunicator::Impl::Post(const ProcessGroup& group, PostArgs a) {
  CollectiveInfo& info = a.info;
  info.group_id = group.id;
  info.group_name = group.name();
  info.rank = rank_;
  info.bytes =
      Overflows(info.count, DataTypeSize(info.dtype)) ? -1 : info.count * DataTypeSize(info.dtype);
  const bool p2p = info.op == CollectiveOp::kSend || info.op == CollectiveOp::kRecv;

  bool member = group.rank_in_group >= 0 && group.rank_in_group < group.size() &&
                group.ranks[group.rank_in_group] == rank_;
  for (int r : group.ranks) member = member && r >= 0 && r < world_size_;
  std::string refuse;
  if (!member) {
    refuse =
        absl::StrCat("rank ", rank_, " is not member ", group.rank_in_group, " of ", group.name(),
                     " ranks [", absl::StrJoin(group.ranks, ", "), "] (world ", world_size_, ")");
  } else if (group.id < 0 || group.id >= (int64_t{1} << kGroupBits)) {
    refuse = absl::StrCat("group id ", group.id, " outside the tag range [0, ",
                          int64_t{1} << kGroupBits, ")");
  } else if (p2p && info.peer < 0) {
    refuse = a.invalid;
  }
  if (!refuse.empty()) {
    if (a.done) {
      a.done(info, absl::InvalidArgumentError(
                       absl::StrCat("UcxCommunicator: ", info.ToString(), ": ", refuse)));
    }
    return info;
  }
  if (info.count < 0) a.invalid = absl::StrCat("negative count ", info.count);
  if (info.bytes < 0) a.invalid = absl::StrCat("count ", info.count, " overflows");
  if (p2p && info.peer == rank_) a.invalid = "send/recv to itself";

  auto op = std::make_shared<Operation>();
  {
    absl::MutexLock lock(&mu_);
    std::tuple<int64_t, int, int, int> counter;
    if (p2p) {
      const bool send = info.op == CollectiveOp::kSend;
      counter = {group.id, send ? rank_ : info.peer, send ? info.peer : rank_, send ? 0 : 1};
    } else {
      counter = {group.id, rank_, -1, 0};
    }
    info.sequence = counters_[counter]++;
    op->id = next_id_++;
  }
  if (!options_.verify && !a.invalid.empty()) {
    if (a.done) {
      a.done(info, absl::InvalidArgumentError(absl::StrCat("UcxCommunicator: invalid ",
                                                           info.ToString(), ": ", a.invalid)));
    }
    return info;
  }

  Members m;
  m.ranks = group.ranks;
  m.me = group.rank_in_group;
  Descriptor mine;
  mine.info = info;
  mine.kind = group.kind;
  mine.index = group.index;
  mine.root_index = a.root_index;
  mine.group_size = group.size();
  mine.members_hash = MembersHash(group.ranks);
  mine.invalid = a.invalid;
  mine.send_counts = a.send_counts;
  mine.recv_counts = a.recv_counts;

  op->info = info;
  op->done = std::move(a.done);
  op->p2p = p2p;
  op->posted = Now();
  op->impl = this;
  op->plan = std::make_unique<Plan>(&scratch_pool_);
  Plan* plan = op->plan.get();
  if (p2p) {
    BuildPointToPoint(mine, a.p2p_send, a.p2p_recv, options_.verify, plan);
  } else {
    if (options_.verify) {
      op->verify_step = true;
      AddDescriptorExchange(m, mine, plan);
    }
    if (a.invalid.empty() && a.build) a.build(m, plan);
  }
  for (Step& step : plan->steps) {
    for (Xfer& x : step.sends) x.owner = op.get();
    for (Xfer& x : step.recvs) x.owner = op.get();
  }
  ++pending_;
  const CollectiveInfo returned = info;
  if (!Enqueue([this, op] { Start(op); })) {
    --pending_;
    if (op->done) {
      op->done(info, absl::CancelledError(absl::StrCat("UcxCommunicator: ", info.ToString(),
                                                       ": the communicator is closed")));
    }
  }
  return returned;
}

// ---------------------------------------------------------------------------------------
// Executor (progress thread).

namespace {

// FailedPeerOf: the first peer of `op` whose endpoint has failed, or -1.
int FailedPeerOf(const Operation& op, const std::vector<absl::Status>& failed) {
  for (const Step& step : op.plan->steps) {
    for (const auto* xfers : {&step.sends, &step.recvs}) {
      for (const Xfer& x : *xfers) {
        if (x.peer >= 0 && x.peer < static_cast<int>(failed.size()) && !failed[x.peer].ok()) {
          return x.peer;
        }
      }
    }
  }
  return -1;
}

}  // namespace

void UcxCommunicator::Impl::Start(std::shared_ptr<Operation> op) {
  Operation* raw = op.get();
  active_[op->id] = std::move(op);
  const int dead = FailedPeerOf(*raw, failed_peers_);
  if (dead >= 0) {
    Finish(raw, absl::UnavailableError(absl::StrCat("UcxCommunicator: ", raw->info.ToString(), ": ",
                                                    failed_peers_[dead].message())));
  } else {
    PostStep(raw);
  }
  MaybeErase(raw);
}

void UcxCommunicator::Impl::OnPeerFailed(int peer, ucs_status_t status) {
  if (!failed_peers_[peer].ok()) return;
  failed_peers_[peer] = absl::UnavailableError(
      absl::StrCat("the endpoint to rank ", peer, " failed (", ucs_status_string(status),
                   "): its process died or became unreachable"));
  std::vector<std::shared_ptr<Operation>> hit;
  for (auto& [id, op] : active_) {
    if (!op->finished && FailedPeerOf(*op, failed_peers_) >= 0) hit.push_back(op);
  }
  for (auto& op : hit) {
    Finish(op.get(), absl::UnavailableError(absl::StrCat("UcxCommunicator: ", op->info.ToString(),
                                                         ": ", failed_peers_[peer].message())));
    MaybeErase(op.get());
  }
}

void UcxCommunicator::Impl::PostStep(Operation* op) {
  std::vector<Step>& steps = op->plan->steps;
  while (!op->finished) {
    if (op->step == steps.size()) {
      Finish(op, absl::OkStatus());
      return;
    }
    Step& step = steps[op->step];
    if (step.before) step.before();
    op->step_pending = 0;
    op->posting = true;
    for (Xfer& x : step.recvs) {
      if (!op->finished) PostRecv(op, &x);
    }
    for (Xfer& x : step.sends) {
      if (!op->finished) PostSend(op, &x);
    }
    op->posting = false;
    if (op->finished || op->step_pending > 0) return;
    if (!RunAfter(op)) return;
    ++op->step;
  }
}

void UcxCommunicator::Impl::PostSend(Operation* op, Xfer* x) {
  const uint32_t step =
      x->tag_step == kStepIndexTag ? static_cast<uint32_t>(op->step) : x->tag_step;
  const ucp_tag_t tag = MakeTag(op->p2p, rank_, op->info.group_id, op->info.sequence, step);
  ucp_request_param_t p = {};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = SendCallback;
  p.user_data = x;
  ++op->outstanding;
  ++op->step_pending;
  ucs_status_ptr_t r =
      ucp_tag_send_nbx(eps_[x->peer], x->buffer, static_cast<size_t>(x->bytes), tag, &p);
  Posted(op, x, r, /*is_recv=*/false);
}

void UcxCommunicator::Impl::Posted(Operation* op, Xfer* x, ucs_status_ptr_t r, bool is_recv) {
  if (r == nullptr) {  // completed at once, no callback
    --op->outstanding;
    --op->step_pending;
    x->complete = true;
    return;
  }
  if (UCS_PTR_IS_ERR(r)) {
    --op->outstanding;
    --op->step_pending;
    Finish(op, CheckXfer(*op, *x, UCS_PTR_STATUS(r), -1, is_recv));
    return;
  }
  // UCX may already have run the callback inside the post call (it then freed `r`).
  if (!x->complete) x->request = r;
}

void UcxCommunicator::Impl::PostRecv(Operation* op, Xfer* x) {
  const uint32_t step =
      x->tag_step == kStepIndexTag ? static_cast<uint32_t>(op->step) : x->tag_step;
  const ucp_tag_t tag = MakeTag(op->p2p, x->peer, op->info.group_id, op->info.sequence, step);
  ucp_request_param_t p = {};
  // Completion always through the callback (which reports the received length).
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.cb.recv = RecvCallback;
  p.user_data = x;
  ++op->outstanding;
  ++op->step_pending;
  ucs_status_ptr_t r =
      ucp_tag_recv_nbx(worker_, x->buffer, static_cast<size_t>(x->bytes), tag, ~ucp_tag_t{0}, &p);
  Posted(op, x, r, /*is_recv=*/true);
}

absl::Status UcxCommunicator::Impl::CheckXfer(const Operation& op, const Xfer& x,
                                              ucs_status_t status, int64_t length,
                                              bool is_recv) const {
  if (status == UCS_ERR_MESSAGE_TRUNCATED) {
    return absl::FailedPreconditionError(
        absl::StrCat("UcxCommunicator: mismatch: ", op.info.ToString(), ": rank ", x.peer,
                     " sent more than the ", x.bytes, " bytes expected (step ", op.step, ")"));
  }
  if (status != UCS_OK) {
    return absl::UnavailableError(absl::StrCat("UcxCommunicator: ", op.info.ToString(), ": ",
                                               is_recv ? "receive from" : "send to", " rank ",
                                               x.peer, " failed: ", ucs_status_string(status)));
  }
  if (is_recv && x.exact_length && length != x.bytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "UcxCommunicator: mismatch: ", op.info.ToString(), ": received ", length,
        " bytes from rank ", x.peer, " where ", x.bytes, " were expected (step ", op.step, ")"));
  }
  return absl::OkStatus();
}

void UcxCommunicator::Impl::OnXfer(Operation* op, Xfer* x, ucs_status_t status, int64_t length,
                                   bool is_recv) {
  --op->outstanding;
  x->complete = true;
  x->received = length;
  if (!op->finished) {
    --op->step_pending;
    absl::Status s = CheckXfer(*op, *x, status, length, is_recv);
    if (!s.ok()) {
      Finish(op, s);
    } else if (!op->posting && op->step_pending == 0 && RunAfter(op)) {
      ++op->step;
      PostStep(op);
    }
  }
  if (!op->posting) MaybeErase(op);
}

bool UcxCommunicator::Impl::RunAfter(Operation* op) {
  Step& step = op->plan->steps[op->step];
  if (!step.after) return true;
  absl::Status s = step.after();
  if (s.ok()) return true;
  Finish(op, s);
  return false;
}

void UcxCommunicator::Impl::Finish(Operation* op, absl::Status status) {
  if (op->finished) return;
  op->finished = true;
  --pending_;
  if (worker_ != nullptr && op->step < op->plan->steps.size()) {
    // Receives still posted would write into the caller's buffers: cancel them (their
    // callbacks then run with UCS_ERR_CANCELED). Sends cannot be recalled.
    for (Xfer& x : op->plan->steps[op->step].recvs) {
      if (x.request != nullptr) ucp_request_cancel(worker_, x.request);
    }
  }
  if (op->done) op->done(op->info, std::move(status));
  op->done = nullptr;
}

void UcxCommunicator::Impl::MaybeErase(Operation* op) {
  if (op->finished && op->outstanding == 0) active_.erase(op->id);
}

std::string UcxCommunicator::Impl::TimeoutReport(const Operation& op, absl::Time now) const {
  std::vector<int> arrived = {rank_}, missing, waiting;
  if (op.step < op.plan->steps.size()) {
    for (const Xfer& x : op.plan->steps[op.step].recvs) {
      (x.complete ? arrived : waiting).push_back(x.peer);
    }
  }
  std::sort(arrived.begin(), arrived.end());
  std::string s = absl::StrCat(
      "UcxCommunicator: ", CollectiveOpName(op.info.op), " on ", op.info.group_name, " (group ",
      op.info.group_id, ") seq ", op.info.sequence, " did not complete within ",
      absl::FormatDuration(options_.timeout), " (posted ", absl::FormatDuration(now - op.posted),
      " ago): rank ", rank_, " posted ", op.info.ToString(), "; ");
  if (op.step == 0 && (op.verify_step || op.p2p)) {
    absl::StrAppend(&s, "ranks arrived: [", absl::StrJoin(arrived, ", "), "]; ranks not arrived: [",
                    absl::StrJoin(waiting, ", "), "]");
  } else {
    absl::StrAppend(&s, "step ", op.step, " of ", op.plan->steps.size(),
                    " waiting for data from ranks [", absl::StrJoin(waiting, ", "), "]");
  }
  return s;
}

std::vector<absl::Status> UcxCommunicator::Impl::CheckTimeouts(absl::Time now) {
  auto result = std::make_shared<std::promise<std::vector<absl::Status>>>();
  std::future<std::vector<absl::Status>> future = result->get_future();
  const bool queued = Enqueue([this, now, result] {
    std::vector<absl::Status> reports;
    std::vector<std::shared_ptr<Operation>> late;
    for (auto& [id, op] : active_) {
      if (!op->finished && now - op->posted >= options_.timeout) late.push_back(op);
    }
    for (auto& op : late) {
      absl::Status s = absl::DeadlineExceededError(TimeoutReport(*op, now));
      reports.push_back(s);
      Finish(op.get(), s);
      MaybeErase(op.get());
    }
    result->set_value(std::move(reports));
  });
  if (!queued) return {};  // closed: nothing is pending
  return future.get();
}

std::vector<std::string> UcxCommunicator::Impl::WaitingReports(absl::Time now,
                                                               absl::Duration older_than,
                                                               int limit) {
  auto result = std::make_shared<std::promise<std::vector<std::string>>>();
  std::future<std::vector<std::string>> future = result->get_future();
  const bool queued = Enqueue([this, now, older_than, limit, result] {
    std::vector<const Operation*> late;
    for (auto& [id, op] : active_) {
      // Point-to-point receives wait by design (a pipeline link keeps one posted for its
      // neighbour's next header; the heartbeat has its own timeout): collectives only.
      if (!op->finished && !op->p2p && now - op->posted >= older_than) late.push_back(op.get());
    }
    std::sort(late.begin(), late.end(),
              [](const Operation* a, const Operation* b) { return a->posted < b->posted; });
    std::vector<std::string> lines;
    for (const Operation* op : late) {
      if (static_cast<int>(lines.size()) >= limit) break;
      std::vector<int> waiting;
      if (op->step < op->plan->steps.size()) {
        for (const Xfer& x : op->plan->steps[op->step].recvs) {
          if (!x.complete) waiting.push_back(x.peer);
        }
      }
      std::sort(waiting.begin(), waiting.end());
      absl::Duration left = options_.timeout - (now - op->posted);
      if (left < absl::ZeroDuration()) left = absl::ZeroDuration();
      const bool arrival = op->step == 0 && (op->verify_step || op->p2p);
      lines.push_back(absl::StrCat(
          "rank ", rank_, " has waited ",
          absl::FormatDuration(absl::Seconds(absl::ToInt64Seconds(now - op->posted))), " in ",
          CollectiveOpName(op->info.op), " on ", op->info.group_name, " (group ",
          op->info.group_id, ") seq ", op->info.sequence, ": ",
          arrival ? "ranks not arrived [" : absl::StrCat("step ", op->step, " waiting for data from ranks ["),
          absl::StrJoin(waiting, ", "), "]; ",
          absl::FormatDuration(absl::Seconds(absl::ToInt64Seconds(left))),
          " left before the timeout of ", absl::FormatDuration(options_.timeout),
          options_.timeout_hint));
    }
    result->set_value(std::move(lines));
  });
  if (!queued) return {};
  return future.get();
}

// ---------------------------------------------------------------------------------------
// UcxCommunicator: argument checks, plans, and the Impl.

UcxCommunicator::UcxCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UcxCommunicator::~UcxCommunicator() = default;

absl::StatusOr<std::unique_ptr<UcxCommunicator>> UcxCommunicator::Create(
    const RendezvousOptions& rendezvous, int rank, int world_size, Options options) {
  MXMACA_ASSIGN_OR_RETURN(std::unique_ptr<Rendezvous> rv,
                          Rendezvous::Connect(rendezvous, rank, world_size));
  auto impl = std::make_unique<Impl>(std::move(options), rank, world_size, std::move(rv));
  MXMACA_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<UcxCommunicator>(new UcxCommunicator(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<UcxCommunicator>> UcxCommunicator::CreateFromLaunchEnv(
    const LaunchEnv& env, absl::Duration rendezvous_timeout, Options options) {
  RendezvousOptions rv;
  rv.master_addr = env.master_addr;
  rv.master_port = env.master_port;
  rv.timeout = rendezvous_timeout;
  rv.progress = options.progress;
  rv.progress_interval = options.progress_interval;
  rv.timeout_hint = options.timeout_hint;
  return Create(rv, env.rank, env.world_size, std::move(options));
}

absl::Status UcxCommunicator::Close(const std::function<void()>& all_arrived) {
  return impl_->Close(all_arrived);
}
int UcxCommunicator::rank() const { return impl_->rank(); }
int UcxCommunicator::world_size() const { return impl_->world_size(); }
int UcxCommunicator::pending_operations() const { return impl_->pending(); }
std::vector<absl::Status> UcxCommunicator::CheckTimeouts(absl::Time now) {
  return impl_->CheckTimeouts(now);
}
std::vector<std::string> UcxCommunicator::WaitingReports(absl::Time now,
                                                         absl::Duration older_than, int limit) {
  return impl_->WaitingReports(now, older_than, limit);
}

namespace {

// UseRing: whether a buffer of `bytes` in a group of `n` takes the ring.
bool UseRing(const UcxCommunicator::Options& o, int64_t bytes, int n, bool reduction) {
  if (reduction && o.reduction != ReductionOrder::kRing) return false;
  return bytes >= o.ring_min_bytes && n > 2 && n <= kMaxRingGroup;
}

}  // namespace

CollectiveInfo UcxCommunicator::AllReduceSum(const ProcessGroup& group, const float* send,
                                             float* recv, int64_t count, DoneCallback done) {
  Impl::PostArgs a;
  a.info.op = CollectiveOp::kAllReduce;
  a.info.dtype = DataType::kFloat32;
  a.info.count = count;
  a.done = std::move(done);
  if (count > 0 && (send == nullptr || recv == nullptr)) a.invalid = "null buffer";
  const bool ring = UseRing(impl_->options(), count * 4, group.size(), true);
  a.build = [=](const Members& m, Plan* plan) {
    if (ring) {
      BuildAllReduceRing(m, send, recv, count, plan);
    } else {
      BuildAllReduceRankOrder(m, send, recv, count, plan);
    }
  };
  return impl_->Post(group, std::move(a));
}

CollectiveInfo UcxCommunicator::AllGather(const ProcessGroup& group, const void* send, void* recv,
                                          int64_t count, DataType dtype, DoneCallback done) {
  Impl::PostArgs a;
  a.info.op = CollectiveOp::kAllGather;
  a.info.dtype = dtype;
  a.info.count = count;
  a.done = std::move(done);
  if (count > 0 && (send == nullptr || recv == nullptr)) a.invalid = "null buffer";
  const int64_t bytes = count * DataTypeSize(dtype);
  const bool ring = UseRing(impl_->options(), bytes * group.size(), group.size(), false);
  a.build = [=](const Members& m, Plan* plan) { BuildAllGather(m, send, recv, bytes, ring, plan); };
  return impl_->Post(group, std::move(a));
}

CollectiveInfo UcxCommunicator::ReduceScatterSum(const ProcessGroup& group, const float* send,
                                                 float* recv, int64_t recv_count,
                                                 DoneCallback done) {
  Impl::PostArgs a;
  a.info.op = CollectiveOp::kReduceScatter;
  a.info.dtype = DataType::kFloat32;
  a.info.count = recv_count * group.size();
  a.done = std::move(done);
  if (recv_count > 0 && (send == nullptr || recv == nullptr)) a.invalid = "null buffer";
  const bool ring = UseRing(impl_->options(), a.info.count * 4, group.size(), true);
  a.build = [=](const Members& m, Plan* plan) {
    if (ring) {
      BuildReduceScatterRing(m, send, recv, recv_count, plan);
    } else {
      BuildReduceScatterRankOrder(m, send, recv, recv_count, plan);
    }
  };
  return impl_->Post(group, std::move(a));
}

CollectiveInfo UcxCommunicator::Broadcast(const ProcessGroup& group, int root, void* buffer,
                                          int64_t count, DataType dtype, DoneCallback done) {
  Impl::PostArgs a;
  a.info.op = CollectiveOp::kBroadcast;
  a.info.dtype = dtype;
  a.info.count = count;
  a.root_index = root;
  a.done = std::move(done);
  if (root < 0 || root >= group.size()) {
    a.invalid = absl::StrCat("root ", root, " outside group of ", group.size());
  } else {
    a.info.peer = group.ranks[root];
  }
  if (count > 0 && buffer == nullptr) a.invalid = "null buffer";
  const int64_t bytes = count * DataTypeSize(dtype);
  const bool ring = UseRing(impl_->options(), bytes, group.size(), false);
  a.build = [=](const Members& m, Plan* plan) {
    BuildBroadcast(m, root, buffer, bytes, ring, plan);
  };
  return impl_->Post(group, std::move(a));
}

namespace {

// PointToPoint: the post of a send or receive of `count` elements with member `peer`
// (`buffer` the caller's; checked for null when count > 0).
UcxCommunicator::Impl::PostArgs PointToPoint(CollectiveOp op, const ProcessGroup& group, int peer,
                                             const void* buffer, int64_t count, DataType dtype,
                                             DoneCallback done) {
  UcxCommunicator::Impl::PostArgs a;
  a.info.op = op;
  a.info.dtype = dtype;
  a.info.count = count;
  a.done = std::move(done);
  if (peer < 0 || peer >= group.size()) {
    a.invalid = absl::StrCat("peer ", peer, " outside group of ", group.size());
  } else {
    a.info.peer = group.ranks[peer];
  }
  if (count > 0 && buffer == nullptr) a.invalid = "null buffer";
  return a;
}

}  // namespace

CollectiveInfo UcxCommunicator::Send(const ProcessGroup& group, int peer, const void* buffer,
                                     int64_t count, DataType dtype, DoneCallback done) {
  Impl::PostArgs a =
      PointToPoint(CollectiveOp::kSend, group, peer, buffer, count, dtype, std::move(done));
  a.p2p_send = buffer;
  return impl_->Post(group, std::move(a));
}

CollectiveInfo UcxCommunicator::Recv(const ProcessGroup& group, int peer, void* buffer,
                                     int64_t count, DataType dtype, DoneCallback done) {
  Impl::PostArgs a =
      PointToPoint(CollectiveOp::kRecv, group, peer, buffer, count, dtype, std::move(done));
  a.p2p_recv = buffer;
  return impl_->Post(group, std::move(a));
}

CollectiveInfo UcxCommunicator::AllToAllV(const ProcessGroup& group, const void* send,
                                          const std::vector<int64_t>& send_counts,
                                          const std::vector<int64_t>& send_displs, void* recv,
                                          const std::vector<int64_t>& recv_counts,
                                          const std::vector<int64_t>& recv_displs, DataType dtype,
                                          DoneCallback done) {
  Impl::PostArgs a;
  a.info.op = CollectiveOp::kAllToAllV;
  a.info.dtype = dtype;
  a.done = std::move(done);
  const size_t n = static_cast<size_t>(group.size());
  if (send_counts.size() != n || send_displs.size() != n || recv_counts.size() != n ||
      recv_displs.size() != n) {
    a.invalid = absl::StrCat("count/displacement vectors have sizes ", send_counts.size(), ", ",
                             send_displs.size(), ", ", recv_counts.size(), ", ", recv_displs.size(),
                             "; expected the group size ", n);
  } else {
    int64_t total = 0, recv_total = 0;
    for (size_t j = 0; j < n; ++j) {
      if (send_counts[j] < 0 || send_displs[j] < 0 || recv_counts[j] < 0 || recv_displs[j] < 0) {
        a.invalid = absl::StrCat("negative count or displacement for member ", j);
      }
      total += send_counts[j];
      recv_total += recv_counts[j];
    }
    a.info.count = total;
    if ((total > 0 && send == nullptr) || (recv_total > 0 && recv == nullptr)) {
      a.invalid = "null buffer";
    }
    a.send_counts = send_counts;
    a.recv_counts = recv_counts;
  }
  const int64_t e = DataTypeSize(dtype);
  auto scaled = [e](const std::vector<int64_t>& v) {
    std::vector<int64_t> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = v[i] * e;
    return out;
  };
  a.build = [send, recv, sb = scaled(send_counts), so = scaled(send_displs),
             rb = scaled(recv_counts), ro = scaled(recv_displs)](const Members& m, Plan* plan) {
    BuildAllToAllV(m, send, sb, so, recv, rb, ro, plan);
  };
  return impl_->Post(group, std::move(a));
}

}  // namespace mxmaca::transport::ucx
