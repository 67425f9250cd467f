// tests/bench/tp_layer_bench.cc: time of ONE transformer layer's F, B and W (a GptStage
// with a one-layer middle layout: no embedding, no loss head) at TP 1 and TP 2, with and
// without sequence parallelism, and the time spent inside the TP collectives.
//
// Config: hidden 1024, 16 heads, ffn 4096, seq 512, micro-batch 1, LayerNorm + GELU,
// biases, dropout 0.1 (Megatron's GPT defaults). TP ranks run as threads over an
// InProcessHub (as layers/gpt_stage_tp_test.cc does); every rank's communicator is wrapped
// in TimingCommunicator, which records the wall time from post to `done` of each call
// (the layers' TP helpers block on `done`, so this is the time a rank spends in the
// collective: the copy/reduction plus waiting for the peer).
//
// Settings on the same 2 cores: TP 1 with 2 kernel threads (the baseline), TP 1 with 1
// thread (reference), TP 2 with 1 thread per rank, with and without SP. Ratios are TP / TP1
// against both TP-1 settings, per phase and in total, with the collectives included (wall
// time) and excluded (wall time minus the rank's time inside collectives). Because the 2 cores are
// shared, it also reports each rank thread's CPU time (summed over ranks) against TP 1 on
// one thread: the work TP adds, whatever the machine's load; "collective posts" is the
// CPU the in-process hub spends copying / reducing on the last poster's thread.
// Each setting runs --rounds times (interleaved) of --iters iterations after 2 warm-ups;
// the round with the least wall time is kept.
//   bazel run -c opt //tests/bench:tp_layer_bench [-- --iters 5 --rounds 3 --seq 512
//   --dropout 0.1]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "layers/gpt_stage.h"
#include "layers/stage_memory_tp.h"
#include "layers/tensor_parallel.h"
#include "transport/communicator.h"
#include "transport/inprocess_communicator.h"
#include "transport/rank_grid.h"

namespace mxmaca::bench {
namespace {

using Clock = std::chrono::steady_clock;
using layers::GptConfig;
using layers::GptStage;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// ThreadCpuSeconds: CPU time of the calling thread (robust to other processes' load).
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

enum Phase { kF = 0, kB = 1, kW = 2, kPhases = 3 };
const char* const kPhaseName[kPhases] = {"F", "B", "W"};

// CollectiveStats: time (s), calls and bytes of one rank's collectives in one phase.
struct CollectiveStats {
  double seconds = 0;   // wall time from post to done
  double post_cpu = 0;  // CPU time of the posting thread inside the post call (the
                        // in-process hub copies / reduces on the last poster's thread)
  int64_t calls = 0, bytes = 0;
};

// TimingCommunicator: a transport::Communicator that forwards every call to `inner` and
// adds the wall time from post to `done` (and the poster's CPU time inside the post call)
// to the stats of the phase set by set_phase().
// `done` may run on another rank's thread, hence the mutex.
class TimingCommunicator : public transport::Communicator {
 public:
  explicit TimingCommunicator(transport::Communicator* inner) : inner_(inner) {}

  void set_phase(Phase p) {
    std::lock_guard<std::mutex> lock(mu_);
    phase_ = p;
  }
  // Take: the stats so far, per phase; resets them.
  std::vector<CollectiveStats> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<CollectiveStats> out(stats_, stats_ + kPhases);
    for (CollectiveStats& s : stats_) s = CollectiveStats();
    return out;
  }

