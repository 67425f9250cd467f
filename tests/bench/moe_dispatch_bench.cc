// tests/bench/moe_dispatch_bench.cc: MoE token dispatch + combine throughput (issue 7
// "Speed it must show"), next to the raw p2p bandwidth of the same transport measured in
// the same run.
//
//   bazel run //tests/bench:moe_dispatch_bench      (.bazelrc already builds with -O2)
//   env: MOE_BENCH_TRANSPORT  inprocess (default: one thread per EP rank on an
//                             InProcessHub) or ucx (one forked process per EP rank,
//                             UcxCommunicator, UCX_TLS=shm,tcp on lo unless set)
//        MOE_BENCH_EP (4), MOE_BENCH_RANKS_PER_NODE (2), MOE_BENCH_EXPERTS (4 * EP),
//        MOE_BENCH_ROWS (rows per rank, 2048), MOE_BENCH_HIDDEN (1024), MOE_BENCH_ITERS (10)
//
// One iteration = Dispatch + Combine on every rank (identity experts; checked once against
// the input). Every rank runs the same program; rank 0 prints. Per row:
//   tokens/s    rows dispatched by all ranks per second (a row is one (token, expert) pair)
//   GB/s        bytes of rows that change rank (dispatch + combine) per second; rows whose
//               expert is on the sending rank never leave it
//   xp2p        GB/s over the p2p row's GB/s: every rank Sends its mean cross-rank bytes to
//               (r + 1) % P while receiving from (r - 1) % P, on the same transport
//   imb         expert: max / mean rows per expert; rank: max / mean rows received per rank
//   (1/node)    hierarchical with one rank per node: every rank is a leader, so it is a
//               pairwise Send/Recv all-to-all (copies run on every rank's thread in-process)
//   fresh       the caller drops its results instead of Recycle()-ing them
//   x-node      messages crossing node boundaries per iteration (hierarchical: counted by
//               CountingCommunicator; all-to-all and all-gather: one per ordered rank pair
//               on different nodes per collective, as the pairwise backends send them)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "layers/moe/dispatch/counting_communicator.h"
#include "layers/moe/dispatch/dispatch_testing.h"
#include "layers/moe/dispatch/dispatcher_factory.h"
#include "transport/inprocess_communicator.h"
#include "transport/rank_grid.h"
#include "transport/ucx/multiprocess_testing.h"
#include "transport/ucx/ucx_communicator.h"

namespace mxmaca::layers::moe::dispatch {
namespace {

using transport::Communicator;

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v == nullptr ? fallback : std::atoll(v);
}

struct Config {
  int ep, rpn, experts, iters;
  int64_t rows, hidden;
};

// ThreadBarrier: reusable barrier for the in-process mode's threads.
class ThreadBarrier {
 public:
  explicit ThreadBarrier(int n) : n_(n) {}
  void Wait() {
    absl::MutexLock lock(&mu_);
    const int gen = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      return;
    }
    struct Arg {
      ThreadBarrier* barrier;
      int generation;
    } arg{this, gen};
    mu_.Await(absl::Condition(
        +[](Arg* a) { return a->barrier->generation_ != a->generation; }, &arg));
  }

 private:
  absl::Mutex mu_;
  const int n_;
  int arrived_ = 0;
  int generation_ = 0;
};

// RankContext: one EP rank's endpoint and a barrier over all ranks.
struct RankContext {
  Communicator* comm = nullptr;
  int rank = 0;
  std::function<void()> barrier;
};

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// P2pSeconds: the ring Send/Recv of `bytes` per rank, c.iters times; seconds on this rank
// between two barriers.
double P2pSeconds(const Config& c, const RankContext& ctx, const transport::ProcessGroup& g,
                  int64_t bytes) {
  const int64_t n = std::max<int64_t>(bytes / 4, 1);
  std::vector<float> send(n, 1.0f), recv(n);
  auto once = [&]() {
    absl::Mutex mu;
    int left = 2;
    auto done = [&](const transport::CollectiveInfo&, absl::Status) {
      absl::MutexLock lock(&mu);
      --left;
    };
    ctx.comm->Send(g, (ctx.rank + 1) % c.ep, send.data(), n, transport::DataType::kFloat32, done);
    ctx.comm->Recv(g, (ctx.rank + c.ep - 1) % c.ep, recv.data(), n, transport::DataType::kFloat32,
                   done);
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](int* l) { return *l == 0; }, &left));
  };
  once();
  ctx.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < c.iters; ++i) once();
  ctx.barrier();
  return Since(t0);
}

struct Measured {
  double seconds = 0;
  int64_t cross_node_messages = 0;  // this rank's, per iteration (hierarchical)
  std::string error;
};

