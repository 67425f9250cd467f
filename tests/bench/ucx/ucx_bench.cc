// tests/bench/ucx/ucx_bench.cc: UcxCommunicator bandwidth next to ucx_perftest, measured in
// the same run on the same transports (bazel run //tests/bench/ucx:ucx_bench; UCX_TLS /
// UCX_NET_DEVICES from the environment apply to both).
//
// Rows: point-to-point tag bandwidth at 1 MiB and 64 MiB (16 messages in flight, as a
// window), with descriptor verification on and off; all-reduce bus bandwidth (bytes *
// 2(n-1)/n / time, NCCL's definition) over UCX_BENCH_RANKS ranks (default 2) at 1 MiB
// and 64 MiB in rank-order and
// ring mode; 8-byte send/recv ping-pong latency (median one-way). The baselines are
// ucx_perftest tag_bw at the same size (its "overall" MB/s, which are MiB/s) and tag_lat
// (its median); each row prints ours / baseline.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "transport/ucx/multiprocess_testing.h"
#include "transport/ucx/ucx_communicator.h"

namespace mxmaca::transport::ucx {
namespace {

constexpr int64_t kMiB = 1 << 20;

// PerftestBandwidth: bytes/s of `ucx_perftest -t tag_bw -s bytes -n iters` over loopback,
// or -1 when it cannot be run or parsed.
double PerftestBandwidth(int64_t bytes, int iters) {
  const int port = FreeTcpPort();
  const std::string server = absl::StrCat("ucx_perftest -p ", port, " >/dev/null 2>&1 &");
  if (std::system(server.c_str()) != 0) return -1;
  absl::SleepFor(absl::Milliseconds(500));
  const std::string client = absl::StrCat("ucx_perftest 127.0.0.1 -p ", port, " -t tag_bw -s ",
                                          bytes, " -n ", iters, " 2>&1");
  FILE* f = popen(client.c_str(), "r");
  if (f == nullptr) return -1;
  char line[512];
  double mib_per_s = -1;
  while (fgets(line, sizeof(line), f) != nullptr) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    // "Final: iters p50 avg overall bw_avg bw_overall rate_avg rate_overall"
    if (fields.size() >= 7 && fields[0] == "Final:") {
      if (!absl::SimpleAtod(fields[6], &mib_per_s)) mib_per_s = -1;
    }
  }
  pclose(f);
  return mib_per_s < 0 ? -1 : mib_per_s * kMiB;
}

// PerftestLatencyUs: median one-way latency (µs) of `ucx_perftest -t tag_lat -s 8`, or -1.
double PerftestLatencyUs(int iters) {
  const int port = FreeTcpPort();
  const std::string server = absl::StrCat("ucx_perftest -p ", port, " >/dev/null 2>&1 &");
  if (std::system(server.c_str()) != 0) return -1;
  absl::SleepFor(absl::Milliseconds(500));
  const std::string client =
      absl::StrCat("ucx_perftest 127.0.0.1 -p ", port, " -t tag_lat -s 8 -n ", iters, " 2>&1");
  FILE* f = popen(client.c_str(), "r");
  if (f == nullptr) return -1;
  char line[512];
  double p50 = -1;
  while (fgets(line, sizeof(line), f) != nullptr) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    // "Final: iters p50 avg overall ..."
    if (fields.size() >= 3 && fields[0] == "Final:" && !absl::SimpleAtod(fields[2], &p50)) {
      p50 = -1;
    }
  }
  pclose(f);
  return p50;
}

// Waiter: counts completions; fails on the first error.
class Waiter {
 public:
  DoneCallback Callback() {
    return [this](const CollectiveInfo&, absl::Status s) {
      absl::MutexLock lock(&mu_);
      if (!s.ok() && error_.empty()) error_ = s.ToString();
      ++done_;
    };
  }
  std::string Wait(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() { return done_ >= n; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(120))) return "timeout";
    done_ = 0;
    return error_;
  }

 private:
  absl::Mutex mu_;
  int done_ = 0;
  std::string error_;
};

