// transport/ucx/ucx_communicator_test.cc (tag multiprocess): 2 and 4 forked processes on
// localhost talk through UcxCommunicator (UCX_TLS=tcp, and shm+tcp; UCX_NET_DEVICES=lo).
// Every collective on fresh random data is compared with the in-process backend's result
// (InProcessHub run inside each child for all ranks): bit for bit in rank-order mode; ring
// mode against an independent ring-order loop. Also: send/recv FIFO per channel, a count
// mismatch reported on every rank (and the communicator usable afterwards), an invalid
// post, and a rank that never posts giving a timeout report through CollectiveWatchdog.
#include "transport/ucx/ucx_communicator.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "transport/collective_watchdog.h"
#include "transport/inprocess_communicator.h"
#include "transport/rank_grid.h"
#include "transport/ucx/multiprocess_testing.h"

namespace mxmaca::transport::ucx {
namespace {

// Waiter: collects `done` calls; the child's test thread waits for them.
class Waiter {
 public:
  DoneCallback Callback() {
    return [this](const CollectiveInfo&, absl::Status s) {
      absl::MutexLock lock(&mu_);
      statuses_.push_back(std::move(s));
    };
  }
  // Wait: the first `n` statuses, or an empty vector after 20 s.
  std::vector<absl::Status> Wait(size_t n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() { return statuses_.size() >= n; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(20))) return {};
    return statuses_;
  }
  void Clear() {
    absl::MutexLock lock(&mu_);
    statuses_.clear();
  }

 private:
  absl::Mutex mu_;
  std::vector<absl::Status> statuses_;
};

// WaitOk: "" when `n` completions all succeeded, else what went wrong.
std::string WaitOk(Waiter& w, size_t n, const std::string& what) {
  std::vector<absl::Status> s = w.Wait(n);
  w.Clear();
  if (s.size() < n) return absl::StrCat(what, ": no completion within 20 s");
  for (const absl::Status& st : s) {
    if (!st.ok()) return absl::StrCat(what, ": ", st.ToString());
  }
  return "";
}

std::vector<float> RandomFloats(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Job: one child's communicator, the rank grid (TP2 over 4 ranks, or world 2) and the
// groups the tests use.
struct Job {
  std::unique_ptr<UcxCommunicator> comm;
  std::vector<GroupKind> kinds;
};

absl::StatusOr<Job> Join(int rank, int world, int port, const char* tls,
                         UcxCommunicator::Options options) {
  setenv("UCX_TLS", tls, 1);
  setenv("UCX_NET_DEVICES", "lo", 1);
  setenv("UCX_WARN_UNUSED_ENV_VARS", "n", 1);
  RendezvousOptions rv;
  rv.master_port = port;
  rv.timeout = absl::Seconds(20);
  auto comm = UcxCommunicator::Create(rv, rank, world, std::move(options));
  if (!comm.ok()) return comm.status();
  Job job;
  job.comm = std::move(*comm);
  job.kinds = {GroupKind::kWorld, GroupKind::kTensorModelParallel, GroupKind::kDataParallel};
  return job;
}

ProcessGroup GroupOf(const RankGrid& grid, GroupKind kind, int rank) {
  return **grid.Group(kind, rank);
}

std::string FirstDifference(const std::vector<float>& got, const std::vector<float>& want,
                            const std::string& what) {
  if (got.size() != want.size()) return absl::StrCat(what, ": size differs");
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], 4) != 0) {
      return absl::StrCat(what, ": element ", i, " is ", got[i], " expected ", want[i]);
    }
  }
  return "";
}

