// Tests for kernels/cuda/stream_set.h. Priority choice and the no-device error run
// everywhere; stream ordering needs a GPU (skips with the reason otherwise).
#include "kernels/cuda/stream_set.h"

#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/test_util.h"

namespace mxmaca::kernels::cuda {
namespace {

using testing::DeviceVector;
using testing::Normal;

TEST_CASE("comm gets the greatest priority, compute the least", "[stream_set]") {
  // Hopper's cudaDeviceGetStreamPriorityRange reports (least 0, greatest -5).
  const StreamPriorities p = ChooseStreamPriorities(0, -5);
  CHECK(p.compute == 0);
  CHECK(p.comm == -5);
}

TEST_CASE("without a device Create fails with the CUDA call and its place", "[stream_set]") {
  if (ProbeDevice().ok()) {
    std::unique_ptr<StreamSet> set;
    const CudaStatus bad = StreamSet::Create(-1, &set);
    CHECK_FALSE(bad.ok());
    CHECK(bad.message().find("device index -1") != std::string::npos);
    CHECK(set == nullptr);
    return;
  }
  std::unique_ptr<StreamSet> set;
  const CudaStatus s = StreamSet::Create(0, &set);
  INFO(s.message());
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("stream_set.cc:") != std::string::npos);
  CHECK(s.message().find("cudaSetDevice") != std::string::npos);
  CHECK(set == nullptr);
}

TEST_CASE("ComputeToComm and CommToCompute order the two streams", "[stream_set]") {
  if (!testing::GpuOrSkip()) return;
  std::unique_ptr<StreamSet> set;
  REQUIRE_OK(StreamSet::Create(0, &set));
  REQUIRE(set->compute() != nullptr);
  REQUIRE(set->comm() != nullptr);
  REQUIRE(set->compute() != set->comm());
  CHECK(set->priorities().comm <= set->priorities().compute);
  const ExecContext bf16 = set->compute_ctx(Precision::kBf16);
  CHECK(bf16.stream == set->compute());
  CHECK(bf16.precision == Precision::kBf16);
  CHECK(set->comm_ctx().stream == set->comm());

  // compute: 64 scalings of a 64 MiB buffer (long enough that an unordered copy on the
  // comm stream would see a partial result); comm: copy it once ComputeToComm allows.
  const int64_t n = 16 << 20;
  const std::vector<float> x0 = Normal(3, n);
  DeviceVector<float> x(x0), copy(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  const ExecContext ctx = set->compute_ctx();
  for (int i = 0; i < 64; ++i) REQUIRE_OK(Scale(ctx, x.get(), n, i % 2 == 0 ? 2.0f : 0.5f));
  REQUIRE_OK(Scale(ctx, x.get(), n, 3.0f));
  REQUIRE_OK(set->ComputeToComm());
  REQUIRE(cudaMemcpyAsync(copy.get(), x.get(), n * sizeof(float), cudaMemcpyDeviceToDevice,
                          set->comm()) == cudaSuccess);
  // compute: y = copy + copy, after the comm stream's copy.
  REQUIRE_OK(set->CommToCompute());
  REQUIRE_OK(Add(ctx, copy.get(), copy.get(), y.get(), n));
  REQUIRE_OK(set->Synchronize());
  // Powers of two and one multiplication by 3: exact in fp32 (no overflow at |x| < 10).
  std::vector<float> want(x0.size());
  for (size_t i = 0; i < x0.size(); ++i) want[i] = (x0[i] * 3.0f) * 2.0f;
  CHECK(y.Host() == want);
}

}  // namespace
}  // namespace mxmaca::kernels::cuda