Measured DispatchSeconds(const Config& c, const RankContext& ctx, const transport::ProcessGroup& g,
                         const std::string& type, int rpn, bool recycle,
                         const std::vector<testing::RankInput>& inputs) {
  Measured m;
  CountingCommunicator comm(ctx.comm);
  DispatcherOptions o;
  o.comm = &comm;
  o.ep_group = g;
  o.num_experts = c.experts;
  auto disp = CreateTokenDispatcher(type, o, rpn);
  if (!disp.ok()) {
    m.error = disp.status().ToString();
    return m;
  }
  const testing::RankInput& in = inputs[ctx.rank];
  auto once = [&](bool check) -> std::string {
    auto got = DispatchAndWait(**disp, in.rows.data(), in.num_rows, c.hidden, in.tokens_per_expert);
    if (!got.ok()) return got.status().ToString();
    auto back = CombineAndWait(**disp, got->layout, got->rows.data(),
                               static_cast<int64_t>(got->rows.size()) / c.hidden);
    if (!back.ok()) return back.status().ToString();
    std::string e = check ? testing::FirstDifference(*back, in.rows, "combine(dispatch(x))") : "";
    if (recycle) {
      (*disp)->Recycle(std::move(got->rows));
      (*disp)->Recycle(*std::move(back));
    }
    return e;
  };
  m.error = once(true);
  comm.Clear();
  ctx.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  // A rank that failed keeps arriving at the barriers; its error is printed by rank 0 only
  // when it is rank 0's (the others' show up as their own timeouts).
  for (int i = 0; i < c.iters && m.error.empty(); ++i) m.error = once(false);
  ctx.barrier();
  m.seconds = Since(t0);
  m.cross_node_messages = static_cast<int64_t>(comm.CrossNodeSends(c.rpn).size()) / c.iters;
  return m;
}