// CheckCollectives: every collective on every group kind, at several sizes, against
// InProcessHub (bits). Returns "" or the first failure.
std::string CheckCollectives(int rank, int world, Job& job, bool expect_bits_everywhere) {
  auto grid_or = RankGrid::Create(world, /*tp=*/2, /*pp=*/1);
  if (!grid_or.ok()) return std::string(grid_or.status().message());
  const RankGrid& grid = *grid_or;
  Waiter w;
  for (int64_t count : {int64_t{1}, int64_t{5}, int64_t{1000}, int64_t{300001}}) {
    for (GroupKind kind : job.kinds) {
      const ProcessGroup g = GroupOf(grid, kind, rank);
      const int n = g.size();
      const std::string tag = absl::StrCat(GroupKindName(kind), " count ", count);
      const uint32_t seed = static_cast<uint32_t>(count * 31 + static_cast<int>(kind));
      std::vector<std::vector<float>> in(world), rs_in(world);
      for (int r = 0; r < world; ++r) {
        in[r] = RandomFloats(count, seed + 1000 * r);
        rs_in[r] = RandomFloats(count * n, seed + 1000 * r + 7);
      }
      // Reference: the in-process backend, all ranks posted from this thread.
      InProcessHub hub(world);
      std::vector<std::vector<float>> ar(world, std::vector<float>(count)),
          rs(world, std::vector<float>(count)), ag(world, std::vector<float>(count * n)), bc = in;
      const int root = n - 1;
      for (int r = 0; r < world; ++r) {
        const ProcessGroup gr = GroupOf(grid, kind, r);
        hub.ForRank(r)->AllReduceSum(gr, in[r].data(), ar[r].data(), count, {});
        hub.ForRank(r)->ReduceScatterSum(gr, rs_in[r].data(), rs[r].data(), count, {});
        hub.ForRank(r)->AllGather(gr, in[r].data(), ag[r].data(), count, DataType::kFloat32, {});
        hub.ForRank(r)->Broadcast(gr, root, bc[r].data(), count, DataType::kFloat32, {});
      }
      // UCX: the same posts from this rank, all in flight together.
      std::vector<float> ar_out(count), rs_out(count), ag_out(count * n), bc_buf = in[rank];
      std::vector<float> inplace = in[rank];
      job.comm->AllReduceSum(g, in[rank].data(), ar_out.data(), count, w.Callback());
      job.comm->ReduceScatterSum(g, rs_in[rank].data(), rs_out.data(), count, w.Callback());
      job.comm->AllGather(g, in[rank].data(), ag_out.data(), count, DataType::kFloat32,
                          w.Callback());
      job.comm->Broadcast(g, root, bc_buf.data(), count, DataType::kFloat32, w.Callback());
      job.comm->AllReduceSum(g, inplace.data(), inplace.data(), count, w.Callback());
      std::string e = WaitOk(w, 5, tag);
      if (!e.empty()) return e;
      if (expect_bits_everywhere || n <= 2) {
        for (auto [got, want, name] : {std::tuple{&ar_out, &ar[rank], "all_reduce"},
                                       {&inplace, &ar[rank], "in-place all_reduce"},
                                       {&rs_out, &rs[rank], "reduce_scatter"}}) {
          e = FirstDifference(*got, *want, absl::StrCat(tag, " ", name));
          if (!e.empty()) return e;
        }
      }
      e = FirstDifference(ag_out, ag[rank], absl::StrCat(tag, " all_gather"));
      if (e.empty()) e = FirstDifference(bc_buf, bc[rank], absl::StrCat(tag, " broadcast"));
      if (!e.empty()) return e;

      // All-to-all-v with random counts (the count matrix is drawn from a shared seed).
      std::mt19937 gen(seed + 5);
      std::vector<std::vector<int64_t>> m(n, std::vector<int64_t>(n));
      for (auto& row : m) {
        for (int64_t& c : row) c = std::uniform_int_distribution<int64_t>(0, count)(gen);
      }
      auto displs = [](const std::vector<int64_t>& c) {
        std::vector<int64_t> d(c.size());
        for (size_t i = 1; i < c.size(); ++i) d[i] = d[i - 1] + c[i - 1];
        return d;
      };
      std::vector<std::vector<int64_t>> sc(world), rc(world);
      std::vector<std::vector<float>> a2a_in(world), a2a_out(world);
      for (int r = 0; r < world; ++r) {
        const ProcessGroup gr = GroupOf(grid, kind, r);
        const int i = gr.rank_in_group;
        sc[r] = m[i];
        for (int j = 0; j < n; ++j) rc[r].push_back(m[j][i]);
        int64_t total_in = 0, total_out = 0;
        for (int j = 0; j < n; ++j) total_in += sc[r][j], total_out += rc[r][j];
        a2a_in[r] = RandomFloats(total_in, seed + 77 * r);
        a2a_out[r].assign(total_out, -1.0f);
        hub.ForRank(r)->AllToAllV(gr, a2a_in[r].data(), sc[r], displs(sc[r]), a2a_out[r].data(),
                                  rc[r], displs(rc[r]), DataType::kFloat32, {});
      }
      std::vector<float> mine(a2a_out[rank].size(), -2.0f);
      job.comm->AllToAllV(g, a2a_in[rank].data(), sc[rank], displs(sc[rank]), mine.data(), rc[rank],
                          displs(rc[rank]), DataType::kFloat32, w.Callback());
      e = WaitOk(w, 1, tag + " all_to_all_v");
      if (e.empty()) e = FirstDifference(mine, a2a_out[rank], tag + " all_to_all_v");
      if (!e.empty()) return e;
    }
  }
  return "";
}

