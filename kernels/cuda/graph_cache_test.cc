// Tests for kernels/cuda/graph_cache.h. The capture-failure fallback on a stream that
// cannot be captured runs everywhere (no device, or the legacy default stream); replay
// bits, recapture on a shape change and the sync-inside-capture fallback need a GPU
// (skip with the reason otherwise).
#include "kernels/cuda/graph_cache.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cuda/device_arena.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/stream_set.h"
#include "kernels/cuda/test_util.h"

namespace mxmaca::kernels::cuda {
namespace {

using testing::Normal;

SegmentKey Key(int64_t s) { return SegmentKey{"F", 0, 1, s, {}}; }

TEST_CASE("a stream that cannot be captured falls back to eager, reason recorded",
          "[graph_cache]") {
  // The legacy default stream (nullptr) cannot be captured; without a device
  // cudaStreamBeginCapture fails first. Either way: eager-only, never stuck.
  CudaGraphCache cache(CudaGraphMode::kLocal, 1);
  int calls = 0;
  const SegmentFn fn = [&calls](cudaStream_t) {
    ++calls;
    return CudaStatus();
  };
  for (int i = 0; i < 4; ++i) REQUIRE_OK(cache.Run(Key(8), nullptr, fn));
  const SegmentStats* s = cache.Stats(Key(8));
  REQUIRE(s != nullptr);
  CHECK(calls == 4);
  CHECK(s->eager_runs == 4);
  CHECK(s->captures == 0);
  CHECK(s->launches == 0);
  CHECK(s->capture_failures == 1);
  CHECK(s->eager_only);
  CHECK(s->eager_only_reason.find("cudaStreamBeginCapture") != std::string::npos);
  // With a device the failed BeginCapture's code was cleared; without a driver every call
  // keeps returning cudaErrorInsufficientDriver.
  if (ProbeDevice().ok()) CHECK(cudaPeekAtLastError() == cudaSuccess);
}

TEST_CASE("mode none never captures", "[graph_cache]") {
  CudaGraphCache cache(CudaGraphMode::kNone, 0);
  int calls = 0;
  for (int i = 0; i < 3; ++i) {
    REQUIRE_OK(cache.Run(Key(8), nullptr, [&calls](cudaStream_t) {
      ++calls;
      return CudaStatus();
    }));
  }
  CHECK(calls == 3);
  CHECK(cache.Stats(Key(8))->capture_failures == 0);
  CHECK(cache.state().Totals().captures == 0);
}

// Fixture: a stream set and arena buffers x, y of n floats, twice (eager and graph copies).
struct Buffers {
  std::unique_ptr<StreamSet> streams;
  std::unique_ptr<DeviceArena> arena;
  float *xe = nullptr, *xg = nullptr, *y = nullptr;
  int64_t n = 0;