// Measure: in rank `rank` of `world`, runs the benchmark rows with `options` and returns
// lines "name seconds bytes_per_iteration iterations" (rank 1's timing) or "error: ...".
// Point-to-point rows run between ranks 0 and 1 (the others wait); all-reduce rows over
// all ranks.
std::string Measure(int rank, int world, int port, const UcxCommunicator::Options& options,
                    const std::string& label, bool p2p, bool allreduce) {
  RendezvousOptions rv;
  rv.master_port = port;
  auto comm_or = UcxCommunicator::Create(rv, rank, world, options);
  if (!comm_or.ok()) return absl::StrCat("error: ", comm_or.status().ToString());
  UcxCommunicator& comm = **comm_or;
  ProcessGroup everyone;
  everyone.id = 2;
  for (int r = 0; r < world; ++r) everyone.ranks.push_back(r);
  everyone.rank_in_group = rank;
  ProcessGroup g;  // the pair (0, 1)
  g.id = 1;
  g.ranks = {0, 1};
  g.rank_in_group = rank;
  const bool in_pair = rank < 2;
  Waiter w;
  std::string out;
  // Sync: a tiny all-reduce (every rank leaves it at about the same time).
  float token = 0;
  auto sync = [&]() {
    comm.AllReduceSum(everyone, &token, &token, 1, w.Callback());
    return w.Wait(1);
  };
  if (p2p) {
    // Ping-pong of 8 bytes: median one-way latency over 2000 round trips.
    std::string e = sync();
    if (!e.empty()) return "error: " + e;
    std::vector<double> one_way;
    char byte[8] = {};
    for (int i = 0; i < 2000 && in_pair; ++i) {
      const absl::Time t0 = absl::Now();
      for (int leg = 0; leg < 2; ++leg) {
        if ((leg == 0) == (rank == 0)) {
          comm.Send(g, 1 - rank, byte, 8, DataType::kUInt8, w.Callback());
        } else {
          comm.Recv(g, 1 - rank, byte, 8, DataType::kUInt8, w.Callback());
        }
        e = w.Wait(1);
        if (!e.empty()) return "error: " + e;
      }
      one_way.push_back(absl::ToDoubleMicroseconds(absl::Now() - t0) / 2);
    }
    std::sort(one_way.begin(), one_way.end());
    if (in_pair) {
      absl::StrAppend(&out, "latency", label, " ", one_way[one_way.size() / 2], " 8 0\n");
    }
  }
  for (int64_t bytes : {kMiB, 64 * kMiB}) {
    const int iters = bytes == kMiB ? 800 : 24;
    const int window = 16;
    std::vector<char> buffer(bytes * (p2p ? window : 1), 1);
    if (p2p) {
      for (int pass = 0; pass < 2; ++pass) {  // pass 0 warms up
        std::string e = sync();
        if (!e.empty()) return "error: " + e;
        const absl::Time start = absl::Now();
        const int n = pass == 0 ? window : iters;
        for (int i = 0; i < n && in_pair; i += window) {
          const int k = std::min(window, n - i);
          for (int j = 0; j < k; ++j) {
            if (rank == 0) {
              comm.Send(g, 1, buffer.data() + j * bytes, bytes, DataType::kUInt8, w.Callback());
            } else {
              comm.Recv(g, 0, buffer.data() + j * bytes, bytes, DataType::kUInt8, w.Callback());
            }
          }
          e = w.Wait(k);
          if (!e.empty()) return "error: " + e;
        }
        if (pass == 1) {
          absl::StrAppend(&out, "p2p", label, " ", absl::ToDoubleSeconds(absl::Now() - start), " ",
                          bytes, " ", n, "\n");
        }
      }
    }
    if (allreduce) {
      std::vector<float> data(bytes / 4, 1.0f);
      const int n = bytes == kMiB ? 200 : 10;
      for (int pass = 0; pass < 2; ++pass) {
        std::string e = sync();
        if (!e.empty()) return "error: " + e;
        const absl::Time start = absl::Now();
        for (int i = 0; i < (pass == 0 ? 2 : n); ++i) {
          comm.AllReduceSum(everyone, data.data(), data.data(), bytes / 4, w.Callback());
          e = w.Wait(1);
          if (!e.empty()) return "error: " + e;
        }
        if (pass == 1) {
          absl::StrAppend(&out, "allreduce", label, " ", absl::ToDoubleSeconds(absl::Now() - start),
                          " ", bytes, " ", n, "\n");
        }
      }
    }
  }
  absl::Status c = comm.Close();
  if (!c.ok()) return "error: " + c.ToString();
  return out;
}

struct Row {
  std::string name;
  int64_t bytes;
  double bytes_per_s;
  double baseline;
};