std::string RunCollectives(int rank, int world, int port, const char* tls,
                           UcxCommunicator::Options options, bool bits) {
  auto job = Join(rank, world, port, tls, options);
  if (!job.ok()) return std::string(job.status().message());
  if (world == 2) job->kinds = {GroupKind::kWorld, GroupKind::kTensorModelParallel};
  std::string e = CheckCollectives(rank, world, *job, bits);
  absl::Status c = job->comm->Close();
  if (e.empty() && !c.ok()) e = std::string(c.message());
  return e;
}

void ExpectAllPassed(const std::vector<RankResult>& results) {
  for (size_t r = 0; r < results.size(); ++r) {
    INFO("rank " << r);
    CHECK(results[r].text == "");
    CHECK(results[r].exit_code == 0);
  }
}

TEST_CASE("2 ranks over tcp: every collective bit-identical to the in-process backend") {
  const int port = FreeTcpPort();
  ExpectAllPassed(RunRanks(
      2, [&](int rank) { return RunCollectives(rank, 2, port, "tcp", {}, /*bits=*/true); },
      absl::Seconds(60)));
}

TEST_CASE("4 ranks over shm+tcp: every collective bit-identical to the in-process backend") {
  const int port = FreeTcpPort();
  ExpectAllPassed(RunRanks(
      4, [&](int rank) { return RunCollectives(rank, 4, port, "shm,tcp", {}, /*bits=*/true); },
      absl::Seconds(60)));
}

// RingOrderReference: chunk c of the ring all-reduce, summed from member c+1 around the
// ring: ((x_{c+1} + x_{c+2}) + ...) + x_c, chunks split as evenly as possible (first
// count % n one longer) — written from the algorithm's description, not the code.
std::vector<float> RingOrderReference(const std::vector<std::vector<float>>& x) {
  const int n = static_cast<int>(x.size());
  const int64_t count = static_cast<int64_t>(x[0].size());
  std::vector<float> out(count);
  int64_t begin = 0;
  for (int c = 0; c < n; ++c) {
    const int64_t len = count / n + (c < count % n ? 1 : 0);
    for (int64_t i = begin; i < begin + len; ++i) {
      float acc = x[(c + 1) % n][i];
      for (int k = 2; k <= n; ++k) acc += x[(c + k) % n][i];
      out[i] = acc;
    }
    begin += len;
  }
  return out;
}

TEST_CASE("4 ranks, ring mode: ring-order sums; groups of 2 still bit-identical") {
  const int port = FreeTcpPort();
  ExpectAllPassed(RunRanks(
      4,
      [&](int rank) -> std::string {
        UcxCommunicator::Options options;
        options.reduction = ReductionOrder::kRing;
        options.ring_min_bytes = 0;  // the ring at every size
        auto job = Join(rank, 4, port, "shm,tcp", options);
        if (!job.ok()) return std::string(job.status().message());
        // Groups of 2 (TP, DP): bits equal the in-process backend.
        job->kinds = {GroupKind::kTensorModelParallel, GroupKind::kDataParallel};
        std::string e = CheckCollectives(rank, 4, *job, /*bits=*/true);
        if (!e.empty()) return e;
        // World (4): the ring order, checked against the independent loop above.
        ProcessGroup world;
        world.id = 999;
        world.ranks = {0, 1, 2, 3};
        world.rank_in_group = rank;
        Waiter w;
        for (int64_t count : {int64_t{3}, int64_t{4099}, int64_t{262147}}) {
          std::vector<std::vector<float>> x;
          for (int r = 0; r < 4; ++r) x.push_back(RandomFloats(count, 17 * r + count));
          std::vector<float> got(count);
          job->comm->AllReduceSum(world, x[rank].data(), got.data(), count, w.Callback());
          e = WaitOk(w, 1, "ring all_reduce");
          if (e.empty()) e = FirstDifference(got, RingOrderReference(x), "ring all_reduce");
          if (!e.empty()) return e;
        }
        absl::Status c = job->comm->Close();
        return c.ok() ? "" : std::string(c.message());
      },
      absl::Seconds(60)));
}

