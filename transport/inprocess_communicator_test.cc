// transport/inprocess_communicator_test.cc: the in-process backend on fresh random data:
// bit-identical fixed-order reductions under racing threads, every operation's result
// against a plain loop, mismatch / invalid-argument / timeout reports (fake clock), and a
// 16-rank TP2 x CP2 x DP2 x PP2 (EP2) grid exercise with each rank posting in its own
// random order.
#include "transport/inprocess_communicator.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/synchronization/mutex.h"
#include "transport/rank_grid.h"

namespace mxmaca::transport {
namespace {

// Completions: records each `done` and lets the test thread wait for a number of them
// (the test may block; the communicator never does).
class Completions {
 public:
  DoneCallback Callback() {
    return [this](const CollectiveInfo& info, absl::Status status) {
      absl::MutexLock lock(&mu_);
      infos_.push_back(info);
      statuses_.push_back(std::move(status));
    };
  }
  void WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    target_ = n;
    REQUIRE(mu_.AwaitWithTimeout(absl::Condition(this, &Completions::Reached),
                                 absl::Seconds(30)));
  }
  std::vector<absl::Status> statuses() {
    absl::MutexLock lock(&mu_);
    return statuses_;
  }
  std::vector<CollectiveInfo> infos() {
    absl::MutexLock lock(&mu_);
    return infos_;
  }

 private:
  bool Reached() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return statuses_.size() >= target_; }

  absl::Mutex mu_;
  size_t target_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<CollectiveInfo> infos_;
  std::vector<absl::Status> statuses_;
};

std::vector<float> RandomFloats(std::mt19937& rng, int64_t n) {
  // Mixed magnitudes so that summation order changes the rounded result.
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-12, 12);
  std::vector<float> v(n);
  for (auto& x : v) x = std::ldexp(mant(rng), expo(rng));
  return v;
}

// SequentialSum: the reference order — rank 0's value, then + rank 1, + rank 2, ...
std::vector<float> SequentialSum(const std::vector<std::vector<float>>& xs) {
  std::vector<float> acc = xs[0];
  for (size_t r = 1; r < xs.size(); ++r) {
    for (size_t i = 0; i < acc.size(); ++i) acc[i] += xs[r][i];
  }
  return acc;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// RunThreads: one thread per rank, each starting after a random short spin so arrival
// order differs from run to run.
void RunThreads(int n, uint32_t seed, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([r, seed, &body] {
      std::mt19937 rng(seed * 7919u + r);
      const int spins = std::uniform_int_distribution<int>(0, 3)(rng);
      for (int i = 0; i < spins; ++i) std::this_thread::yield();
      body(r);
    });
  }
  for (auto& t : threads) t.join();
}

ProcessGroup WorldGroup(const RankGrid& grid, int rank) {
  return **grid.Group(GroupKind::kWorld, rank);
}

TEST_CASE("InProcessHub all-reduce is bit-identical to a rank-order sum whatever the arrival order") {
  constexpr int kWorld = 8;
  constexpr int64_t kCount = 4099;  // odd size: vector tails too
  const RankGrid grid = *RankGrid::Create(kWorld, kWorld, 1);
  std::mt19937 rng(1234);
  std::vector<std::vector<float>> inputs(kWorld);
  for (auto& x : inputs) x = RandomFloats(rng, kCount);
  const std::vector<float> expected = SequentialSum(inputs);
  // The test can fail: a reversed-order sum differs from the rank-order sum in some bits.
  std::vector<std::vector<float>> reversed(inputs.rbegin(), inputs.rend());
  REQUIRE_FALSE(SameBits(SequentialSum(reversed), expected));

  InProcessHub hub(kWorld);
  for (int round = 0; round < 25; ++round) {
    std::vector<std::vector<float>> out(kWorld, std::vector<float>(kCount));
    Completions done;
    RunThreads(kWorld, round, [&](int r) {
      // In-place for odd ranks (send == recv).
      float* recv = out[r].data();
      const float* send = inputs[r].data();
      if (r % 2 == 1) {
        std::copy(inputs[r].begin(), inputs[r].end(), out[r].begin());
        send = recv;
      }
      hub.ForRank(r)->AllReduceSum(WorldGroup(grid, r), send, recv, kCount, done.Callback());
    });
    done.WaitFor(kWorld);
    for (const auto& s : done.statuses()) REQUIRE(s.ok());
    for (int r = 0; r < kWorld; ++r) REQUIRE(SameBits(out[r], expected));
    for (const auto& info : done.infos()) CHECK(info.sequence == static_cast<uint64_t>(round));
  }
  CHECK(hub.pending_operations() == 0);
}

