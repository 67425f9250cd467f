// layers/device/cuda_graph_runner.cc: see cuda_graph_runner.h (CUDA build).
#include "layers/device/cuda_graph_runner.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/graph_cache.h"
#include "kernels/cuda/status_adapter.h"
#include "layers/device/cuda_device_kernels.h"

namespace mxmaca::layers::device {
namespace {

class CudaGraphsImpl : public CudaGraphs {
 public:
  explicit CudaGraphsImpl(const kernels::CudaGraphConfig& config)
      : cache(config.mode, config.warmup_steps) {}
  std::string Report() const override { return cache.state().Report(); }
  int Invalidate() override { return cache.Invalidate(); }
  std::string Summary() const override {
    const kernels::cuda::SegmentStats t = cache.state().Totals();
    std::string s =
        absl::StrCat(cache.state().num_captured(), " graphs live, ", t.launches, " launches, ",
                     t.eager_runs, " eager runs, ", t.capture_failures, " failed captures");
    const std::string report = cache.state().Report();
    const size_t at = report.find("eager-only: ");
    if (at != std::string::npos) {
      const size_t end = report.find('\n', at);
      absl::StrAppend(&s, " (first: ",
                      report.substr(at, end == std::string::npos ? std::string::npos : end - at),
                      ")");
    }
    return s;
  }
  kernels::cuda::CudaGraphCache cache;
};

}  // namespace

absl::StatusOr<std::shared_ptr<CudaGraphs>> MakeCudaGraphs(const kernels::CudaGraphConfig& config) {
  return std::shared_ptr<CudaGraphs>(std::make_shared<CudaGraphsImpl>(config));
}

absl::StatusOr<SegmentRunner> MakeCudaGraphRunner(std::shared_ptr<CudaGraphs> graphs,
                                                  DeviceKernels* kernels, int chunk) {
  auto* cuda = dynamic_cast<CudaDeviceKernels*>(kernels);
  auto* impl = dynamic_cast<CudaGraphsImpl*>(graphs.get());
  if (cuda == nullptr || impl == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA graphs need the cuda backend (got ",
                                                   kernels ? kernels->name() : "none", ")"));
  }
  cudaStream_t stream = cuda->stream();
  return SegmentRunner([graphs, impl, stream, chunk](const SegmentInfo& info,
                                                     const Segment& segment) -> absl::Status {
    kernels::cuda::SegmentKey key;
    key.op = info.op;
    key.chunk = chunk;
    key.micro_batch = info.b;
    key.seq = info.s;
    key.extra = {info.slot, info.doc_start ? 1 : 0};
    absl::Status inner = absl::OkStatus();
    kernels::cuda::CudaStatus s =
        impl->cache.Run(key, stream, [&](cudaStream_t) -> kernels::cuda::CudaStatus {
          inner = segment();
          return inner.ok() ? kernels::cuda::CudaStatus()
                            : kernels::cuda::CudaStatus::Error(std::string(inner.message()));
        });
    if (!inner.ok()) return inner;  // the segment's own error, with its code
    return kernels::cuda::ToAbslStatus(s);
  });
}

}  // namespace mxmaca::layers::device