TEST_CASE("send/recv: FIFO per channel, both directions, small and rendezvous sizes") {
  const int port = FreeTcpPort();
  ExpectAllPassed(RunRanks(
      2,
      [&](int rank) -> std::string {
        auto job = Join(rank, 2, port, "shm,tcp", {});
        if (!job.ok()) return std::string(job.status().message());
        ProcessGroup pp;
        pp.id = 1;
        pp.kind = GroupKind::kPipelineModelParallel;
        pp.ranks = {0, 1};
        pp.rank_in_group = rank;
        ProcessGroup other = pp;
        other.id = 2;
        const int peer = 1 - rank;
        const int kMessages = 24;
        auto size_of = [](int k) -> int64_t {
          return k % 6 == 5 ? (1 << 21) + k : (k * 37) % 500;  // includes 0 and 8 MiB
        };
        std::vector<std::vector<float>> out(kMessages), in(kMessages), other_in(kMessages);
        Waiter w;
        if (rank == 1) absl::SleepFor(absl::Milliseconds(50));  // receives posted late on rank 0
        for (int k = 0; k < kMessages; ++k) {
          out[k] = RandomFloats(size_of(k), 100 * rank + k);
          in[k].assign(size_of(k), 0.0f);
          other_in[k].assign(3, 0.0f);
          job->comm->Send(pp, peer, out[k].data(), size_of(k), DataType::kFloat32, w.Callback());
          job->comm->Recv(pp, peer, in[k].data(), size_of(k), DataType::kFloat32, w.Callback());
          // A second channel (other group) interleaved: must not steal the first's messages.
          job->comm->Send(other, peer, out[k].data(), std::min<int64_t>(3, size_of(k)),
                          DataType::kFloat32, w.Callback());
          job->comm->Recv(other, peer, other_in[k].data(), std::min<int64_t>(3, size_of(k)),
                          DataType::kFloat32, w.Callback());
        }
        std::string e = WaitOk(w, 4 * kMessages, "send/recv");
        for (int k = 0; k < kMessages && e.empty(); ++k) {
          e = FirstDifference(in[k], RandomFloats(size_of(k), 100 * peer + k),
                              absl::StrCat("message ", k));
          std::vector<float> head = RandomFloats(size_of(k), 100 * peer + k);
          head.resize(std::min<int64_t>(3, size_of(k)));
          std::vector<float> got = other_in[k];
          got.resize(head.size());
          if (e.empty()) e = FirstDifference(got, head, absl::StrCat("other channel message ", k));
        }
        absl::Status c = job->comm->Close();
        if (e.empty() && !c.ok()) e = std::string(c.message());
        // After Close: posts fail with Cancelled at once, nothing is pending.
        job->comm->Send(pp, peer, out[0].data(), 1, DataType::kFloat32, w.Callback());
        auto after = w.Wait(1);
        if (e.empty() && (after.size() != 1 || !absl::IsCancelled(after[0]))) {
          e = "a post after Close did not fail with Cancelled";
        }
        if (e.empty() && (!job->comm->CheckTimeouts(absl::InfiniteFuture()).empty() ||
                          job->comm->pending_operations() != 0)) {
          e = "operations pending after Close";
        }
        return e;
      },
      absl::Seconds(60)));
}

