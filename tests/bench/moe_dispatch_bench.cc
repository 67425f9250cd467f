// tests/bench/moe_dispatch_bench.cc: MoE token dispatch + combine throughput on the
// in-process hub (issue 7 "Speed it must show"), next to the raw p2p bandwidth of the same
// transport measured in the same run.
//
//   bazel run //tests/bench:moe_dispatch_bench   (.bazelrc already builds with -O2)
//   env: MOE_BENCH_EP (4), MOE_BENCH_RANKS_PER_NODE (2), MOE_BENCH_EXPERTS (4 * EP),
//        MOE_BENCH_ROWS (rows per rank, 2048), MOE_BENCH_HIDDEN (1024),
//        MOE_BENCH_ITERS (10)
//
// Every EP rank runs on its own thread. One iteration = Dispatch + Combine on every rank
// (identity experts; the result is checked once against the input). Reported per row:
//   tokens/s    rows dispatched by all ranks per second (a row is one (token, expert) pair)
//   GB/s        bytes of rows that change rank (both directions) per second; rows an
//               expert on the sending rank takes never leave it
//   xp2p        GB/s divided by the p2p row's GB/s (same bytes per rank, Send/Recv ring)
//   imb         max / mean rows per expert (routing skew); rank imb: max / mean rows
//               received per EP rank
//   fresh       the caller drops its results instead of Recycle()-ing them (every call
//               then faults in new pages for its outputs)
//   x-node      messages crossing node boundaries per iteration (hierarchical: counted by
//               CountingCommunicator; all-to-all and all-gather: one per ordered rank pair
//               on different nodes per collective, as the pairwise backends send them)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "layers/moe/dispatch/counting_communicator.h"
#include "layers/moe/dispatch/dispatch_testing.h"
#include "layers/moe/dispatch/dispatcher_factory.h"
#include "transport/inprocess_communicator.h"
#include "transport/rank_grid.h"

namespace mxmaca::layers::moe::dispatch {
namespace {

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v == nullptr ? fallback : std::atoll(v);
}

// Barrier: reusable, for n threads.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void Wait() {
    absl::MutexLock lock(&mu_);
    const int gen = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      return;
    }
    struct Arg {
      Barrier* barrier;
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

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Config {
  int ep, rpn, experts, iters;
  int64_t rows, hidden;
};

// P2pGBps: each rank sends `bytes` to (r + 1) % P and receives as much from (r - 1) % P,
// all at once, per iteration; returns bytes moved (all ranks) per second in GB/s.
double P2pGBps(const Config& c, int64_t bytes) {
  auto grid = transport::RankGrid::Create(c.ep, 1, 1, 1, c.ep);
  transport::InProcessHub hub(c.ep);
  const int64_t n = std::max<int64_t>(bytes / 4, 1);
  Barrier barrier(c.ep);
  std::vector<double> secs(c.ep);
  std::vector<std::thread> threads;
  for (int r = 0; r < c.ep; ++r) {
    threads.emplace_back([&, r]() {
      const transport::ProcessGroup g = grid->ForRank(r)->expert_model_parallel_group();
      std::vector<float> send(n, 1.0f), recv(n);
      auto once = [&]() {
        absl::Mutex mu;
        int left = 2;
        auto done = [&](const transport::CollectiveInfo&, absl::Status) {
          absl::MutexLock lock(&mu);
          --left;
        };
        hub.ForRank(r)->Send(g, (r + 1) % c.ep, send.data(), n, transport::DataType::kFloat32,
                             done);
        hub.ForRank(r)->Recv(g, (r + c.ep - 1) % c.ep, recv.data(), n,
                             transport::DataType::kFloat32, done);
        absl::MutexLock lock(&mu);
        mu.Await(absl::Condition(+[](int* l) { return *l == 0; }, &left));
      };
      once();
      barrier.Wait();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < c.iters; ++i) once();
      barrier.Wait();
      secs[r] = Seconds(t0, std::chrono::steady_clock::now());
    });
  }
  for (auto& t : threads) t.join();
  const double s = *std::max_element(secs.begin(), secs.end());
  return static_cast<double>(n) * 4 * c.ep * c.iters / s / 1e9;
}

