// tests/gpu/gpu_check_graphs.cc: CudaGraphCache on a GPU: replay bits against eager, the
// capture-failure fallback, recapture on a shape change, and the launch cost of a
// segment of 50 small kernels eager vs replayed.
#include "tests/gpu/gpu_check_graphs.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/device_arena.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/graph_cache.h"
#include "kernels/cuda/stream_set.h"

namespace mxmaca::gpu_check {
namespace {

namespace kc = ::mxmaca::kernels::cuda;
using kernels::CudaGraphMode;
using kernels::ExecContext;

constexpr int kPairs = 25;  // 25 x (Scale, Add) = 50 kernels per segment

// Segment: the 50-kernel segment over x[0, m): x = (x * (1 + k/1000)) + y, k < 25.
kc::CudaStatus Segment(cudaStream_t stream, float* x, const float* y, int64_t m) {
  ExecContext ctx;
  ctx.stream = stream;
  for (int k = 0; k < kPairs; ++k) {
    MXMACA_RETURN_IF_CUDA_ERROR(kc::Scale(ctx, x, m, 1.0f + k / 1000.0f));
    MXMACA_RETURN_IF_CUDA_ERROR(kc::Add(ctx, x, y, x, m));
  }
  return kc::CudaStatus();
}

int64_t Mismatches(const float* a, const float* b, int64_t n) {
  std::vector<float> ha(static_cast<size_t>(n)), hb(static_cast<size_t>(n));
  CU(cudaDeviceSynchronize());
  CU(cudaMemcpy(ha.data(), a, n * sizeof(float), cudaMemcpyDeviceToHost));
  CU(cudaMemcpy(hb.data(), b, n * sizeof(float), cudaMemcpyDeviceToHost));
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += std::memcmp(&ha[i], &hb[i], sizeof(float)) != 0;
  return bad;
}

// Buffers: x (eager copy), x (graph copy), y, n floats each, carved from one arena.
struct Buffers {
  float *xe = nullptr, *xg = nullptr, *y = nullptr;
};

Buffers Carve(kc::DeviceArena& arena, int64_t n, std::mt19937_64& rng) {
  Buffers b;
  CK(arena.CarveArray(n, "x eager", &b.xe));
  CK(arena.CarveArray(n, "x graph", &b.xg));
  CK(arena.CarveArray(n, "y", &b.y));
  const std::vector<float> x0 = Normal(rng, n), y0 = Normal(rng, n, 0.1f);
  CU(cudaMemcpy(b.xe, x0.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CU(cudaMemcpy(b.xg, x0.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CU(cudaMemcpy(b.y, y0.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  return b;
}

kc::SegmentKey Key(int64_t n) { return kc::SegmentKey{"F", 0, 1, n, {}}; }

void CheckReplay(Table* t, kc::StreamSet& streams, kc::DeviceArena& arena,
                 std::mt19937_64& rng) {
  const int64_t n = 1 << 20;
  const Buffers b = Carve(arena, n, rng);
  const cudaStream_t s = streams.compute();
  kc::CudaGraphCache cache(CudaGraphMode::kLocal, 1);
  int calls = 0;
  // Full shape 6 runs, half shape 3 runs (a new key: warm-up, capture, replay).
  for (int64_t m : {n, n / 2}) {
    for (int run = 0; run < (m == n ? 6 : 3); ++run) {
      CK(Segment(s, b.xe, b.y, m));
      CK(cache.Run(Key(m), s, [&](cudaStream_t cs) {
        ++calls;
        return Segment(cs, b.xg, b.y, m);
      }));
    }
  }
  const kc::SegmentStats* full = cache.Stats(Key(n));
  const kc::SegmentStats* half = cache.Stats(Key(n / 2));
  t->Exact("CudaGraphCache replay == eager", "50 kernels, n=2^20", "bits",
           Mismatches(b.xg, b.xe, n));
  // Counts: each shape one eager warm-up, one capture; fn called twice per shape.
  const int64_t wrong_counts = (full->eager_runs != 1) + (full->captures != 1) +
                               (full->launches != 5) + (half->captures != 1) +
                               (half->launches != 2) + (calls != 4);
  t->Exact("CudaGraphCache new shape = new capture", "n=2^20 then 2^19", "counts", wrong_counts);
}

void CheckFallback(Table* t, kc::StreamSet& streams, kc::DeviceArena& arena,
                   std::mt19937_64& rng) {
  const int64_t n = 4096;
  const Buffers b = Carve(arena, n, rng);
  const cudaStream_t s = streams.compute();
  kc::CudaGraphCache cache(CudaGraphMode::kLocal, 1);
  for (int run = 0; run < 3; ++run) {
    CK(Segment(s, b.xe, b.y, n));
    CK(cache.Run(Key(n), s, [&](cudaStream_t cs) -> kc::CudaStatus {
      MXMACA_RETURN_IF_CUDA_ERROR(Segment(cs, b.xg, b.y, n));
      MXMACA_CUDA_CHECK(cudaStreamSynchronize(cs));  // illegal while capturing
      return kc::CudaStatus();
    }));
  }
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusActive;
  CU(cudaStreamIsCapturing(s, &capturing));
  const kc::SegmentStats* st = cache.Stats(Key(n));
  const int64_t wrong = Mismatches(b.xg, b.xe, n) + !st->eager_only +
                        (st->capture_failures != 1) + (st->launches != 0) +
                        (capturing != cudaStreamCaptureStatusNone) +
                        (cudaPeekAtLastError() != cudaSuccess);
  if (st->eager_only) std::printf("  (fallback reason: %s)\n", st->eager_only_reason.c_str());
  t->Exact("CudaGraphCache sync-in-capture -> eager", "n=4096", "bits+state", wrong);
}

// Launch cost: R segments of 50 kernels on 1024 floats (each kernel ~2 us on the GPU).
void MeasureLaunchCost(kc::StreamSet& streams, kc::DeviceArena& arena, std::mt19937_64& rng) {
  const int64_t n = 1024;
  const int reps = 200;
  const Buffers b = Carve(arena, n, rng);
  const cudaStream_t s = streams.compute();
  kc::CudaGraphCache cache(CudaGraphMode::kLocal, 1);
  auto graph_run = [&] {
    CK(cache.Run(Key(n), s, [&](cudaStream_t cs) { return Segment(cs, b.xg, b.y, n); }));
  };
  auto eager_run = [&] { CK(Segment(s, b.xe, b.y, n)); };
  for (int i = 0; i < 3; ++i) {  // warm-up: capture happens here
    eager_run();
    graph_run();
  }
  CU(cudaStreamSynchronize(s));
  using Clock = std::chrono::steady_clock;
  auto measure = [&](auto&& run, double* issue_us, double* wall_us) {
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) run();
    const auto t1 = Clock::now();
    CU(cudaStreamSynchronize(s));
    const auto t2 = Clock::now();
    *issue_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / reps;
    *wall_us = std::chrono::duration<double, std::micro>(t2 - t0).count() / reps;
  };
  double e_issue = 0, e_wall = 0, g_issue = 0, g_wall = 0;
  measure(eager_run, &e_issue, &e_wall);
  measure(graph_run, &g_issue, &g_wall);
  std::printf("%-34s %-26s eager %8.1f us  graph %8.1f us  (%.1fx)  host issue time per segment\n",
              "CudaGraphCache launch cost", "50 kernels, n=1024", e_issue, g_issue,
              g_issue > 0 ? e_issue / g_issue : 0.0);
  std::printf("%-34s %-26s eager %8.1f us  graph %8.1f us  (%.1fx)  wall time per segment\n",
              "", "", e_wall, g_wall, g_wall > 0 ? e_wall / g_wall : 0.0);
  std::fflush(stdout);
}

}  // namespace

void RunGraphChecks(Table* table) {
  std::mt19937_64 rng(8);
  std::unique_ptr<kc::StreamSet> streams;
  std::unique_ptr<kc::DeviceArena> arena;
  try {
    CK(kc::StreamSet::Create(0, &streams));
    CK(kc::DeviceArena::Create(64 << 20, &arena));
  } catch (const CheckError& e) {
    table->Error("StreamSet/DeviceArena", e.what());
    return;
  }
  Guard(table, "graph cache replay", [&] { CheckReplay(table, *streams, *arena, rng); });
  Guard(table, "graph cache fallback", [&] { CheckFallback(table, *streams, *arena, rng); });
  Guard(table, "graph launch cost", [&] { MeasureLaunchCost(*streams, *arena, rng); });
  cudaDeviceSynchronize();
}

}  // namespace mxmaca::gpu_check