TEST_CASE("a count mismatch and an invalid post are reported on every rank") {
  const int port = FreeTcpPort();
  auto results = RunRanks(
      2,
      [&](int rank) -> std::string {
        auto job = Join(rank, 2, port, "tcp", {});
        if (!job.ok()) return std::string(job.status().message());
        ProcessGroup g;
        g.id = 16 * 2;
        g.ranks = {0, 1};
        g.rank_in_group = rank;
        Waiter w;
        std::vector<float> a(12, 1.0f), b(12);
        std::string report;
        // 1. all-reduce of 10 vs 12 elements.
        job->comm->AllReduceSum(g, a.data(), b.data(), rank == 0 ? 10 : 12, w.Callback());
        auto s = w.Wait(1);
        w.Clear();
        report += s.empty() ? "no completion" : s[0].ToString();
        report += "\n";
        // 2. send of 7 vs recv of 9.
        if (rank == 0) job->comm->Send(g, 1, a.data(), 7, DataType::kFloat32, w.Callback());
        if (rank == 1) job->comm->Recv(g, 0, b.data(), 9, DataType::kFloat32, w.Callback());
        s = w.Wait(1);
        w.Clear();
        report += s.empty() ? "no completion" : s[0].ToString();
        report += "\n";
        // 3. an invalid post (null buffer on rank 1): both learn it.
        job->comm->AllGather(g, rank == 1 ? nullptr : a.data(), b.data(), 4, DataType::kFloat32,
                             w.Callback());
        s = w.Wait(1);
        w.Clear();
        report += s.empty() ? "no completion" : s[0].ToString();
        report += "\n";
        // 4. still usable: a matching all-reduce and send/recv succeed.
        std::vector<float> x = RandomFloats(12, rank), y(12);
        job->comm->AllReduceSum(g, x.data(), y.data(), 12, w.Callback());
        if (rank == 0) job->comm->Send(g, 1, a.data(), 7, DataType::kFloat32, w.Callback());
        if (rank == 1) job->comm->Recv(g, 0, b.data(), 7, DataType::kFloat32, w.Callback());
        std::string e = WaitOk(w, 2, "after the mismatch");
        report += e.empty() ? "usable" : e;
        absl::Status c = job->comm->Close();
        return report + (c.ok() ? "" : std::string(c.message()));
      },
      absl::Seconds(60));
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ":\n" << results[r].text);
    const std::string& t = results[r].text;
    CHECK_THAT(t, Catch::Contains("FAILED_PRECONDITION: UcxCommunicator: mismatch on world#0 "
                                  "(group 32) seq 0 (different element counts): rank 0 posted "
                                  "all_reduce on world#0 (group 32) seq 0 fp32 x 10 (40 bytes) "
                                  "from rank 0; rank 1 posted all_reduce on world#0 (group 32) "
                                  "seq 0 fp32 x 12 (48 bytes) from rank 1"));
    CHECK_THAT(t, Catch::Contains("FAILED_PRECONDITION: UcxCommunicator: mismatch on world#0 "
                                  "(group 32) seq 0 (different element counts): rank 0 posted "
                                  "send on world#0 (group 32) seq 0 fp32 x 7 (28 bytes) from "
                                  "rank 0 to rank 1; rank 1 posted recv"));
    CHECK_THAT(t, Catch::Contains("INVALID_ARGUMENT: UcxCommunicator: invalid all_gather on "
                                  "world#0 seq 1 (rank 1: null buffer)"));
    CHECK_THAT(t, Catch::EndsWith("usable"));
  }
}

TEST_CASE("a rank that never posts: timeout report on the others via the watchdog") {
  const int port = FreeTcpPort();
  auto results = RunRanks(
      3,
      [&](int rank) -> std::string {
        UcxCommunicator::Options options;
        options.timeout = absl::Milliseconds(500);
        auto job = Join(rank, 3, port, "shm,tcp", options);
        if (!job.ok()) return std::string(job.status().message());
        std::string out;
        if (rank != 2) {
          ProcessGroup g;
          g.id = 16 * 3;
          g.ranks = {0, 1, 2};
          g.rank_in_group = rank;
          absl::Mutex mu;
          std::vector<absl::Status> reports;
          CollectiveWatchdog dog(
              absl::Milliseconds(100),
              [&](absl::Time now) { return job->comm->CheckTimeouts(now); },
              [&](std::vector<absl::Status> r) {
                absl::MutexLock lock(&mu);
                for (auto& s : r) reports.push_back(s);
              });
          Waiter w;
          std::vector<float> x(64, 1.0f), y(64);
          const absl::Time start = absl::Now();
          job->comm->AllReduceSum(g, x.data(), y.data(), 64, w.Callback());
          auto s = w.Wait(1);
          const absl::Duration took = absl::Now() - start;
          dog.Stop();
          if (s.empty()) return "no completion";
          if (took > absl::Seconds(3)) out += "too slow; ";
          absl::MutexLock lock(&mu);
          out += absl::StrCat(s[0].ToString(), "\nwatchdog reports: ", reports.size());
        }
        absl::Status c = job->comm->Close();  // rank 2 waits here for the others
        return out + (c.ok() ? "" : std::string(c.message()));
      },
      absl::Seconds(60));
  CHECK(results[2].text == "");
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ":\n" << results[r].text);
    const std::string& t = results[r].text;
    CHECK_THAT(t, Catch::StartsWith("DEADLINE_EXCEEDED: UcxCommunicator: all_reduce on "
                                    "world#0 (group 48) seq 0 did not complete within 500ms"));
    CHECK_THAT(t, Catch::Contains("ranks arrived: [0, 1]; ranks not arrived: [2]"));
    CHECK_THAT(t, Catch::EndsWith("watchdog reports: 1"));
  }
}