struct Row {
  std::string name;
  double tokens_per_s = 0, gbps = 0;
  int64_t cross_node_messages = 0;
  std::string error;
};

Row RunDispatcher(const Config& c, const std::string& type, bool recycle,
                  const std::vector<testing::RankInput>& inputs, int64_t moved_bytes) {
  Row row;
  row.name = type == "hierarchical" ? absl::StrCat(type, "(", c.rpn, "/node)") : type;
  if (!recycle) row.name += ", fresh buffers";
  auto grid = transport::RankGrid::Create(c.ep, 1, 1, 1, c.ep);
  transport::InProcessHub hub(c.ep);
  std::vector<std::unique_ptr<CountingCommunicator>> comms;
  for (int r = 0; r < c.ep; ++r) {
    comms.push_back(std::make_unique<CountingCommunicator>(hub.ForRank(r)));
  }
  Barrier barrier(c.ep);
  std::vector<double> secs(c.ep);
  std::vector<std::string> errors(c.ep);
  std::vector<std::thread> threads;
  for (int r = 0; r < c.ep; ++r) {
    threads.emplace_back([&, r]() {
      DispatcherOptions o;
      o.comm = comms[r].get();
      o.ep_group = grid->ForRank(r)->expert_model_parallel_group();
      o.num_experts = c.experts;
      auto disp = CreateTokenDispatcher(type, o, c.rpn);
      if (!disp.ok()) {
        errors[r] = disp.status().ToString();
        return;
      }
      const testing::RankInput& in = inputs[r];
      auto once = [&](bool check) -> std::string {
        auto got = DispatchAndWait(**disp, in.rows.data(), in.num_rows, c.hidden,
                                   in.tokens_per_expert);
        if (!got.ok()) return got.status().ToString();
        auto back = CombineAndWait(**disp, got->layout, got->rows.data(),
                                   static_cast<int64_t>(got->rows.size()) / c.hidden);
        if (!back.ok()) return back.status().ToString();
        std::string e =
            check ? testing::FirstDifference(*back, in.rows, "combine(dispatch(x))") : "";
        if (recycle) {
          (*disp)->Recycle(std::move(got->rows));
          (*disp)->Recycle(*std::move(back));
        }
        return e;
      };
      errors[r] = once(true);
      comms[r]->Clear();
      barrier.Wait();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < c.iters && errors[r].empty(); ++i) errors[r] = once(false);
      barrier.Wait();
      secs[r] = Seconds(t0, std::chrono::steady_clock::now());
    });
  }
  for (auto& t : threads) t.join();
  for (const std::string& e : errors) {
    if (!e.empty() && row.error.empty()) row.error = e;
  }
  const double s = *std::max_element(secs.begin(), secs.end());
  int64_t total_rows = 0;
  for (const auto& in : inputs) total_rows += in.num_rows;
  row.tokens_per_s = static_cast<double>(total_rows) * c.iters / s;
  row.gbps = static_cast<double>(moved_bytes) * c.iters / s / 1e9;
  if (type == "hierarchical") {
    for (auto& comm : comms) row.cross_node_messages += comm->CrossNodeSends(c.rpn).size();
    row.cross_node_messages /= c.iters;
  } else {
    // Pairwise backends: one message per ordered rank pair across nodes per collective;
    // dispatch = count all-gather + rows, combine = rows.
    int64_t pairs = 0;
    for (int a = 0; a < c.ep; ++a) {
      for (int b = 0; b < c.ep; ++b) pairs += a / c.rpn != b / c.rpn;
    }
    row.cross_node_messages = 3 * pairs;
  }
  return row;
}

