// transport/nccl/operation_table_test.cc: NcclCommunicator's bookkeeping against a fake
// OperationEngine (no GPU): sequence numbers, in-order completion, refusals, failed
// launches and completions, batches, asynchronous errors, timeouts, cancellation, and a
// poller thread racing a posting thread.
#include "transport/nccl/operation_table.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <numeric>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace mxmaca::transport::nccl {
namespace {

// FakeLaunch: one engine launch; the test (or a "device" thread) completes or fails it.
struct FakeLaunch {
  std::vector<CollectiveInfo> ops;
  std::atomic<bool> complete{false};
  absl::Status error;
};

class FakeEngine : public OperationEngine {
 public:
  absl::StatusOr<std::shared_ptr<void>> Launch(const std::vector<Operation*>& ops,
                                               const std::string& context) override {
    absl::MutexLock lock(&mu);
    if (!next_launch_error.ok()) {
      absl::Status e = std::move(next_launch_error);
      next_launch_error = absl::OkStatus();
      return absl::Status(e.code(), absl::StrCat(context, ": ", e.message()));
    }
    auto launch = std::make_shared<FakeLaunch>();
    for (Operation* op : ops) {
      // The closure gets this group's communicator and the stream.
      const absl::Status s = op->launch(CommOf(op->info.group_id), &stream, context);
      if (!s.ok()) return s;
      launch->ops.push_back(op->info);
    }
    launches.push_back(launch);
    return std::shared_ptr<void>(launch);
  }
  absl::StatusOr<bool> Completed(const std::shared_ptr<void>& completion) override {
    auto* launch = static_cast<FakeLaunch*>(completion.get());
    if (!launch->error.ok()) return launch->error;
    return launch->complete.load();
  }
  absl::Status AsyncError(int64_t group_id) override {
    absl::MutexLock lock(&mu);
    ++async_checks;
    auto it = async_errors.find(group_id);
    return it == async_errors.end() ? absl::OkStatus() : it->second;
  }
  void Abort(int64_t group_id) override {
    absl::MutexLock lock(&mu);
    aborted.push_back(group_id);
  }
  static void* CommOf(int64_t group_id) { return reinterpret_cast<void*>(group_id + 1000); }
  std::shared_ptr<FakeLaunch> launch(size_t i) {
    absl::MutexLock lock(&mu);
    return launches.at(i);
  }
  size_t num_launches() {
    absl::MutexLock lock(&mu);
    return launches.size();
  }