TEST_CASE("a late rank: WaitingReports names it and the time left, failing nothing") {
  const int port = FreeTcpPort();
  auto results = RunRanks(
      3,
      [&](int rank) -> std::string {
        UcxCommunicator::Options options;
        options.timeout = absl::Seconds(30);
        options.timeout_hint = " (hint)";
        auto job = Join(rank, 3, port, "shm,tcp", options);
        if (!job.ok()) return std::string(job.status().message());
        ProcessGroup g;
        g.id = 16 * 3;
        g.ranks = {0, 1, 2};
        g.rank_in_group = rank;
        if (rank == 2) absl::SleepFor(absl::Milliseconds(1500));  // late, but it comes
        Waiter w;
        std::vector<float> x(64, 1.0f), y(64);
        job->comm->AllReduceSum(g, x.data(), y.data(), 64, w.Callback());
        std::string out;
        if (rank != 2) {
          absl::SleepFor(absl::Milliseconds(700));
          const absl::Time now = absl::Now();
          std::vector<std::string> none = job->comm->WaitingReports(now, absl::Seconds(5));
          std::vector<std::string> late = job->comm->WaitingReports(now, absl::Milliseconds(500));
          if (!none.empty()) out += "reported too early; ";
          out += late.empty() ? std::string("no report") : late.front();
        }
        auto s = w.Wait(1);
        if (s.empty() || !s[0].ok()) out += "; the all-reduce failed";
        if (y[0] != 3.0f) out += "; wrong sum";
        absl::Status c = job->comm->Close();
        return out + (c.ok() ? "" : std::string(c.message()));
      },
      absl::Seconds(60));
  CHECK(results[2].text == "");
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ":\n" << results[r].text);
    CHECK_THAT(results[r].text, Catch::StartsWith(absl::StrCat("rank ", r, " has waited ")));
    CHECK_THAT(results[r].text, Catch::Contains(" in all_reduce on world#0 (group 48) seq 0: "
                                                "ranks not arrived [2]; "));
    CHECK_THAT(results[r].text, Catch::EndsWith("s left before the timeout of 30s (hint)"));
  }
}

TEST_CASE("detect_peer_failure: a dead rank fails the others' operations promptly") {
  const int port = FreeTcpPort();
  auto results = RunRanks(
      3,
      [&](int rank) -> std::string {
        UcxCommunicator::Options options;
        options.detect_peer_failure = true;
        auto job = Join(rank, 3, port, "tcp", options);
        if (!job.ok()) return std::string(job.status().message());
        ProcessGroup g;
        g.id = 16 * 3;
        g.ranks = {0, 1, 2};
        g.rank_in_group = rank;
        Waiter w;
        // Everyone is connected (an all-reduce completed) before rank 2 dies.
        ProcessGroup warm_up = g;
        warm_up.id = 16 * 3 + 1;  // the timed all-reduce below is seq 0 of group 48
        float token = 1.0f;
        job->comm->AllReduceSum(warm_up, &token, &token, 1, w.Callback());
        const std::string e = WaitOk(w, 1, "warm-up all_reduce");
        if (!e.empty()) return e;
        // Rank 2 dies (without a word) once ranks 0 and 1 have told it that their warm-up
        // is complete, so no message of the warm-up is lost with it.
        Waiter tokens;
        float ok[2] = {0, 0};
        if (rank == 2) {
          job->comm->Recv(g, 0, &ok[0], 1, DataType::kFloat32, tokens.Callback());
          job->comm->Recv(g, 1, &ok[1], 1, DataType::kFloat32, tokens.Callback());
          tokens.Wait(2);
          _exit(0);
        }
        job->comm->Send(g, 2, &token, 1, DataType::kFloat32, tokens.Callback());
        absl::SleepFor(absl::Milliseconds(300));
        std::vector<float> x(64, 1.0f), y(64);
        const absl::Time start = absl::Now();
        job->comm->AllReduceSum(g, x.data(), y.data(), 64, w.Callback());
        auto s = w.Wait(1);
        std::string out = s.empty() ? "no completion" : s[0].ToString();
        if (absl::Now() - start > absl::Seconds(5)) out += " [slow]";
        job->comm->Close().IgnoreError();  // rank 2 is gone: the barrier fails
        return out;
      },
      absl::Seconds(60));
  CHECK_THAT(results[2].text, Catch::Contains("exited without reporting"));
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << results[r].text);
    CHECK_THAT(results[r].text, Catch::StartsWith("UNAVAILABLE: UcxCommunicator: all_reduce"));
    CHECK_THAT(results[r].text, Catch::Contains("rank 2"));
    CHECK_THAT(results[r].text, !Catch::Contains("[slow]"));
  }
}

