// tests/bench/cp_layer_bench.cc: context-parallel attention of one transformer layer
// (hidden 256, 4 heads of 64, b = 1) at long sequences with CP = 1, 2, 4, 8 ranks as
// threads over the in-process hub (issue 9's benchmark). Per row: the bytes one shard
// holds (ContextParallelAttention::StateBytes + the layer's q/k/v/out/lse and
// dout/dq/dk/dv blocks, all charged to a --memory-cap-per-shard counter), the forward and
// backward wall time of the ring, and the fraction of K/V transfer time hidden behind
// compute. A row whose shard does not fit the cap prints the clear out-of-memory error.
//
//   bazel run -c opt //tests/bench:cp_layer_bench -- [--seqs=8192,32768] [--cps=1,2,4,8]
//       [--memory-cap-per-shard=BYTES] [--threads=N] [--link-gbps=G] [--inline-transfers]
//
// --seqs / --cps: the rows (every seq with every CP).
// --memory-cap-per-shard: default 768M, chosen so that at 128K tokens CP = 1 (and 2)
//   do not fit and CP >= 4 do (see the printed byte counts).
// --threads: compute threads per rank (default max(1, cores / CP)).
// --link-gbps: emulated link bandwidth (GB/s) per message: each transfer completes
//   bytes / bandwidth after both sides posted (sleeping, no CPU), on its own thread;
//   0 (default) copies at memory speed on a transfer thread.
// --inline-transfers: let the hub copy inline on the last poster's thread instead.
// --no-compute: only charge the shards' memory and build the ring objects (the cap
//   check), without running the attention (for rows too slow to run here).
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kernels/exec_context.h"
#include "layers/context_parallel/cp_attention.h"
#include "layers/context_parallel/cp_layout.h"
#include "layers/context_parallel/memory_cap.h"
#include "layers/context_parallel/ring_attention.h"
#include "transport/inprocess_communicator.h"
#include "transport/rank_grid.h"

namespace mxmaca::bench {
namespace {

using layers::cp::ContextParallelAttention;
using layers::cp::CpAttentionTimes;
using layers::cp::RingAttentionConfig;
using layers::cp::ShardMemoryCap;

constexpr int64_t kHeads = 4, kHeadDim = 64, kBatch = 1, kTile = 128;

struct Flags {
  std::vector<int64_t> seqs = {8192, 32768};
  std::vector<int64_t> cps = {1, 2, 4, 8};
  int64_t cap = int64_t{768} << 20;
  int threads = 0;
  double link_gbps = 0.0;
  bool inline_transfers = false;
  bool no_compute = false;
};

bool ParseList(const std::string& v, std::vector<int64_t>* out) {
  out->clear();
  for (absl::string_view p : absl::StrSplit(v, ',')) {
    int64_t x;
    if (!absl::SimpleAtoi(p, &x) || x < 1) return false;
    out->push_back(x);
  }
  return !out->empty();
}

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// Fill: deterministic pseudo-random values in [-1, 1) (fast; inputs need not be normal).
void Fill(std::vector<float>* x, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& v : *x) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<float>(static_cast<int64_t>(s >> 40) - (1 << 23)) / (1 << 23);
  }
}

int64_t ProcessPeakRssBytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  }
  return 0;
}

// Transfers: runs the hub's completion steps on their own threads, optionally after
// bytes / bandwidth (an emulated link; sleeping threads use no CPU).
class Transfers {
 public:
  explicit Transfers(double delay_s) : delay_s_(delay_s) {}
  ~Transfers() { Join(); }
  void Run(std::function<void()> f) {
    std::lock_guard<std::mutex> lock(mu_);
    threads_.emplace_back([f = std::move(f), d = delay_s_] {
      if (d > 0) std::this_thread::sleep_for(std::chrono::duration<double>(d));
      f();
    });
  }
  void Join() {
    std::vector<std::thread> t;
    {
      std::lock_guard<std::mutex> lock(mu_);
      t.swap(threads_);
    }
    for (auto& th : t) th.join();
  }