// RankProgram: every measurement on one rank; rank 0 prints. Returns "" or an error.
std::string RankProgram(const Config& c, const RankContext& ctx, const char* transport_name) {
  auto grid = transport::RankGrid::Create(c.ep, 1, 1, 1, c.ep);
  if (!grid.ok()) return grid.status().ToString();
  const transport::ProcessGroup g = grid->ForRank(ctx.rank)->expert_model_parallel_group();
  const bool print = ctx.rank == 0;
  if (print) {
    std::printf(
        "moe_dispatch_bench: %s, EP %d (%d ranks/node), %d experts, %lld rows x %lld "
        "hidden fp32 per rank (%.1f MiB), %d iterations, %u hardware threads\n",
        transport_name, c.ep, c.rpn, c.experts, static_cast<long long>(c.rows),
        static_cast<long long>(c.hidden), c.rows * c.hidden * 4 / 1048576.0, c.iters,
        std::thread::hardware_concurrency());
  }
  for (auto [routing, rname] : {std::pair{testing::Routing::kUniform, "uniform"},
                                std::pair{testing::Routing::kZipf, "zipf(1.2)"}}) {
    const std::vector<testing::RankInput> inputs =
        testing::MakeInputs(c.ep, c.experts, c.hidden, c.rows, c.rows, routing, 2024);
    const int L = c.experts / c.ep;
    int64_t moved_rows = 0, total_rows = 0;
    std::vector<int64_t> received(c.ep, 0);
    for (int s = 0; s < c.ep; ++s) {
      total_rows += inputs[s].num_rows;
      for (int e = 0; e < c.experts; ++e) {
        received[e / L] += inputs[s].tokens_per_expert[e];
        if (e / L != s) moved_rows += inputs[s].tokens_per_expert[e];
      }
    }
    const int64_t moved_bytes = 2 * moved_rows * c.hidden * 4;  // dispatch + combine
    const double rank_imb = *std::max_element(received.begin(), received.end()) /
                            (static_cast<double>(total_rows) / c.ep);
    const int64_t p2p_bytes = moved_bytes / 2 / c.ep;
    const double p2p = static_cast<double>(std::max<int64_t>(p2p_bytes / 4, 1)) * 4 * c.ep *
                       c.iters / P2pSeconds(c, ctx, g, p2p_bytes) / 1e9;
    if (print) {
      std::printf(
          "\nrouting %s: expert imb %.2f, rank imb %.2f, %.1f MiB change rank per "
          "iteration\n",
          rname, testing::Imbalance(inputs, c.experts), rank_imb, moved_bytes / 1048576.0);
      std::printf("  %-34s %12s %9s %7s %8s\n", "path", "tokens/s", "GB/s", "xp2p", "x-node");
      std::printf("  %-34s %12s %9.2f %7.2f %8s\n", "p2p Send/Recv ring", "-", p2p, 1.0, "-");
    }
    double a2a = 0;
    struct Path {
      const char* type;
      int rpn;
      bool recycle;
    };
    for (const Path& path : {Path{"alltoall", c.rpn, false}, Path{"alltoall", c.rpn, true},
                             Path{"hierarchical", c.rpn, true}, Path{"hierarchical", 1, true},
                             Path{"allgather", c.rpn, true}}) {
      const char* type = path.type;
      const bool recycle = path.recycle;
      Measured m = DispatchSeconds(c, ctx, g, type, path.rpn, recycle, inputs);
      if (!m.error.empty()) return absl::StrCat(type, ": ", m.error);
      // Cross-node messages: hierarchical counted (leaders only send across: sum over
      // ranks = this rank's count times the number of nodes when rank 0 is a leader).
      int64_t pairs = 0;
      for (int a = 0; a < c.ep; ++a) {
        for (int b = 0; b < c.ep; ++b) pairs += a / c.rpn != b / c.rpn;
      }
      const int64_t nodes = (c.ep + c.rpn - 1) / c.rpn;
      // Hierarchical with fewer ranks per node than the reported layout is the pairwise
      // p2p all-to-all (every rank a leader): count it like the collectives.
      const int64_t x_node = std::string(type) == "hierarchical" && path.rpn == c.rpn
                                 ? m.cross_node_messages * nodes
                                 : 3 * pairs;  // count all-gather + rows + rows back
      const double tokens_per_s = static_cast<double>(total_rows) * c.iters / m.seconds;
      const double gbps = static_cast<double>(moved_bytes) * c.iters / m.seconds / 1e9;
      if (std::string(type) == "alltoall" && recycle) a2a = tokens_per_s;
      if (print) {
        std::string name = std::string(type) == "hierarchical"
                               ? absl::StrCat(type, "(", path.rpn, "/node)")
                               : type;
        if (!recycle) name += ", fresh buffers";
        std::printf("  %-34s %12.0f %9.2f %7.2f %8lld", name.c_str(), tokens_per_s, gbps,
                    gbps / p2p, static_cast<long long>(x_node));
        if (a2a > 0) std::printf("   (%.2fx alltoall)", tokens_per_s / a2a);
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
  return "";
}

int RunInProcess(const Config& c) {
  transport::InProcessHub hub(c.ep);
  ThreadBarrier barrier(c.ep);
  std::vector<std::string> errors(c.ep);
  std::vector<std::thread> threads;
  for (int r = 0; r < c.ep; ++r) {
    threads.emplace_back([&, r]() {
      RankContext ctx;
      ctx.comm = hub.ForRank(r);
      ctx.rank = r;
      ctx.barrier = [&barrier]() { barrier.Wait(); };
      errors[r] = RankProgram(c, ctx, "in-process hub (threads)");
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < c.ep; ++r) {
    if (!errors[r].empty()) {
      std::printf("rank %d: %s\n", r, errors[r].c_str());
      return 1;
    }
  }
  return 0;
}

int RunUcx(const Config& c) {
  const int port = transport::ucx::FreeTcpPort();
  auto results = transport::ucx::RunRanks(
      c.ep,
      [&c, port](int rank) -> std::string {
        setenv("UCX_TLS", "shm,tcp", 0);
        setenv("UCX_NET_DEVICES", "lo", 0);
        setenv("UCX_WARN_UNUSED_ENV_VARS", "n", 1);
        transport::ucx::RendezvousOptions rv;
        rv.master_port = port;
        auto ucx = transport::ucx::UcxCommunicator::Create(rv, rank, c.ep, {});
        if (!ucx.ok()) return ucx.status().ToString();
        auto grid = transport::RankGrid::Create(c.ep, 1, 1, 1, c.ep);
        const transport::ProcessGroup world = grid->ForRank(rank)->world_group();
        RankContext ctx;
        ctx.comm = ucx->get();
        ctx.rank = rank;
        ctx.barrier = [&]() {
          float x = 0;
          absl::Notification n;
          (*ucx)->AllReduceSum(
              world, &x, &x, 1,
              [&n](const transport::CollectiveInfo&, absl::Status) { n.Notify(); });
          n.WaitForNotification();
        };
        std::string e = RankProgram(c, ctx, "UCX (one process per rank)");
        absl::Status closed = (*ucx)->Close();
        if (e.empty() && !closed.ok()) e = closed.ToString();
        return e;
      },
      absl::Minutes(10));
  int rc = 0;
  for (size_t r = 0; r < results.size(); ++r) {
    if (!results[r].text.empty() || results[r].exit_code != 0 || results[r].timed_out) {
      std::printf("rank %zu: %s (exit %d%s)\n", r, results[r].text.c_str(), results[r].exit_code,
                  results[r].timed_out ? ", timed out" : "");
      rc = 1;
    }
  }
  return rc;
}

int Main() {
  Config c;
  c.ep = static_cast<int>(EnvInt("MOE_BENCH_EP", 4));
  c.rpn = static_cast<int>(EnvInt("MOE_BENCH_RANKS_PER_NODE", 2));
  c.experts = static_cast<int>(EnvInt("MOE_BENCH_EXPERTS", 4 * c.ep));
  c.rows = EnvInt("MOE_BENCH_ROWS", 2048);
  c.hidden = EnvInt("MOE_BENCH_HIDDEN", 1024);
  c.iters = static_cast<int>(EnvInt("MOE_BENCH_ITERS", 10));
  const char* t = std::getenv("MOE_BENCH_TRANSPORT");
  if (t != nullptr && std::string(t) == "ucx") return RunUcx(c);
  return RunInProcess(c);
}

}  // namespace
}  // namespace mxmaca::layers::moe::dispatch

int main() { return mxmaca::layers::moe::dispatch::Main(); }