TEST_CASE("InProcessHub data movement and reduce-scatter match plain loops") {
  constexpr int kWorld = 6;
  const RankGrid grid = *RankGrid::Create(kWorld, kWorld, 1);
  std::mt19937 rng(99);
  InProcessHub hub(kWorld);

  SECTION("all-gather (int32, in-place on rank 3)") {
    constexpr int64_t kCount = 37;
    std::vector<std::vector<int32_t>> in(kWorld, std::vector<int32_t>(kCount));
    for (auto& v : in) for (auto& x : v) x = static_cast<int32_t>(rng());
    std::vector<std::vector<int32_t>> out(kWorld, std::vector<int32_t>(kWorld * kCount, -1));
    std::copy(in[3].begin(), in[3].end(), out[3].begin() + 3 * kCount);
    Completions done;
    RunThreads(kWorld, 5, [&](int r) {
      const void* send = r == 3 ? static_cast<const void*>(out[3].data() + 3 * kCount)
                                : static_cast<const void*>(in[r].data());
      hub.ForRank(r)->AllGather(WorldGroup(grid, r), send, out[r].data(), kCount,
                                DataType::kInt32, done.Callback());
    });
    done.WaitFor(kWorld);
    for (const auto& s : done.statuses()) REQUIRE(s.ok());
    for (int j = 0; j < kWorld; ++j)
      for (int r = 0; r < kWorld; ++r)
        for (int64_t i = 0; i < kCount; ++i) REQUIRE(out[j][r * kCount + i] == in[r][i]);
  }

  SECTION("reduce-scatter (fp32) in rank order") {
    constexpr int64_t kChunk = 101;
    std::vector<std::vector<float>> in(kWorld);
    for (auto& v : in) v = RandomFloats(rng, kWorld * kChunk);
    const std::vector<float> full = SequentialSum(in);
    std::vector<std::vector<float>> out(kWorld, std::vector<float>(kChunk));
    Completions done;
    RunThreads(kWorld, 6, [&](int r) {
      hub.ForRank(r)->ReduceScatterSum(WorldGroup(grid, r), in[r].data(), out[r].data(), kChunk,
                                       done.Callback());
    });
    done.WaitFor(kWorld);
    for (const auto& s : done.statuses()) REQUIRE(s.ok());
    for (int j = 0; j < kWorld; ++j) {
      REQUIRE(SameBits(out[j], std::vector<float>(full.begin() + j * kChunk,
                                                   full.begin() + (j + 1) * kChunk)));
    }
  }

  SECTION("broadcast from root 4") {
    constexpr int64_t kCount = 64;
    std::vector<std::vector<float>> buf(kWorld);
    for (auto& v : buf) v = RandomFloats(rng, kCount);
    const std::vector<float> root = buf[4];
    Completions done;
    RunThreads(kWorld, 7, [&](int r) {
      hub.ForRank(r)->Broadcast(WorldGroup(grid, r), 4, buf[r].data(), kCount, DataType::kFloat32,
                                done.Callback());
    });
    done.WaitFor(kWorld);
    for (const auto& s : done.statuses()) REQUIRE(s.ok());
    for (int r = 0; r < kWorld; ++r) REQUIRE(SameBits(buf[r], root));
    for (const auto& info : done.infos()) CHECK(info.peer == 4);
  }

  SECTION("all-to-all-v with random counts") {
    // counts[i][j]: elements rank i sends to rank j.
    std::vector<std::vector<int64_t>> counts(kWorld, std::vector<int64_t>(kWorld));
    for (auto& row : counts) for (auto& c : row) c = rng() % 9;
    std::vector<std::vector<float>> send(kWorld), recv(kWorld);
    std::vector<std::vector<int64_t>> sc(kWorld), sd(kWorld), rc(kWorld), rd(kWorld);
    for (int i = 0; i < kWorld; ++i) {
      int64_t s_off = 0, r_off = 0;
      for (int j = 0; j < kWorld; ++j) {
        sc[i].push_back(counts[i][j]);
        sd[i].push_back(s_off);
        s_off += counts[i][j];
        rc[i].push_back(counts[j][i]);
        rd[i].push_back(r_off);
        r_off += counts[j][i];
      }
      send[i] = RandomFloats(rng, s_off);
      recv[i].assign(r_off, 0.0f);
    }
    Completions done;
    RunThreads(kWorld, 8, [&](int r) {
      hub.ForRank(r)->AllToAllV(WorldGroup(grid, r), send[r].data(), sc[r], sd[r],
                                recv[r].data(), rc[r], rd[r], DataType::kFloat32,
                                done.Callback());
    });
    done.WaitFor(kWorld);
    for (const auto& s : done.statuses()) REQUIRE(s.ok());
    for (int j = 0; j < kWorld; ++j)
      for (int i = 0; i < kWorld; ++i)
        for (int64_t k = 0; k < counts[i][j]; ++k)
          REQUIRE(recv[j][rd[j][i] + k] == send[i][sd[i][j] + k]);
  }

  SECTION("send/recv is FIFO per channel, receives posted before sends") {
    constexpr int kMessages = 5;
    std::vector<std::vector<float>> msgs(kMessages);
    for (int m = 0; m < kMessages; ++m) msgs[m] = RandomFloats(rng, 10 + m);
    std::vector<std::vector<float>> got(kMessages);
    Completions done;
    for (int m = 0; m < kMessages; ++m) {
      got[m].assign(msgs[m].size(), 0.0f);
      hub.ForRank(5)->Recv(WorldGroup(grid, 5), 1, got[m].data(), got[m].size(),
                           DataType::kFloat32, done.Callback());
    }
    CHECK(done.statuses().empty());
    for (int m = 0; m < kMessages; ++m) {
      const CollectiveInfo info = hub.ForRank(1)->Send(
          WorldGroup(grid, 1), 5, msgs[m].data(), msgs[m].size(), DataType::kFloat32,
          done.Callback());
      CHECK(info.sequence == static_cast<uint64_t>(m));
      CHECK(info.peer == 5);
    }
    done.WaitFor(2 * kMessages);
    for (const auto& s : done.statuses()) REQUIRE(s.ok());
    for (int m = 0; m < kMessages; ++m) REQUIRE(SameBits(got[m], msgs[m]));
  }
  CHECK(hub.pending_operations() == 0);
}