int Main() {
  Config c;
  c.ep = static_cast<int>(EnvInt("MOE_BENCH_EP", 4));
  c.rpn = static_cast<int>(EnvInt("MOE_BENCH_RANKS_PER_NODE", 2));
  c.experts = static_cast<int>(EnvInt("MOE_BENCH_EXPERTS", 4 * c.ep));
  c.rows = EnvInt("MOE_BENCH_ROWS", 2048);
  c.hidden = EnvInt("MOE_BENCH_HIDDEN", 1024);
  c.iters = static_cast<int>(EnvInt("MOE_BENCH_ITERS", 10));
  std::printf("moe_dispatch_bench: in-process hub, EP %d (%d ranks/node), %d experts, %lld rows x "
              "%lld hidden fp32 per rank (%.1f MiB), %d iterations, %u hardware threads\n",
              c.ep, c.rpn, c.experts, static_cast<long long>(c.rows),
              static_cast<long long>(c.hidden), c.rows * c.hidden * 4 / 1048576.0, c.iters,
              std::thread::hardware_concurrency());
  for (auto [routing, rname] : {std::pair{testing::Routing::kUniform, "uniform"},
                                std::pair{testing::Routing::kZipf, "zipf(1.2)"}}) {
    std::vector<testing::RankInput> inputs =
        testing::MakeInputs(c.ep, c.experts, c.hidden, c.rows, c.rows, routing, 2024);
    // Bytes that change rank, dispatch + combine.
    const int L = c.experts / c.ep;
    int64_t moved_rows = 0;
    std::vector<int64_t> received(c.ep, 0);
    for (int s = 0; s < c.ep; ++s) {
      for (int e = 0; e < c.experts; ++e) {
        received[e / L] += inputs[s].tokens_per_expert[e];
        if (e / L != s) moved_rows += inputs[s].tokens_per_expert[e];
      }
    }
    const int64_t moved_bytes = 2 * moved_rows * c.hidden * 4;
    int64_t total_rows = 0;
    for (const auto& in : inputs) total_rows += in.num_rows;
    const double rank_imb = *std::max_element(received.begin(), received.end()) /
                            (static_cast<double>(total_rows) / c.ep);
    const double p2p = P2pGBps(c, moved_bytes / 2 / c.ep);
    std::printf("\nrouting %s: expert imb %.2f, rank imb %.2f, %.1f MiB change rank per "
                "iteration\n",
                rname, testing::Imbalance(inputs, c.experts), rank_imb,
                moved_bytes / 1048576.0);
    std::printf("  %-34s %12s %9s %7s %8s\n", "path", "tokens/s", "GB/s", "xp2p", "x-node");
    std::printf("  %-34s %12s %9.2f %7.2f %8s\n", "p2p Send/Recv ring", "-", p2p, 1.0, "-");
    double a2a = 0;
    for (auto [type, recycle] : {std::pair{"alltoall", false}, std::pair{"alltoall", true},
                                 std::pair{"hierarchical", true}, std::pair{"allgather", true}}) {
      Row row = RunDispatcher(c, type, recycle, inputs, moved_bytes);
      if (!row.error.empty()) {
        std::printf("  %-34s ERROR %s\n", row.name.c_str(), row.error.c_str());
        return 1;
      }
      if (std::string(type) == "alltoall" && recycle) a2a = row.tokens_per_s;
      std::printf("  %-34s %12.0f %9.2f %7.2f %8lld", row.name.c_str(), row.tokens_per_s,
                  row.gbps, row.gbps / p2p, static_cast<long long>(row.cross_node_messages));
      if (a2a > 0) std::printf("   (%.2fx alltoall)", row.tokens_per_s / a2a);
      std::printf("\n");
    }
  }
  return 0;
}

}  // namespace
}  // namespace mxmaca::layers::moe::dispatch

int main() { return mxmaca::layers::moe::dispatch::Main(); }