  int rank() const override { return inner_->rank(); }
  transport::CollectiveInfo AllReduceSum(const transport::ProcessGroup& g, const float* send,
                                         float* recv, int64_t count,
                                         transport::DoneCallback done) override {
    return Post(
        [&](transport::DoneCallback d) {
          return inner_->AllReduceSum(g, send, recv, count, std::move(d));
        },
        std::move(done));
  }
  transport::CollectiveInfo AllGather(const transport::ProcessGroup& g, const void* send,
                                      void* recv, int64_t count, transport::DataType dtype,
                                      transport::DoneCallback done) override {
    return Post(
        [&](transport::DoneCallback d) {
          return inner_->AllGather(g, send, recv, count, dtype, std::move(d));
        },
        std::move(done));
  }
  transport::CollectiveInfo ReduceScatterSum(const transport::ProcessGroup& g, const float* send,
                                             float* recv, int64_t recv_count,
                                             transport::DoneCallback done) override {
    return Post(
        [&](transport::DoneCallback d) {
          return inner_->ReduceScatterSum(g, send, recv, recv_count, std::move(d));
        },
        std::move(done));
  }
  transport::CollectiveInfo Broadcast(const transport::ProcessGroup& g, int root, void* buffer,
                                      int64_t count, transport::DataType dtype,
                                      transport::DoneCallback done) override {
    return Post(
        [&](transport::DoneCallback d) {
          return inner_->Broadcast(g, root, buffer, count, dtype, std::move(d));
        },
        std::move(done));
  }
  transport::CollectiveInfo Send(const transport::ProcessGroup& g, int peer, const void* buffer,
                                 int64_t count, transport::DataType dtype,
                                 transport::DoneCallback done) override {
    return Post(
        [&](transport::DoneCallback d) {
          return inner_->Send(g, peer, buffer, count, dtype, std::move(d));
        },
        std::move(done));
  }
  transport::CollectiveInfo Recv(const transport::ProcessGroup& g, int peer, void* buffer,
                                 int64_t count, transport::DataType dtype,
                                 transport::DoneCallback done) override {
    return Post(
        [&](transport::DoneCallback d) {
          return inner_->Recv(g, peer, buffer, count, dtype, std::move(d));
        },
        std::move(done));
  }
  transport::CollectiveInfo AllToAllV(const transport::ProcessGroup& g, const void* send,
                                      const std::vector<int64_t>& send_counts,
                                      const std::vector<int64_t>& send_displs, void* recv,
                                      const std::vector<int64_t>& recv_counts,
                                      const std::vector<int64_t>& recv_displs,
                                      transport::DataType dtype,
                                      transport::DoneCallback done) override {
    return Post(
        [&](transport::DoneCallback d) {
          return inner_->AllToAllV(g, send, send_counts, send_displs, recv, recv_counts,
                                   recv_displs, dtype, std::move(d));
        },
        std::move(done));
  }

 private:
  // Post: calls post(wrapped done) and adds the calling thread's CPU time inside it.
  template <typename PostFn>
  transport::CollectiveInfo Post(PostFn post, transport::DoneCallback done) {
    const double cpu0 = ThreadCpuSeconds();
    Phase phase;
    {
      std::lock_guard<std::mutex> lock(mu_);
      phase = phase_;
    }
    transport::CollectiveInfo info = post(Wrap(std::move(done)));
    const double cpu = ThreadCpuSeconds() - cpu0;
    std::lock_guard<std::mutex> lock(mu_);
    stats_[phase].post_cpu += cpu;
    return info;
  }

  transport::DoneCallback Wrap(transport::DoneCallback done) {
    const Clock::time_point start = Clock::now();
    Phase phase;
    {
      std::lock_guard<std::mutex> lock(mu_);
      phase = phase_;
    }
    return [this, start, phase, done = std::move(done)](const transport::CollectiveInfo& info,
                                                        absl::Status status) {
      const double s = Seconds(start, Clock::now());
      {
        std::lock_guard<std::mutex> lock(mu_);
        stats_[phase].seconds += s;
        stats_[phase].calls += 1;
        stats_[phase].bytes += info.bytes;
      }
      done(info, std::move(status));
    };
  }