int Main() {
  std::printf("UCX_TLS=%s UCX_NET_DEVICES=%s\n",
              std::getenv("UCX_TLS") ? std::getenv("UCX_TLS") : "(default)",
              std::getenv("UCX_NET_DEVICES") ? std::getenv("UCX_NET_DEVICES") : "(default)");
  const double perf_1m = PerftestBandwidth(kMiB, 2000);
  const char* ranks_env = std::getenv("UCX_BENCH_RANKS");  // all-reduce ranks, default 2
  int world = 2;
  if (ranks_env != nullptr && (!absl::SimpleAtoi(ranks_env, &world) || world < 2)) {
    std::printf("UCX_BENCH_RANKS=%s: expected an integer >= 2\n", ranks_env);
    return 2;
  }
  std::printf("all-reduce over %d ranks (UCX_BENCH_RANKS); p2p between ranks 0 and 1\n", world);
  const double perf_64m = PerftestBandwidth(64 * kMiB, 60);
  const double perf_lat = PerftestLatencyUs(20000);
  std::printf("ucx_perftest tag_lat 8 B: median %.2f us one-way\n", perf_lat);
  std::printf("ucx_perftest tag_bw: 1 MiB %.2f GB/s, 64 MiB %.2f GB/s\n", perf_1m / 1e9,
              perf_64m / 1e9);
  std::vector<Row> rows;
  std::vector<Row> latencies;  // bytes_per_s holds microseconds here
  struct Config {
    std::string label;
    UcxCommunicator::Options options;
    bool p2p, allreduce;
  };
  UcxCommunicator::Options verify_off;
  verify_off.verify = false;
  UcxCommunicator::Options ring;
  ring.reduction = ReductionOrder::kRing;
  ring.ring_min_bytes = 0;
  UcxCommunicator::Options spin;
  spin.spin = absl::Milliseconds(2);
  const char* only = std::getenv("UCX_BENCH_ONLY");  // e.g. "(ring)": run that row set only
  std::vector<Config> configs = {
      {"(verify)", {}, true, true},
      {"(no-verify)", verify_off, true, false},
      {"(ring)", ring, false, true},
      {"(spin-2ms)", spin, true, true},
  };
  if (only != nullptr) {
    std::vector<Config> kept;
    for (const Config& c : configs) {
      if (c.label == only) kept.push_back(c);
    }
    configs = kept;
  }
  for (const Config& config : configs) {
    const int port = FreeTcpPort();
    auto results = RunRanks(
        world,
        [&](int rank) {
          return Measure(rank, world, port, config.options, config.label, config.p2p,
                         config.allreduce);
        },
        absl::Minutes(5));
    for (int r = 0; r < world; ++r) {
      if (results[r].text.rfind("error", 0) == 0 || results[r].timed_out) {
        std::printf("rank %d failed: %s\n", r, results[r].text.c_str());
        return 1;
      }
    }
    // Rank 1 (the receiver) timed the transfers.
    for (absl::string_view line : absl::StrSplit(results[1].text, '\n', absl::SkipEmpty())) {
      std::vector<std::string> f = absl::StrSplit(line, ' ');
      double seconds = 0;
      int64_t bytes = 0, n = 0;
      if (f.size() != 4 || !absl::SimpleAtod(f[1], &seconds) || !absl::SimpleAtoi(f[2], &bytes) ||
          !absl::SimpleAtoi(f[3], &n)) {
        continue;
      }
      if (f[0].rfind("latency", 0) == 0) {  // "latency<label> microseconds 8 0"
        latencies.push_back({f[0], 8, seconds, perf_lat});
        continue;
      }
      double rate = static_cast<double>(bytes) * n / seconds;
      if (f[0].rfind("allreduce", 0) == 0) rate *= 2.0 * (world - 1) / world;  // bus bandwidth
      rows.push_back({f[0], bytes, rate, bytes == kMiB ? perf_1m : perf_64m});
    }
  }
  std::printf("%-24s %10s %12s %14s %8s\n", "row", "size", "us", "perftest us", "ratio");
  for (const Row& row : latencies) {
    std::printf("%-24s %9lld B %12.2f %14.2f %8.2f\n", row.name.c_str(),
                static_cast<long long>(row.bytes), row.bytes_per_s, row.baseline,
                row.baseline > 0 ? row.bytes_per_s / row.baseline : 0.0);
  }
  std::printf("%-24s %10s %12s %14s %8s\n", "row", "size", "GB/s", "perftest GB/s", "ratio");
  for (const Row& row : rows) {
    std::printf("%-24s %7lld MiB %12.2f %14.2f %8.2f\n", row.name.c_str(),
                static_cast<long long>(row.bytes / kMiB), row.bytes_per_s / 1e9, row.baseline / 1e9,
                row.baseline > 0 ? row.bytes_per_s / row.baseline : 0.0);
  }
  return 0;
}

}  // namespace
}  // namespace mxmaca::transport::ucx

int main() { return mxmaca::transport::ucx::Main(); }