bool Contains(const absl::Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

TEST_CASE("InProcessHub reports mismatches to every member, naming group, op, seq and bytes") {
  const RankGrid grid = *RankGrid::Create(3, 3, 1);
  InProcessHub hub(3);
  std::vector<float> a(8, 1.0f), b(8, 2.0f), c(8, 3.0f);
  Completions done;
  // seq 0 is a good all-reduce; seq 1 mismatches in size between rank 0 and rank 1.
  for (int r = 0; r < 3; ++r) {
    hub.ForRank(r)->AllReduceSum(WorldGroup(grid, r), a.data(), a.data(), 0, done.Callback());
  }
  done.WaitFor(3);
  hub.ForRank(0)->AllReduceSum(WorldGroup(grid, 0), a.data(), a.data(), 4, done.Callback());
  hub.ForRank(1)->AllReduceSum(WorldGroup(grid, 1), b.data(), b.data(), 8, done.Callback());
  done.WaitFor(5);
  // Rank 2 posts after the failure: it gets the same error at once.
  hub.ForRank(2)->AllGather(WorldGroup(grid, 2), c.data(), c.data(), 1, DataType::kFloat32,
                            done.Callback());
  done.WaitFor(6);
  const auto statuses = done.statuses();
  const auto infos = done.infos();
  for (int i = 3; i < 6; ++i) {
    INFO(statuses[i].message());
    CHECK(absl::IsFailedPrecondition(statuses[i]));
    CHECK(Contains(statuses[i], "world#0"));
    CHECK(Contains(statuses[i], "seq 1"));
    CHECK(Contains(statuses[i], "rank 0 posted all_reduce"));
    CHECK(Contains(statuses[i], "(16 bytes)"));
    CHECK(Contains(statuses[i], "rank 1 posted all_reduce"));
    CHECK(Contains(statuses[i], "(32 bytes)"));
    CHECK(infos[i].sequence == 1);
  }
  CHECK(Contains(statuses[3], "ranks not arrived: [2]"));
  CHECK(hub.pending_operations() == 0);
  CHECK(a[0] == 1.0f);  // nothing written on failure
  CHECK(b[0] == 2.0f);
}

TEST_CASE("InProcessHub reports invalid arguments and non-members") {
  const RankGrid grid = *RankGrid::Create(4, 2, 2);  // tp groups {0,1}, {2,3}
  InProcessHub hub(4);
  std::vector<float> buf(4, 0.5f);
  Completions done;
  // Rank 0 passes rank 2's group: rejected at once, nothing pending.
  hub.ForRank(0)->AllReduceSum(**grid.Group(GroupKind::kTensorModelParallel, 2), buf.data(),
                               buf.data(), 4, done.Callback());
  done.WaitFor(1);
  CHECK(absl::IsInvalidArgument(done.statuses()[0]));
  CHECK(Contains(done.statuses()[0], "rank 0 is not member"));
  CHECK(hub.pending_operations() == 0);
  // A broadcast root outside the group fails the poster and, when it posts, its peer.
  const ProcessGroup g0 = **grid.Group(GroupKind::kTensorModelParallel, 0);
  const ProcessGroup g1 = **grid.Group(GroupKind::kTensorModelParallel, 1);
  hub.ForRank(0)->Broadcast(g0, 7, buf.data(), 4, DataType::kFloat32, done.Callback());
  done.WaitFor(2);
  hub.ForRank(1)->Broadcast(g1, 0, buf.data(), 4, DataType::kFloat32, done.Callback());
  done.WaitFor(3);
  for (int i = 1; i < 3; ++i) {
    INFO(done.statuses()[i].message());
    CHECK(absl::IsInvalidArgument(done.statuses()[i]));
    CHECK(Contains(done.statuses()[i], "root 7 outside group of 2"));
  }
  CHECK(hub.pending_operations() == 0);
  // Mismatched all-to-all-v counts fail every member.
  std::vector<float> s(8, 1.0f), r(8, 0.0f);
  hub.ForRank(0)->AllToAllV(g0, s.data(), {1, 2}, {0, 1}, r.data(), {1, 1}, {0, 1},
                            DataType::kFloat32, done.Callback());
  hub.ForRank(1)->AllToAllV(g1, s.data(), {1, 1}, {0, 1}, r.data(), {1, 1}, {0, 1},
                            DataType::kFloat32, done.Callback());
  done.WaitFor(5);
  for (int i = 3; i < 5; ++i) {
    INFO(done.statuses()[i].message());
    CHECK(absl::IsFailedPrecondition(done.statuses()[i]));
    CHECK(Contains(done.statuses()[i], "rank 0 sends 2 to rank 1 which expects 1"));
  }
}

TEST_CASE("InProcessHub watchdog reports a stuck collective with a fake clock") {
  const RankGrid grid = *RankGrid::Create(4, 1, 1);  // dp group = all four ranks
  absl::Time fake_now = absl::FromUnixSeconds(1000);
  InProcessHub::Options options;
  options.timeout = absl::Seconds(10);
  options.clock = [&fake_now] { return fake_now; };
  InProcessHub hub(4, options);
  auto dp = [&](int r) { return grid.ForRank(r)->data_parallel_group(); };
  std::vector<std::vector<float>> buf(4, std::vector<float>(16, 1.0f));
  Completions done;
  hub.ForRank(0)->AllReduceSum(dp(0), buf[0].data(), buf[0].data(), 16, done.Callback());
  fake_now += absl::Seconds(3);
  hub.ForRank(1)->AllReduceSum(dp(1), buf[1].data(), buf[1].data(), 16, done.Callback());
  CHECK(hub.CheckTimeouts(fake_now + absl::Seconds(6)).empty());  // 9 s since first post
  const auto reports = hub.CheckTimeouts(fake_now + absl::Seconds(7));  // 10 s
  REQUIRE(reports.size() == 1);
  INFO(reports[0].message());
  CHECK(absl::IsDeadlineExceeded(reports[0]));
  CHECK(Contains(reports[0], "all_reduce on data_parallel#0"));
  CHECK(Contains(reports[0], "seq 0"));
  CHECK(Contains(reports[0], "(64 bytes)"));
  CHECK(Contains(reports[0], "rank 0 posted"));
  CHECK(Contains(reports[0], "rank 1 posted"));
  CHECK(Contains(reports[0], "ranks not arrived: [2, 3]"));
  done.WaitFor(2);
  for (const auto& s : done.statuses()) CHECK(s == reports[0]);
  // Reported once; late posters get the error at once; then the group works again.
  CHECK(hub.CheckTimeouts(fake_now + absl::Seconds(60)).empty());
  hub.ForRank(2)->AllReduceSum(dp(2), buf[2].data(), buf[2].data(), 16, done.Callback());
  hub.ForRank(3)->AllReduceSum(dp(3), buf[3].data(), buf[3].data(), 16, done.Callback());
  done.WaitFor(4);
  CHECK(absl::IsDeadlineExceeded(done.statuses()[3]));
  CHECK(hub.pending_operations() == 0);
  for (int r = 0; r < 4; ++r) {
    hub.ForRank(r)->AllReduceSum(dp(r), buf[r].data(), buf[r].data(), 16, done.Callback());
  }
  done.WaitFor(8);
  for (int i = 4; i < 8; ++i) CHECK(done.statuses()[i].ok());
  CHECK(buf[2][0] == 4.0f);
}

TEST_CASE("InProcessHub hands completed work to the executor; posting never waits") {
  const RankGrid grid = *RankGrid::Create(2, 2, 1);
  std::deque<std::function<void()>> queue;
  InProcessHub::Options options;
  options.executor = [&queue](std::function<void()> work) { queue.push_back(std::move(work)); };
  InProcessHub hub(2, options);
  std::vector<float> x = {1.5f, -2.0f}, y = {0.25f, 4.0f};
  Completions done;
  for (int r = 0; r < 2; ++r) {
    hub.ForRank(r)->AllReduceSum(WorldGroup(grid, r), r == 0 ? x.data() : y.data(),
                                 r == 0 ? x.data() : y.data(), 2, done.Callback());
  }
  CHECK(done.statuses().empty());  // both posts returned; the work is queued
  REQUIRE(queue.size() == 1);
  queue.front()();
  done.WaitFor(2);
  CHECK(x == std::vector<float>{1.75f, 2.0f});
  CHECK(y == x);
}

// Many operations in flight per group: each of 8 ranks (tp2 x dp4) posts 30 all-reduces
// on its TP group and 30 on its DP group without waiting, interleaving the two groups in
// its own random order (each group's order is the same on all members). Sequence numbers
// must pair op k with op k on every member.
TEST_CASE("InProcessHub pipelines many in-flight collectives per group") {
  constexpr int kWorld = 8, kOps = 30;
  constexpr int64_t kN = 33;
  const RankGrid grid = *RankGrid::Create(kWorld, /*tp=*/2, /*pp=*/1);
  std::mt19937 rng(555);
  // in[r][g][k]: rank r's input for op k on group g (0 = tp, 1 = dp).
  std::vector<std::vector<std::vector<std::vector<float>>>> in(kWorld), out(kWorld);
  for (int r = 0; r < kWorld; ++r) {
    in[r].resize(2);
    out[r].resize(2);
    for (int g = 0; g < 2; ++g) {
      for (int k = 0; k < kOps; ++k) {
        in[r][g].push_back(RandomFloats(rng, kN));
        out[r][g].push_back(std::vector<float>(kN, 0.0f));
      }
    }
  }
  InProcessHub hub(kWorld);
  Completions done;
  std::atomic<int> wrong_sequence{0};
  RunThreads(kWorld, 31, [&](int r) {
    const RankView v = *grid.ForRank(r);
    const ProcessGroup groups[2] = {v.tensor_model_parallel_group(), v.data_parallel_group()};
    std::mt19937 order(r);
    int next[2] = {0, 0};
    while (next[0] < kOps || next[1] < kOps) {
      int g = static_cast<int>(order() % 2);
      if (next[g] == kOps) g = 1 - g;
      const int k = next[g]++;
      const CollectiveInfo info = hub.ForRank(r)->AllReduceSum(
          groups[g], in[r][g][k].data(), out[r][g][k].data(), kN, done.Callback());
      // Catch2 assertions are not thread-safe: count here, check on the test thread.
      if (info.sequence != static_cast<uint64_t>(k)) ++wrong_sequence;
    }
  });
  CHECK(wrong_sequence == 0);
  done.WaitFor(2 * kOps * kWorld);
  for (const auto& s : done.statuses()) REQUIRE(s.ok());
  CHECK(hub.pending_operations() == 0);
  for (int r = 0; r < kWorld; ++r) {
    const RankView v = *grid.ForRank(r);
    const ProcessGroup groups[2] = {v.tensor_model_parallel_group(), v.data_parallel_group()};
    for (int g = 0; g < 2; ++g) {
      for (int k = 0; k < kOps; ++k) {
        std::vector<std::vector<float>> xs;
        for (int m : groups[g].ranks) xs.push_back(in[m][g][k]);
        REQUIRE(SameBits(out[r][g][k], SequentialSum(xs)));
      }
    }
  }
}

// The 16-rank grid: tp2 cp2 dp2 pp2 with ep2 (etp = tp, edp = 2). Every rank posts six
// operations on six different groups in its own random order; each group sees them in
// the same order on all members (one per group), so all must complete.
TEST_CASE("InProcessHub 16-rank TP2 x CP2 x DP2 x PP2 (EP2) grid exercise") {
  constexpr int kWorld = 16;
  constexpr int64_t kN = 257;
  const RankGrid grid = *RankGrid::Create(kWorld, /*tp=*/2, /*pp=*/2, /*cp=*/2, /*ep=*/2);
  REQUIRE(grid.data_parallel_size() == 2);
  REQUIRE(grid.expert_data_parallel_size() == 2);  // etp2 x ep2 x edp2 = tp2 x cp2 x dp2
  std::mt19937 rng(4242);
  struct RankData {
    std::vector<float> tp_in, tp_out, dp_in, dp_out, cp_in, cp_out, pp_buf, edp_in, edp_out;
    std::vector<float> a2a_in, a2a_out;
    std::vector<int64_t> sc, sd, rc, rd;
  };
  std::vector<RankData> d(kWorld);
  auto a2a_count = [](int src, int dst) -> int64_t { return (src * 3 + dst * 5) % 7; };
  for (int r = 0; r < kWorld; ++r) {
    RankData& x = d[r];
    x.tp_in = RandomFloats(rng, kN);
    x.dp_in = RandomFloats(rng, kN);
    x.cp_in = RandomFloats(rng, kN);
    x.pp_buf = RandomFloats(rng, kN);
    x.edp_in = RandomFloats(rng, 2 * kN);
    x.tp_out.assign(kN, 0);
    x.dp_out.assign(kN, 0);
    x.cp_out.assign(2 * kN, 0);
    x.edp_out.assign(kN, 0);
    const ProcessGroup ep = grid.ForRank(r)->expert_model_parallel_group();
    int64_t so = 0, ro = 0;
    for (int j = 0; j < ep.size(); ++j) {
      x.sc.push_back(a2a_count(r, ep.ranks[j]));
      x.sd.push_back(so);
      so += x.sc.back();
      x.rc.push_back(a2a_count(ep.ranks[j], r));
      x.rd.push_back(ro);
      ro += x.rc.back();
    }
    x.a2a_in = RandomFloats(rng, so);
    x.a2a_out.assign(ro, 0);
  }
  const std::vector<RankData> before = d;

  InProcessHub hub(kWorld);
  Completions done;
  RunThreads(kWorld, 77, [&](int r) {
    const RankView v = *grid.ForRank(r);
    RankData& x = d[r];
    Communicator* comm = hub.ForRank(r);
    std::vector<std::function<void()>> ops = {
        [&] { comm->AllReduceSum(v.tensor_model_parallel_group(), x.tp_in.data(),
                                 x.tp_out.data(), kN, done.Callback()); },
        [&] { comm->AllReduceSum(v.data_parallel_group(true), x.dp_in.data(), x.dp_out.data(),
                                 kN, done.Callback()); },
        [&] { comm->AllGather(v.context_parallel_group(), x.cp_in.data(), x.cp_out.data(), kN,
                              DataType::kFloat32, done.Callback()); },
        [&] { comm->ReduceScatterSum(v.expert_data_parallel_group(), x.edp_in.data(),
                                     x.edp_out.data(), kN, done.Callback()); },
        [&] { comm->AllToAllV(v.expert_model_parallel_group(), x.a2a_in.data(), x.sc, x.sd,
                              x.a2a_out.data(), x.rc, x.rd, DataType::kFloat32,
                              done.Callback()); },
        [&] {
          const ProcessGroup pp = v.pipeline_model_parallel_group();
          if (v.is_pipeline_first_stage()) {
            comm->Send(pp, 1, x.pp_buf.data(), kN, DataType::kFloat32, done.Callback());
          } else {
            comm->Recv(pp, 0, x.pp_buf.data(), kN, DataType::kFloat32, done.Callback());
          }
        }};
    std::mt19937 order_rng(1000 + r);
    std::shuffle(ops.begin(), ops.end(), order_rng);
    for (auto& op : ops) op();
  });
  done.WaitFor(6 * kWorld);
  for (const auto& s : done.statuses()) REQUIRE(s.ok());
  CHECK(hub.pending_operations() == 0);

  // Expected values from the groups and plain loops over the untouched inputs.
  auto sum_over = [&](const ProcessGroup& g, std::vector<float> RankData::*field) {
    std::vector<std::vector<float>> xs;
    for (int m : g.ranks) xs.push_back(before[m].*field);
    return SequentialSum(xs);
  };
  for (int r = 0; r < kWorld; ++r) {
    INFO("rank " << r);
    const RankView v = *grid.ForRank(r);
    CHECK(SameBits(d[r].tp_out, sum_over(v.tensor_model_parallel_group(), &RankData::tp_in)));
    CHECK(SameBits(d[r].dp_out, sum_over(v.data_parallel_group(true), &RankData::dp_in)));
    const ProcessGroup cp = v.context_parallel_group();
    std::vector<float> gathered;
    for (int m : cp.ranks) gathered.insert(gathered.end(), before[m].cp_in.begin(), before[m].cp_in.end());
    CHECK(SameBits(d[r].cp_out, gathered));
    const ProcessGroup edp = v.expert_data_parallel_group();
    const std::vector<float> full = sum_over(edp, &RankData::edp_in);
    CHECK(SameBits(d[r].edp_out,
                   std::vector<float>(full.begin() + edp.rank_in_group * kN,
                                      full.begin() + (edp.rank_in_group + 1) * kN)));
    const ProcessGroup ep = v.expert_model_parallel_group();
    for (int i = 0; i < ep.size(); ++i) {
      const RankData& src = before[ep.ranks[i]];
      for (int64_t k = 0; k < d[r].rc[i]; ++k) {
        CHECK(d[r].a2a_out[d[r].rd[i] + k] == src.a2a_in[src.sd[ep.rank_in_group] + k]);
      }
    }
    if (!v.is_pipeline_first_stage()) {
      CHECK(SameBits(d[r].pp_buf, before[v.pipeline_model_parallel_prev_rank()].pp_buf));
    }
  }
}

}  // namespace
}  // namespace mxmaca::transport