  transport::Communicator* inner_;
  std::mutex mu_;
  Phase phase_ = kF;
  CollectiveStats stats_[kPhases];
};

// RankTimes: one rank's mean seconds per phase (wall and inside collectives) and the
// collectives' calls / bytes per iteration.
struct RankTimes {
  std::string error;
  double wall[kPhases] = {0, 0, 0};
  double cpu[kPhases] = {0, 0, 0};  // the rank thread's CPU time
  CollectiveStats comm[kPhases];
  int64_t stash_bytes = 0;  // GptStage::StashBytes after F
};

// RunRank: creates the one-layer stage of `tp` (nullptr: TP 1), then warm-up + iters
// iterations of F, B, W on fresh micro-batch ids; accumulates this rank's times.
void RunRank(const GptConfig& c, const layers::TensorParallelContext* tp,
             TimingCommunicator* timing, const std::vector<float>& hidden_full,
             const std::vector<float>& dout_full, int warmup, int iters, RankTimes* out) {
  auto created = GptStage::Create(c, layers::StageLayout{0, 1, false, false}, 16, tp);
  if (!created.ok()) {
    out->error = created.status().ToString();
    return;
  }
  GptStage& st = **created;
  st.InitializeParameters();
  const int64_t b = 1, s = c.seq_length, h = c.hidden_size;
  // This rank's rows ([b, s/p, h] with SP).
  const bool sp = tp != nullptr && tp->sp();
  const int64_t sl = sp ? s / tp->size : s, first = sp ? tp->rank * sl : 0;
  std::vector<float> hidden(hidden_full.begin() + first * h,
                            hidden_full.begin() + (first + sl) * h);
  std::vector<float> dout(dout_full.begin() + first * h, dout_full.begin() + (first + sl) * h);
  std::vector<float> d_input;
  for (int it = 0; it < warmup + iters; ++it) {
    if (it == warmup && timing != nullptr) timing->Take();  // drop the warm-up's stats
    layers::MicroBatchInput in;
    in.micro_batch_id = it;
    in.iteration = it;
    in.micro_batch_size = b;
    in.seq_length = s;
    in.hidden = hidden;
    layers::StageOutput o;
    Clock::time_point t[4];
    double cpu[4];
    cpu[0] = ThreadCpuSeconds();
    t[0] = Clock::now();
    if (timing != nullptr) timing->set_phase(kF);
    absl::Status status = st.Forward(in, &o);
    t[1] = Clock::now();
    cpu[1] = ThreadCpuSeconds();
    if (status.ok() && it == 0) {
      absl::StatusOr<int64_t> bytes = st.StashBytes(it);
      if (bytes.ok()) out->stash_bytes = *bytes;
    }
    if (status.ok()) {
      if (timing != nullptr) timing->set_phase(kB);
      status = st.BackwardInput(it, dout, 1.0f, &d_input);
    }
    t[2] = Clock::now();
    cpu[2] = ThreadCpuSeconds();
    if (status.ok()) {
      if (timing != nullptr) timing->set_phase(kW);
      status = st.BackwardWeight(it);
    }
    t[3] = Clock::now();
    cpu[3] = ThreadCpuSeconds();
    if (!status.ok()) {
      out->error = status.ToString();
      return;
    }
    if (it >= warmup) {
      for (int p = 0; p < kPhases; ++p) {
        out->wall[p] += Seconds(t[p], t[p + 1]) / iters;
        out->cpu[p] += (cpu[p + 1] - cpu[p]) / iters;
      }
    }
  }
  if (timing != nullptr) {
    std::vector<CollectiveStats> comm = timing->Take();
    for (int p = 0; p < kPhases; ++p) {
      out->comm[p].seconds = comm[p].seconds / iters;
      out->comm[p].post_cpu = comm[p].post_cpu / iters;
      out->comm[p].calls = comm[p].calls / iters;
      out->comm[p].bytes = comm[p].bytes / iters;
    }
  }
}

// Result: per-phase times of a setting (max over ranks of wall; comm of that rank) and the
// rank threads' CPU time summed over ranks.
struct Result {
  std::string name;
  int threads = 1;
  double wall[kPhases] = {0, 0, 0};
  double comm[kPhases] = {0, 0, 0};
  double cpu[kPhases] = {0, 0, 0};
  double post_cpu = 0;  // CPU inside collective posts, summed over ranks and phases
  int64_t stash_bytes = 0, stash_formula = 0;  // rank 0's StashBytes; StashBytesPerMicroBatchTp
  int64_t calls[kPhases] = {0, 0, 0}, bytes[kPhases] = {0, 0, 0};
  double total() const { return wall[kF] + wall[kB] + wall[kW]; }
  double total_comm() const { return comm[kF] + comm[kB] + comm[kW]; }
  double total_cpu() const { return cpu[kF] + cpu[kB] + cpu[kW]; }
};

struct Setting {
  const char* name;
  int tp, threads;
  bool sp;
};

// RunSetting: one measurement of `set` (TP ranks on threads over a fresh hub).
absl::StatusOr<Result> RunSetting(const GptConfig& c, const Setting& set,
                                  const std::vector<float>& hidden, const std::vector<float>& dout,
                                  int warmup, int iters) {
  GptConfig cs = c;
  cs.num_threads = set.threads;
  const int p = set.tp;
  std::vector<RankTimes> ranks(p);
  if (p == 1) {
    RunRank(cs, nullptr, nullptr, hidden, dout, warmup, iters, &ranks[0]);
  } else {
    transport::InProcessHub hub(p);
    MXMACA_ASSIGN_OR_RETURN(transport::RankGrid grid, transport::RankGrid::Create(p, p, 1));
    std::vector<std::unique_ptr<TimingCommunicator>> timing;
    std::vector<layers::TensorParallelContext> ctx(p);
    for (int r = 0; r < p; ++r) {
      timing.push_back(std::make_unique<TimingCommunicator>(hub.ForRank(r)));
      MXMACA_ASSIGN_OR_RETURN(transport::RankView view, grid.ForRank(r));
      ctx[r] = layers::TensorParallelContextFor(view, timing[r].get(), set.sp);
    }
    std::vector<std::thread> threads;
    for (int r = 0; r < p; ++r) {
      threads.emplace_back([&, r] {
        RunRank(cs, &ctx[r], timing[r].get(), hidden, dout, warmup, iters, &ranks[r]);
      });
    }
    for (std::thread& th : threads) th.join();
  }
  Result res;
  res.name = set.name;
  res.threads = set.threads;
  res.stash_bytes = ranks[0].stash_bytes;
  res.stash_formula =
      layers::StashBytesPerMicroBatchTp(c, layers::StageLayout{0, 1, false, false}, 1, p, set.sp);
  for (int r = 0; r < p; ++r) {
    if (!ranks[r].error.empty()) {
      return absl::InternalError(absl::StrCat(set.name, " rank ", r, ": ", ranks[r].error));
    }
  }
  // Per phase, the slower rank (the ranks meet in every collective, so they differ
  // little); its own collective time goes with it.
  for (int ph = 0; ph < kPhases; ++ph) {
    int worst = 0;
    for (int r = 0; r < p; ++r) {
      if (ranks[r].wall[ph] > ranks[worst].wall[ph]) worst = r;
      res.cpu[ph] += ranks[r].cpu[ph];
      res.post_cpu += ranks[r].comm[ph].post_cpu;
    }
    res.wall[ph] = ranks[worst].wall[ph];
    res.comm[ph] = ranks[worst].comm[ph].seconds;
    res.calls[ph] = ranks[worst].comm[ph].calls;
    res.bytes[ph] = ranks[worst].comm[ph].bytes;
  }
  return res;
}

int Main(int argc, char** argv) {
  int iters = 5, warmup = 2, rounds = 3;
  int64_t seq = 512;
  float dropout = 0.1f;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--seq") == 0) seq = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--dropout") == 0) dropout = std::strtof(argv[i + 1], nullptr);
  }
  GptConfig c;
  c.num_layers = 1;
  c.hidden_size = 1024;
  c.ffn_hidden_size = 4096;
  c.num_attention_heads = 16;
  c.seq_length = seq;
  c.max_position_embeddings = seq;
  c.vocab_size = 50257;
  c.padded_vocab_size = 50304;
  c.hidden_dropout = dropout;
  c.attention_dropout = dropout;
  const int64_t t = seq, h = c.hidden_size;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> hidden(t * h), dout(t * h);
  for (float& x : hidden) x = normal(rng);
  for (float& x : dout) x = 1e-2f * normal(rng);

  const std::vector<Setting> settings = {
      Setting{"TP1, 2 threads", 1, 2, false}, Setting{"TP1, 1 thread", 1, 1, false},
      Setting{"TP2, 1 thread/rank", 2, 1, false}, Setting{"TP2+SP, 1 thread/rank", 2, 1, true}};
  // Rounds interleave the settings (load from other processes drifts); per setting we keep
  // the round with the least total wall time.
  std::vector<Result> results(settings.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < settings.size(); ++i) {
      absl::StatusOr<Result> r = RunSetting(c, settings[i], hidden, dout, warmup, iters);
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
        return 1;
      }
      if (round == 0 || r->total() < results[i].total()) results[i] = *r;
    }
  }

  double load[3] = {0, 0, 0};
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
    std::fclose(f);
  }
  std::printf(
      "one layer: h %lld, heads %d, ffn %lld, seq %lld, micro-batch 1, dropout %.2f; best of %d "
      "rounds of %d iterations (+%d warm-up); load average %.2f %.2f %.2f\n",
      static_cast<long long>(h), static_cast<int>(c.num_attention_heads),
      static_cast<long long>(c.ffn_hidden_size), static_cast<long long>(seq), dropout, rounds,
      iters, warmup, load[0], load[1], load[2]);
  std::printf(
      "| setting | F ms | B ms | W ms | F+B+W ms | in collectives ms (F/B/W) | "
      "calls (F/B/W) | MB moved (F/B/W) | F+B+W excl. collectives ms |\n");
  std::printf("|---|---:|---:|---:|---:|---|---|---|---:|\n");
  for (const Result& r : results) {
    std::printf(
        "| %s | %.1f | %.1f | %.1f | %.1f | %.2f (%.2f/%.2f/%.2f) | %lld/%lld/%lld | "
        "%.2f/%.2f/%.2f | %.1f |\n",
        r.name.c_str(), 1e3 * r.wall[kF], 1e3 * r.wall[kB], 1e3 * r.wall[kW], 1e3 * r.total(),
        1e3 * r.total_comm(), 1e3 * r.comm[kF], 1e3 * r.comm[kB], 1e3 * r.comm[kW],
        static_cast<long long>(r.calls[kF]), static_cast<long long>(r.calls[kB]),
        static_cast<long long>(r.calls[kW]), r.bytes[kF] / 1048576.0, r.bytes[kB] / 1048576.0,
        r.bytes[kW] / 1048576.0, 1e3 * (r.total() - r.total_comm()));
  }
  // Ratios TP / TP1 against both TP-1 settings: "excl." takes the TP setting's time inside
  // collectives off its wall time.
  for (int b : {0, 1}) {
    const Result& base = results[b];
    std::printf("\nratios against %s:\n", base.name.c_str());
    std::printf("| setting | F | B | W | F+B+W incl. collectives | F+B+W excl. collectives |\n");
    std::printf("|---|---:|---:|---:|---:|---:|\n");
    for (const Result& r : results) {
      std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", r.name.c_str(),
                  r.wall[kF] / base.wall[kF], r.wall[kB] / base.wall[kB],
                  r.wall[kW] / base.wall[kW], r.total() / base.total(),
                  (r.total() - r.total_comm()) / base.total());
    }
  }
  std::printf(
      "\nstash of one micro-batch after F, per rank (MiB): measured / StashBytesPerMicroBatchTp\n");
  for (const Result& r : results) {
    std::printf("  %-24s %8.2f / %8.2f\n", r.name.c_str(), r.stash_bytes / 1048576.0,
                r.stash_formula / 1048576.0);
  }
  // CPU time of the rank threads, summed over ranks (1-thread settings only: with 2 kernel
  // threads the OpenMP worker's time is not on the calling thread's clock). Against
  // TP1, 1 thread this is the work TP adds (collectives' copies and reductions included),
  // independent of how busy the machine is.
  const Result& one = results[1];
  std::printf("\nrank-thread CPU time, summed over ranks (against %s):\n", one.name.c_str());
  std::printf(
      "| setting | F ms | B ms | W ms | F+B+W ms | in collective posts ms | ratio incl. | "
      "ratio excl. collective posts |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Result& r : results) {
    if (r.threads != 1) continue;
    std::printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f |\n", r.name.c_str(),
                1e3 * r.cpu[kF], 1e3 * r.cpu[kB], 1e3 * r.cpu[kW], 1e3 * r.total_cpu(),
                1e3 * r.post_cpu, r.total_cpu() / one.total_cpu(),
                (r.total_cpu() - r.post_cpu) / one.total_cpu());
  }
  return 0;
}

}  // namespace
}  // namespace mxmaca::bench

int main(int argc, char** argv) { return mxmaca::bench::Main(argc, argv); }