 private:
  const double delay_s_;
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

struct Row {
  int64_t seq = 0, cp = 0;
  int64_t shard_bytes = 0;  // accounted per shard (what the cap sees)
  int64_t state_bytes = 0;  // ContextParallelAttention::StateBytes
  bool fits = false;
  std::string error;
  double fwd_s = 0, bwd_s = 0;
  CpAttentionTimes fwd, bwd;  // summed over ranks
};

// ShardBytes: the layer's per-shard blocks: q, out, dout, dq [b, np, sl, hn], k, v, dk,
// dv [b, ng, sl, hn], lse [b, np, sl].
struct Block {
  const char* what;
  int64_t elems;
};
std::vector<Block> ShardBlocks(int64_t sl) {
  const int64_t qe = kBatch * kHeads * sl * kHeadDim, ke = qe;
  return {{"q", qe},    {"k", ke},  {"v", ke},  {"out", qe}, {"lse", kBatch * kHeads * sl},
          {"dout", qe}, {"dq", qe}, {"dk", ke}, {"dv", ke}};
}

Row RunRow(const Flags& flags, int64_t seq, int64_t cp) {
  Row row;
  row.seq = seq;
  row.cp = cp;
  auto layout = layers::cp::MakeCpLayout(seq, cp);
  if (!layout.ok()) {
    row.error = std::string(layout.status().message());
    return row;
  }
  RingAttentionConfig cfg;
  cfg.b = kBatch;
  cfg.heads = kHeads;
  cfg.groups = kHeads;
  cfg.head_dim = kHeadDim;
  cfg.layout = *layout;
  cfg.q_tile = kTile;
  cfg.kv_tile = kTile;
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  const int threads =
      flags.threads > 0 ? flags.threads : std::max<int>(1, cores / static_cast<int>(cp));
  const int64_t sl = layout->LocalSeq();
  row.state_bytes = ContextParallelAttention::StateBytes(cfg, threads);
  row.shard_bytes = row.state_bytes;
  for (const Block& b : ShardBlocks(sl)) row.shard_bytes += b.elems * 4;

  auto grid = transport::RankGrid::Create(static_cast<int>(cp), 1, 1, static_cast<int>(cp));
  if (!grid.ok()) {
    row.error = std::string(grid.status().message());
    return row;
  }
  const double block_bytes = static_cast<double>(kBatch * kHeads * sl * kHeadDim * 4);
  Transfers transfers(flags.link_gbps > 0 ? block_bytes / (flags.link_gbps * 1e9) : 0.0);
  transport::InProcessHub::Options hub_opts;
  if (!flags.inline_transfers) {
    hub_opts.executor = [&transfers](std::function<void()> f) { transfers.Run(std::move(f)); };
  }
  transport::InProcessHub hub(static_cast<int>(cp), hub_opts);

  // Charge every shard's blocks and state to its cap before touching memory: a shard
  // that does not fit reports the clear error and the row is not run.
  std::vector<std::unique_ptr<ShardMemoryCap>> caps(cp);
  std::vector<std::vector<layers::cp::CappedReservation>> held(cp);
  std::vector<std::unique_ptr<ContextParallelAttention>> attn(cp);
  for (int64_t r = 0; r < cp; ++r) {
    caps[r] = std::make_unique<ShardMemoryCap>(
        absl::StrCat("context_parallel rank ", r, " of ", cp, " (seq ", seq, ")"), flags.cap);
    for (const Block& b : ShardBlocks(sl)) {
      auto res = layers::cp::CappedReservation::Make(caps[r].get(), b.elems * 4,
                                                     absl::StrCat("attention ", b.what, " block"));
      if (!res.ok()) {
        row.error = std::string(res.status().message());
        return row;
      }
      held[r].push_back(std::move(*res));
    }
    ContextParallelAttention::Options opts;
    opts.memory_cap = caps[r].get();
    opts.num_threads = threads;
    auto a = ContextParallelAttention::Create(
        cfg, hub.ForRank(static_cast<int>(r)),
        transport::RankView(*grid, static_cast<int>(r)).context_parallel_group(), opts);
    if (!a.ok()) {
      row.error = std::string(a.status().message());
      return row;
    }
    attn[r] = std::move(*a);
  }
  row.fits = true;
  if (flags.no_compute) return row;

  struct RankData {
    std::vector<float> q, k, v, out, lse, dout, dq, dk, dv;
  };
  std::vector<RankData> d(cp);
  for (int64_t r = 0; r < cp; ++r) {
    const int64_t qe = kBatch * kHeads * sl * kHeadDim;
    for (auto* x :
         {&d[r].q, &d[r].k, &d[r].v, &d[r].out, &d[r].dout, &d[r].dq, &d[r].dk, &d[r].dv}) {
      x->resize(qe);
    }
    d[r].lse.resize(kBatch * kHeads * sl);
    Fill(&d[r].q, 4 * r + 1);
    Fill(&d[r].k, 4 * r + 2);
    Fill(&d[r].v, 4 * r + 3);
    Fill(&d[r].dout, 4 * r + 4);
  }

  std::vector<absl::Status> st(cp);
  std::vector<CpAttentionTimes> ft(cp), bt(cp);
  const auto run_phase = [&](bool backward) {
    std::vector<std::thread> ts;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t r = 0; r < cp; ++r) {
      ts.emplace_back([&, r] {
        kernels::ExecContext ctx;
        ctx.num_threads = threads;
        RankData& x = d[r];
        st[r] = backward ? attn[r]->Backward(ctx, x.q.data(), x.k.data(), x.v.data(), nullptr,
                                             x.out.data(), x.lse.data(), x.dout.data(), x.dq.data(),
                                             x.dk.data(), x.dv.data(), &bt[r])
                         : attn[r]->Forward(ctx, x.q.data(), x.k.data(), x.v.data(), nullptr,
                                            x.out.data(), x.lse.data(), &ft[r]);
      });
    }
    for (auto& t : ts) t.join();
    transfers.Join();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  row.fwd_s = run_phase(false);
  for (const absl::Status& s : st) {
    if (!s.ok()) row.error = std::string(s.message());
  }
  if (row.error.empty()) row.bwd_s = run_phase(true);
  for (int64_t r = 0; r < cp; ++r) {
    if (!st[r].ok() && row.error.empty()) row.error = std::string(st[r].message());
    row.fwd.Add(ft[r]);
    row.bwd.Add(bt[r]);
    for (float x : {d[r].out[0], d[r].dq[0], d[r].dk[0]}) {
      if (!std::isfinite(x) && row.error.empty()) row.error = "non-finite output";
    }
  }
  return row;
}

int Main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&](const char* name) -> const char* {
      const size_t n = std::strlen(name);
      if (a.compare(0, n, name) == 0 && a.size() > n && a[n] == '=') return argv[i] + n + 1;
      return nullptr;
    };
    if (const char* v = value("--seqs")) {
      if (!ParseList(v, &flags.seqs)) return std::fprintf(stderr, "bad --seqs %s\n", v), 2;
    } else if (const char* v = value("--cps")) {
      if (!ParseList(v, &flags.cps)) return std::fprintf(stderr, "bad --cps %s\n", v), 2;
    } else if (const char* v = value(layers::cp::kMemoryCapFlag)) {
      auto cap = layers::cp::ParseMemoryCap(v);
      if (!cap.ok()) return std::fprintf(stderr, "%s\n", cap.status().ToString().c_str()), 2;
      flags.cap = *cap;
    } else if (const char* v = value("--threads")) {
      if (!absl::SimpleAtoi(v, &flags.threads)) return std::fprintf(stderr, "bad --threads\n"), 2;
    } else if (const char* v = value("--link-gbps")) {
      if (!absl::SimpleAtod(v, &flags.link_gbps))
        return std::fprintf(stderr, "bad --link-gbps\n"), 2;
    } else if (a == "--no-compute") {
      flags.no_compute = true;
    } else if (a == "--inline-transfers") {
      flags.inline_transfers = true;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  std::printf(
      "# cp_layer_bench: hidden %" PRId64 ", %" PRId64 " heads of %" PRId64 ", b %" PRId64
      ", tile %" PRId64 ", fp32; cap %s = %" PRId64 " bytes (%.0f MiB); cores %u; transfers %s%s\n",
      kHeads * kHeadDim, kHeads, kHeadDim, kBatch, kTile, layers::cp::kMemoryCapFlag, flags.cap,
      MiB(flags.cap), std::thread::hardware_concurrency(),
      flags.inline_transfers ? "inline" : "on transfer threads",
      flags.link_gbps > 0 ? absl::StrCat(", emulated link ", flags.link_gbps, " GB/s").c_str()
                          : "");
  std::printf(
      "| seq | CP | s/CP | shard MiB | state MiB | vs CP=1 | fwd s | bwd s | step s | "
      "step vs CP=1 | compute s (all ranks) | wait s | hidden fwd | hidden bwd | "
      "result |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  for (int64_t seq : flags.seqs) {
    int64_t base_bytes = 0;
    double base_step = 0.0;
    for (int64_t cp : flags.cps) {
      const Row row = RunRow(flags, seq, cp);
      if (cp == 1) base_bytes = row.shard_bytes;
      const double step = row.fwd_s + row.bwd_s;
      if (cp == 1 && row.fits && row.error.empty()) base_step = step;
      const std::string mem_ratio =
          base_bytes > 0 ? absl::StrCat(static_cast<double>(row.shard_bytes) / base_bytes) : "-";
      if (row.fits && row.error.empty() && flags.no_compute) {
        std::printf("| %" PRId64 " | %" PRId64 " | %" PRId64
                    " | %.1f | %.1f | %s | - | - | - | "
                    "- | - | - | - | - | fits the cap (not run: --no-compute) |\n",
                    seq, cp, seq / cp, MiB(row.shard_bytes), MiB(row.state_bytes),
                    mem_ratio.c_str());
      } else if (!row.fits || !row.error.empty()) {
        std::printf("| %" PRId64 " | %" PRId64 " | %" PRId64
                    " | %.1f | %.1f | %s | - | - | - | "
                    "- | - | - | - | - | %s: %s |\n",
                    seq, cp, seq / cp, MiB(row.shard_bytes), MiB(row.state_bytes),
                    mem_ratio.c_str(), row.fits ? "FAILED" : "OUT OF MEMORY", row.error.c_str());
      } else {
        const std::string step_ratio = base_step > 0 ? absl::StrCat(step / base_step) : "-";
        std::printf("| %" PRId64 " | %" PRId64 " | %" PRId64
                    " | %.1f | %.1f | %s | %.2f | %.2f "
                    "| %.2f | %s | %.2f | %.3f | %.3f | %.3f | ok |\n",
                    seq, cp, seq / cp, MiB(row.shard_bytes), MiB(row.state_bytes),
                    mem_ratio.c_str(), row.fwd_s, row.bwd_s, step, step_ratio.c_str(),
                    row.fwd.compute_seconds + row.bwd.compute_seconds,
                    row.fwd.wait_seconds + row.bwd.wait_seconds, row.fwd.HiddenFraction(),
                    row.bwd.HiddenFraction());
      }
      std::fflush(stdout);
    }
  }
  std::printf("# process peak RSS (all ranks of every row, one process): %.0f MiB\n",
              MiB(ProcessPeakRssBytes()));
  return 0;
}

}  // namespace
}  // namespace mxmaca::bench

int main(int argc, char** argv) { return mxmaca::bench::Main(argc, argv); }