  void Init(int64_t count, uint64_t seed) {
    n = count;
    REQUIRE_OK(StreamSet::Create(0, &streams));
    REQUIRE_OK(DeviceArena::Create(3 * n * 4 + 4096, &arena));
    REQUIRE_OK(arena->CarveArray(n, "x eager", &xe));
    REQUIRE_OK(arena->CarveArray(n, "x graph", &xg));
    REQUIRE_OK(arena->CarveArray(n, "y", &y));
    const std::vector<float> x0 = Normal(seed, n), y0 = Normal(seed + 1, n, 0.1f);
    REQUIRE(cudaMemcpy(xe, x0.data(), n * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(xg, x0.data(), n * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(y, y0.data(), n * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  }
  std::vector<float> Host(const float* p, int64_t count) const {
    std::vector<float> h(static_cast<size_t>(count));
    REQUIRE_OK(streams->Synchronize());
    REQUIRE(cudaMemcpy(h.data(), p, count * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    return h;
  }
};

// Segment: 10 x (x *= 1 + k/1000; x += y) over the first m elements, 20 kernels.
CudaStatus Segment(cudaStream_t stream, float* x, const float* y, int64_t m) {
  ExecContext ctx;
  ctx.stream = stream;
  for (int k = 0; k < 10; ++k) {
    MXMACA_RETURN_IF_CUDA_ERROR(Scale(ctx, x, m, 1.0f + k / 1000.0f));
    MXMACA_RETURN_IF_CUDA_ERROR(Add(ctx, x, y, x, m));
  }
  return CudaStatus();
}

TEST_CASE("a captured segment replays to the eager bits; a new shape is a new capture",
          "[graph_cache]") {
  if (!testing::GpuOrSkip()) return;
  Buffers b;
  b.Init(33 * 4096 + 17, 42);
  CudaGraphCache cache(CudaGraphMode::kLocal, 1);
  const cudaStream_t stream = b.streams->compute();
  int calls = 0;
  for (int64_t m : {b.n, b.n / 2}) {  // the full shape, then a smaller one
    for (int run = 0; run < 4; ++run) {
      REQUIRE_OK(Segment(stream, b.xe, b.y, m));
      REQUIRE_OK(cache.Run(Key(m), stream, [&](cudaStream_t s) {
        ++calls;
        return Segment(s, b.xg, b.y, m);
      }));
      // Same kernels, same order, same inputs: identical bits expected.
      REQUIRE(b.Host(b.xg, b.n) == b.Host(b.xe, b.n));
    }
    const SegmentStats* s = cache.Stats(Key(m));
    CHECK(s->eager_runs == 1);
    CHECK(s->captures == 1);
    CHECK(s->launches == 3);
  }
  // fn ran once eagerly and once under capture per shape; the other runs were replays.
  CHECK(calls == 4);
  CHECK(cache.state().num_captured() == 2);
  // Invalidate: warm-up and capture again, same bits.
  CHECK(cache.Invalidate() == 2);
  for (int run = 0; run < 3; ++run) {
    REQUIRE_OK(Segment(stream, b.xe, b.y, b.n));
    REQUIRE_OK(cache.Run(Key(b.n), stream, [&](cudaStream_t s) {
      ++calls;
      return Segment(s, b.xg, b.y, b.n);
    }));
  }
  CHECK(b.Host(b.xg, b.n) == b.Host(b.xe, b.n));
  CHECK(calls == 6);
  CHECK(cache.Stats(Key(b.n))->captures == 2);
  CHECK(cache.Stats(Key(b.n))->invalidations == 1);
}

TEST_CASE("a sync inside capture ends the capture and falls back to eager",
          "[graph_cache]") {
  if (!testing::GpuOrSkip()) return;
  Buffers b;
  b.Init(4096, 7);
  const cudaStream_t stream = b.streams->compute();
  for (const bool propagate : {true, false}) {
    // propagate: fn returns the failed sync's error; otherwise it ignores it and only
    // cudaStreamEndCapture reports the invalidated capture.
    CudaGraphCache cache(CudaGraphMode::kLocal, 1);
    for (int run = 0; run < 3; ++run) {
      REQUIRE_OK(Segment(stream, b.xe, b.y, b.n));
      REQUIRE_OK(cache.Run(Key(b.n), stream, [&](cudaStream_t s) -> CudaStatus {
        MXMACA_RETURN_IF_CUDA_ERROR(Segment(s, b.xg, b.y, b.n));
        const cudaError_t e = cudaStreamSynchronize(s);
        if (propagate && e != cudaSuccess) {
          return CudaErrorAt(e, "cudaStreamSynchronize(s)", __FILE__, __LINE__);
        }
        return CudaStatus();
      }));
      cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusActive;
      REQUIRE(cudaStreamIsCapturing(stream, &capturing) == cudaSuccess);
      CHECK(capturing == cudaStreamCaptureStatusNone);
      CHECK(cudaPeekAtLastError() == cudaSuccess);
      REQUIRE(b.Host(b.xg, b.n) == b.Host(b.xe, b.n));
    }
    const SegmentStats* s = cache.Stats(Key(b.n));
    INFO(s->eager_only_reason);
    CHECK(s->eager_only);
    CHECK(s->capture_failures == 1);
    CHECK(s->eager_runs == 3);
    CHECK(s->launches == 0);
    CHECK(s->eager_only_reason.find(propagate ? "cudaStreamSynchronize" : "cudaStreamEndCapture") !=
          std::string::npos);
  }
}

TEST_CASE("a segment that forks to the comm stream and joins back is captured",
          "[graph_cache]") {
  if (!testing::GpuOrSkip()) return;
  Buffers b;
  b.Init(8192 + 5, 99);
  float* z = nullptr;
  std::unique_ptr<DeviceArena> extra;
  REQUIRE_OK(DeviceArena::Create(b.n * 4, &extra));
  REQUIRE_OK(extra->CarveArray(b.n, "z", &z));
  StreamSet& ss = *b.streams;
  // compute: x *= 1.5; comm (after compute): z = x; compute (after comm): x = z + y.
  auto step = [&](float* x) -> CudaStatus {
    ExecContext ctx = ss.compute_ctx();
    MXMACA_RETURN_IF_CUDA_ERROR(Scale(ctx, x, b.n, 1.5f));
    MXMACA_RETURN_IF_CUDA_ERROR(ss.ComputeToComm());
    MXMACA_CUDA_CHECK(
        cudaMemcpyAsync(z, x, b.n * 4, cudaMemcpyDeviceToDevice, ss.comm()));
    MXMACA_RETURN_IF_CUDA_ERROR(ss.CommToCompute());
    return Add(ctx, z, b.y, x, b.n);
  };
  CudaGraphCache cache(CudaGraphMode::kLocal, 1);
  for (int run = 0; run < 3; ++run) {
    REQUIRE_OK(step(b.xe));
    REQUIRE_OK(cache.Run(Key(b.n), ss.compute(), [&](cudaStream_t) { return step(b.xg); }));
    REQUIRE(b.Host(b.xg, b.n) == b.Host(b.xe, b.n));
  }
  INFO(cache.state().Report());
  CHECK(cache.Stats(Key(b.n))->captures == 1);
  CHECK(cache.Stats(Key(b.n))->launches == 2);
}

}  // namespace
}  // namespace mxmaca::kernels::cuda