TEST_CASE("three threads per rank post on three groups at once") {
  const int port = FreeTcpPort();
  ExpectAllPassed(RunRanks(
      2,
      [&](int rank) -> std::string {
        auto job = Join(rank, 2, port, "shm,tcp", {});
        if (!job.ok()) return std::string(job.status().message());
        auto group = [rank](int64_t id) {
          ProcessGroup g;
          g.id = id;
          g.ranks = {0, 1};
          g.rank_in_group = rank;
          return g;
        };
        const int kOps = 40;
        const int64_t n = 3001;
        std::vector<std::string> errors(3);
        std::vector<std::thread> threads;
        // Thread 0: all-reduces on group 1, checked against the rank-order sum.
        threads.emplace_back([&] {
          Waiter w;
          for (int k = 0; k < kOps && errors[0].empty(); ++k) {
            std::vector<float> x = RandomFloats(n, 10 * k + rank), y(n);
            job->comm->AllReduceSum(group(1), x.data(), y.data(), n, w.Callback());
            errors[0] = WaitOk(w, 1, "all_reduce");
            std::vector<float> a = RandomFloats(n, 10 * k), b = RandomFloats(n, 10 * k + 1);
            for (int64_t i = 0; i < n && errors[0].empty(); ++i) {
              if (y[i] != a[i] + b[i]) errors[0] = absl::StrCat("all_reduce ", k, " element ", i);
            }
          }
        });
        // Thread 1: all-gathers on group 2, several in flight.
        threads.emplace_back([&] {
          Waiter w;
          std::vector<std::vector<float>> out(kOps, std::vector<float>(2 * n));
          std::vector<std::vector<float>> in(kOps);
          for (int k = 0; k < kOps; ++k) {
            in[k] = RandomFloats(n, 1000 + 10 * k + rank);
            job->comm->AllGather(group(2), in[k].data(), out[k].data(), n, DataType::kFloat32,
                                 w.Callback());
          }
          errors[1] = WaitOk(w, kOps, "all_gather");
          for (int k = 0; k < kOps && errors[1].empty(); ++k) {
            std::vector<float> want = RandomFloats(n, 1000 + 10 * k);
            std::vector<float> second = RandomFloats(n, 1000 + 10 * k + 1);
            want.insert(want.end(), second.begin(), second.end());
            errors[1] = FirstDifference(out[k], want, absl::StrCat("all_gather ", k));
          }
        });
        // Thread 2: a stream of sends 0 -> 1 on group 3.
        threads.emplace_back([&] {
          Waiter w;
          std::vector<std::vector<float>> buf(kOps);
          for (int k = 0; k < kOps; ++k) {
            buf[k] = rank == 0 ? RandomFloats(n, 5000 + k) : std::vector<float>(n);
            if (rank == 0) {
              job->comm->Send(group(3), 1, buf[k].data(), n, DataType::kFloat32, w.Callback());
            } else {
              job->comm->Recv(group(3), 0, buf[k].data(), n, DataType::kFloat32, w.Callback());
            }
          }
          errors[2] = WaitOk(w, kOps, "send/recv");
          for (int k = 0; k < kOps && errors[2].empty() && rank == 1; ++k) {
            errors[2] =
                FirstDifference(buf[k], RandomFloats(n, 5000 + k), absl::StrCat("message ", k));
          }
        });
        for (auto& t : threads) t.join();
        absl::Status c = job->comm->Close();
        for (const std::string& e : errors) {
          if (!e.empty()) return e;
        }
        return c.ok() ? "" : std::string(c.message());
      },
      absl::Seconds(60)));
}

}  // namespace
}  // namespace mxmaca::transport::ucx