  absl::Mutex mu;
  int stream = 0;
  std::vector<std::shared_ptr<FakeLaunch>> launches;
  absl::Status next_launch_error;
  std::map<int64_t, absl::Status> async_errors;
  std::vector<int64_t> aborted;
  int async_checks = 0;
};

// Calls: every `done` in arrival order.
struct Calls {
  absl::Mutex mu;
  std::vector<std::pair<CollectiveInfo, absl::Status>> v;
  DoneCallback Callback() {
    return [this](const CollectiveInfo& info, absl::Status s) {
      absl::MutexLock lock(&mu);
      v.emplace_back(info, std::move(s));
    };
  }
  size_t size() {
    absl::MutexLock lock(&mu);
    return v.size();
  }
};

ProcessGroup Group(int64_t id, GroupKind kind, std::vector<int> ranks, int me) {
  ProcessGroup g;
  g.id = id;
  g.kind = kind;
  g.ranks = std::move(ranks);
  g.rank_in_group = me;
  return g;
}

// Rank 1 of a world of 4: A = data_parallel#0 [0, 1], B = tensor_model_parallel#0 [1, 2, 3].
const ProcessGroup kA = Group(10, GroupKind::kDataParallel, {0, 1}, 1);
const ProcessGroup kB = Group(11, GroupKind::kTensorModelParallel, {1, 2, 3}, 0);

CollectiveInfo Info(CollectiveOp op, int64_t count, int peer = -1) {
  CollectiveInfo info;
  info.op = op;
  info.count = count;
  info.peer = peer;
  return info;
}

// Launcher: a launch closure that records the communicator it was given.
LaunchFn Launcher(std::vector<void*>* comms) {
  return [comms](void* comm, void*, const std::string&) {
    comms->push_back(comm);
    return absl::OkStatus();
  };
}

struct Fixture {
  FakeEngine engine;
  absl::Time now = absl::FromUnixSeconds(1000);
  OperationTable table{1, 4, &engine, [this] { return now; }, absl::Minutes(5)};
  Calls calls;
  std::vector<void*> comms;
  Fixture() {
    table.AddGroup(kA);
    table.AddGroup(kB);
  }
  CollectiveInfo Post(const ProcessGroup& g, CollectiveInfo info,
                      absl::Status invalid = absl::OkStatus()) {
    return table.Post(g, info, invalid, Launcher(&comms), calls.Callback());
  }
};

TEST_CASE("sequence numbers per group and channel; done once each, in post order") {
  Fixture f;
  const CollectiveInfo a0 = f.Post(kA, Info(CollectiveOp::kAllReduce, 256));
  const CollectiveInfo b0 = f.Post(kB, Info(CollectiveOp::kAllGather, 8));
  const CollectiveInfo s0 = f.Post(kB, Info(CollectiveOp::kSend, 4, 3));
  const CollectiveInfo r0 = f.Post(kB, Info(CollectiveOp::kRecv, 4, 3));
  const CollectiveInfo s1 = f.Post(kB, Info(CollectiveOp::kSend, 4, 3));
  const CollectiveInfo a1 = f.Post(kA, Info(CollectiveOp::kAllReduce, 256));
  CHECK(a0.sequence == 0);
  CHECK(b0.sequence == 0);
  CHECK(s0.sequence == 0);
  CHECK(r0.sequence == 0);
  CHECK(s1.sequence == 1);
  CHECK(a1.sequence == 1);
  CHECK(a0.group_name == "data_parallel#0");
  CHECK(a0.rank == 1);
  CHECK(a0.bytes == 1024);
  CHECK(s0.peer == 3);
  REQUIRE(f.engine.num_launches() == 6);
  CHECK(f.comms == std::vector<void*>{FakeEngine::CommOf(10), FakeEngine::CommOf(11),
                                      FakeEngine::CommOf(11), FakeEngine::CommOf(11),
                                      FakeEngine::CommOf(11), FakeEngine::CommOf(10)});
  CHECK(f.table.pending() == 6);
  CHECK(f.table.Poll(false));
  CHECK(f.calls.size() == 0);
  f.engine.launch(1)->complete = true;  // the second cannot finish before the first
  CHECK(f.table.Poll(false));
  CHECK(f.calls.size() == 0);
  f.engine.launch(0)->complete = true;
  CHECK(f.table.Poll(false));
  REQUIRE(f.calls.size() == 2);
  for (size_t i = 2; i < 6; ++i) f.engine.launch(i)->complete = true;
  CHECK_FALSE(f.table.Poll(false));
  REQUIRE(f.calls.size() == 6);
  const std::vector<CollectiveInfo> want = {a0, b0, s0, r0, s1, a1};
  for (size_t i = 0; i < 6; ++i) {
    CHECK(f.calls.v[i].first.ToString() == want[i].ToString());
    CHECK(f.calls.v[i].second.ok());
  }
  CHECK(f.table.pending() == 0);
  CHECK_FALSE(f.table.Poll(false));
  CHECK(f.calls.size() == 6);
}

TEST_CASE("refusals: done at once with the reason, no sequence consumed, nothing launched") {
  Fixture f;
  f.Post(Group(10, GroupKind::kDataParallel, {0, 1}, 0), Info(CollectiveOp::kAllReduce, 4));
  f.Post(Group(12, GroupKind::kDataParallel, {0, 1}, 1), Info(CollectiveOp::kAllReduce, 4));
  f.Post(Group(10, GroupKind::kDataParallel, {1, 3}, 0), Info(CollectiveOp::kAllReduce, 4));
  f.Post(kA, Info(CollectiveOp::kAllReduce, -4), absl::InvalidArgumentError("negative count -4"));
  REQUIRE(f.calls.size() == 4);
  CHECK(f.calls.v[0].second.message() ==
        "NcclCommunicator: all_reduce on data_parallel#0 (group 10) seq 0 fp32 x 4 (16 bytes) "
        "from rank 1: rank 1 is not member 0 of data_parallel#0 ranks [0, 1] (world 4)");
  CHECK(absl::EndsWith(f.calls.v[1].second.message(),
                       "group 12 (data_parallel#0) was not given to NcclCommunicator::Create"));
  CHECK(absl::EndsWith(f.calls.v[2].second.message(),
                       "data_parallel#0 ranks [1, 3] differ from the group given to Create: "
                       "[0, 1]"));
  CHECK(absl::EndsWith(f.calls.v[3].second.message(), ": negative count -4"));
  CHECK(f.calls.v[3].first.bytes == -1);
  for (auto& [info, status] : f.calls.v) {
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  }
  CHECK(f.engine.num_launches() == 0);
  CHECK(f.table.pending() == 0);
  CHECK(f.Post(kA, Info(CollectiveOp::kAllReduce, 4)).sequence == 0);
}

TEST_CASE("a failed launch fails done at once; a failed completion fails its operation") {
  Fixture f;
  f.engine.next_launch_error = absl::InternalError("ncclAllReduce failed");
  const CollectiveInfo a0 = f.Post(kA, Info(CollectiveOp::kAllReduce, 4));
  REQUIRE(f.calls.size() == 1);
  CHECK(f.calls.v[0].second.message() ==
        absl::StrCat("NcclCommunicator: ", a0.ToString(), ": ncclAllReduce failed"));
  CHECK(f.table.pending() == 0);
  const CollectiveInfo a1 = f.Post(kA, Info(CollectiveOp::kAllReduce, 4));
  CHECK(a1.sequence == 1);  // the failed post was valid: it consumed seq 0
  f.engine.launch(0)->error = absl::InternalError("cudaErrorIllegalAddress");
  CHECK_FALSE(f.table.Poll(false));
  REQUIRE(f.calls.size() == 2);
  CHECK(f.calls.v[1].second.code() == absl::StatusCode::kInternal);
  CHECK(f.calls.v[1].second.message() ==
        absl::StrCat("NcclCommunicator: ", a1.ToString(), ": cudaErrorIllegalAddress"));
}

TEST_CASE("a batch launches once at EndBatch and completes together") {
  Fixture f;
  f.table.BeginBatch();
  f.Post(kB, Info(CollectiveOp::kSend, 4, 2));
  f.Post(kB, Info(CollectiveOp::kRecv, 4, 2));
  f.Post(kA, Info(CollectiveOp::kAllReduce, 4));
  CHECK(f.engine.num_launches() == 0);
  CHECK(f.table.pending() == 3);
  REQUIRE(f.table.EndBatch().ok());
  REQUIRE(f.engine.num_launches() == 1);
  CHECK(f.engine.launch(0)->ops.size() == 3);
  CHECK(f.comms.size() == 3);
  CHECK(f.table.Poll(false));
  CHECK(f.calls.size() == 0);
  f.engine.launch(0)->complete = true;
  CHECK_FALSE(f.table.Poll(false));
  CHECK(f.calls.size() == 3);
  CHECK(f.table.EndBatch().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(f.table.EndBatch().code() == absl::StatusCode::kFailedPrecondition);
  // A batch whose launch fails: every member gets the error, and so does EndBatch.
  f.table.BeginBatch();
  f.Post(kA, Info(CollectiveOp::kAllReduce, 4));
  f.Post(kB, Info(CollectiveOp::kBroadcast, 4, 1));
  f.engine.next_launch_error = absl::UnavailableError("ncclGroupEnd failed");
  const absl::Status s = f.table.EndBatch();
  CHECK(s.code() == absl::StatusCode::kUnavailable);
  CHECK(absl::StrContains(s.message(), "batch of 2 operations"));
  REQUIRE(f.calls.size() == 5);
  CHECK(f.calls.v[3].second == s);
  CHECK(f.calls.v[4].second == s);
  CHECK(f.table.pending() == 0);
}

TEST_CASE("an asynchronous NCCL error aborts its group only and fails its operations") {
  Fixture f;
  f.Post(kA, Info(CollectiveOp::kAllReduce, 4));
  f.Post(kB, Info(CollectiveOp::kAllGather, 4));
  const CollectiveInfo a1 = f.Post(kA, Info(CollectiveOp::kAllReduce, 4));
  f.table.BeginBatch();
  f.Post(kA, Info(CollectiveOp::kAllReduce, 4));  // batched before the failure
  f.engine.async_errors[10] = absl::UnavailableError("ncclRemoteError: peer 0 is gone");
  CHECK(f.table.Poll(false));  // not asked
  CHECK(f.calls.size() == 0);
  CHECK(f.table.Poll(true));
  CHECK(f.engine.aborted == std::vector<int64_t>{10});
  REQUIRE(f.calls.size() == 2);
  CHECK(f.calls.v[1].second.code() == absl::StatusCode::kUnavailable);
  CHECK(f.calls.v[1].second.message() ==
        absl::StrCat("NcclCommunicator: ", a1.ToString(), ": ncclRemoteError: peer 0 is gone"));
  CHECK(f.table.pending() == 2);  // B's all-gather and the batched all-reduce
  const absl::Status batch = f.table.EndBatch();
  CHECK(batch.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(batch.message(), "is no longer usable: ncclRemoteError: peer 0 is gone"));
  f.Post(kA, Info(CollectiveOp::kBroadcast, 4, 0));
  REQUIRE(f.calls.size() == 4);
  CHECK(absl::EndsWith(f.calls.v[3].second.message(),
                       "the communicator of data_parallel#0 is no longer usable: "
                       "ncclRemoteError: peer 0 is gone"));
  // A's launches completing after the abort do not call done again; B still completes.
  for (size_t i = 0; i < f.engine.num_launches(); ++i) f.engine.launch(i)->complete = true;
  CHECK_FALSE(f.table.Poll(true));
  REQUIRE(f.calls.size() == 5);
  CHECK(f.calls.v[4].first.group_id == 11);
  CHECK(f.calls.v[4].second.ok());
  CHECK(f.engine.aborted.size() == 1);
}

TEST_CASE("timeouts: the late operation's report, its group aborted, others untouched") {
  Fixture f;
  const absl::Time t0 = f.now;
  const CollectiveInfo a0 = f.Post(kA, Info(CollectiveOp::kAllReduce, 4));
  f.now = t0 + absl::Minutes(1);
  const CollectiveInfo b0 = f.Post(kB, Info(CollectiveOp::kAllGather, 4));
  f.now = t0 + absl::Minutes(2);
  const CollectiveInfo a1 = f.Post(kA, Info(CollectiveOp::kAllReduce, 4));
  CHECK(f.table.CheckTimeouts(t0 + absl::Minutes(5) - absl::Seconds(1)).empty());
  const absl::Time late = t0 + absl::Minutes(5);
  const auto reports = f.table.CheckTimeouts(late);
  REQUIRE(reports.size() == 2);
  CHECK(reports[0].code() == absl::StatusCode::kDeadlineExceeded);
  const std::vector<PendingOp> in_flight = {{a0, t0},
                                            {b0, t0 + absl::Minutes(1)},
                                            {a1, t0 + absl::Minutes(2)}};
  CHECK(reports[0].message() ==
        TimeoutReport(in_flight[0], kA.ranks, in_flight, 1, absl::Minutes(5), late));
  CHECK(reports[1].code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StartsWith(reports[1].message(),
                         absl::StrCat("NcclCommunicator: ", a1.ToString(),
                                      ": aborted after a timeout of data_parallel#0 seq 0 (")));
  CHECK(f.engine.aborted == std::vector<int64_t>{10});
  REQUIRE(f.calls.size() == 2);
  CHECK(f.calls.v[0].second == reports[0]);
  CHECK(f.table.pending() == 1);
  const auto more = f.table.CheckTimeouts(t0 + absl::Minutes(6));
  REQUIRE(more.size() == 1);
  CHECK(absl::StrContains(more[0].message(), "all_gather on tensor_model_parallel#0 (group 11) "
                                             "seq 0 did not complete"));
  for (size_t i = 0; i < 3; ++i) f.engine.launch(i)->complete = true;
  CHECK_FALSE(f.table.Poll(true));
  CHECK(f.calls.size() == 3);  // no second done
}

TEST_CASE("CancelAll fails launched and batched operations with Cancelled") {
  Fixture f;
  f.Post(kA, Info(CollectiveOp::kAllReduce, 4));
  f.table.BeginBatch();
  f.Post(kB, Info(CollectiveOp::kAllGather, 4));
  CHECK(f.table.BusyGroups() == std::set<int64_t>{10});
  f.table.CancelAll();
  REQUIRE(f.calls.size() == 2);
  CHECK(f.calls.v[0].second.code() == absl::StatusCode::kCancelled);
  CHECK(absl::EndsWith(f.calls.v[0].second.message(),
                       "still in flight when the communicator was destroyed"));
  CHECK(absl::EndsWith(f.calls.v[1].second.message(),
                       "in a batch never ended before the communicator was destroyed"));
  CHECK(f.table.pending() == 0);
}

TEST_CASE("a poller thread and a posting thread: every done once, in sequence order") {
  FakeEngine engine;
  OperationTable table(1, 4, &engine, {}, absl::Minutes(5));
  table.AddGroup(kA);
  table.AddGroup(kB);
  const int n = 2000;
  absl::Mutex mu;
  std::map<int64_t, std::vector<uint64_t>> seen;  // group -> sequences in done order
  std::atomic<int> dones{0};
  int errors = 0;
  std::thread poller([&] {
    while (table.WaitForWork(absl::Microseconds(50))) table.Poll(true);
  });
  std::atomic<bool> posting{true};
  std::thread device([&] {  // completes launches in order, at random moments
    std::mt19937 gen(std::random_device{}());
    size_t next = 0;
    while (posting || next < engine.num_launches()) {
      if (next < engine.num_launches() && gen() % 3 == 0) engine.launch(next++)->complete = true;
      std::this_thread::yield();
    }
  });
  std::vector<void*> comms;
  for (int i = 0; i < n; ++i) {
    const ProcessGroup& g = i % 3 == 0 ? kB : kA;
    table.Post(
        g, Info(CollectiveOp::kAllReduce, i + 1),
        absl::OkStatus(), [](void*, void*, const std::string&) { return absl::OkStatus(); },
        [&](const CollectiveInfo& info, absl::Status s) {  // no Catch2 macros off-thread
          absl::MutexLock lock(&mu);
          if (!s.ok()) ++errors;
          seen[info.group_id].push_back(info.sequence);
          ++dones;
        });
  }
  posting = false;
  device.join();
  for (int spin = 0; spin < 20000 && dones < n; ++spin) absl::SleepFor(absl::Milliseconds(1));
  table.Stop();
  poller.join();
  CHECK(dones == n);
  CHECK(errors == 0);
  CHECK(table.pending() == 0);
  for (auto& [group, seqs] : seen) {
    std::vector<uint64_t> want(seqs.size());
    std::iota(want.begin(), want.end(), uint64_t{0});
    CHECK(seqs == want);
  }
  CHECK(seen[10].size() + seen[11].size() == static_cast<size_t>(n));
}

}  // namespace
}  // namespace mxmaca::transport::nccl
