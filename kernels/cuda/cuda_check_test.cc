// kernels/cuda/cuda_check_test.cc: the error statuses of the checking macros and the
// argument validation that happens before any CUDA call (runs without a GPU).
#include "kernels/cuda/cuda_check.h"

#include <catch2/catch.hpp>

#include <string>

#include "kernels/cuda/adamw.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/norm.h"

namespace mxmaca::kernels::cuda {
namespace {

CudaStatus FailingCudaCall() {
  MXMACA_CUDA_CHECK(cudaErrorInvalidValue);
  return CudaStatus();
}

CudaStatus FailingCublasCall() {
  MXMACA_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED);
  return CudaStatus();
}

TEST_CASE("CUDA and cuBLAS errors name file, line, call and vendor error") {
  const CudaStatus s = FailingCudaCall();
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("kernels/cuda/cuda_check_test.cc:") != std::string::npos);
  CHECK(s.message().find("cudaErrorInvalidValue") != std::string::npos);
  const CudaStatus b = FailingCublasCall();
  REQUIRE_FALSE(b.ok());
  CHECK(b.message().find("cuda_check_test.cc:") != std::string::npos);
  CHECK(b.message().find("CUBLAS_STATUS_NOT_SUPPORTED") != std::string::npos);
  CHECK(CudaStatus().ok());
}

TEST_CASE("ProbeDevice gives the skip reason when there is no GPU") {
  const CudaStatus s = ProbeDevice();
  if (!s.ok()) {
    // The message tests print when they skip.
    CHECK(s.message().rfind("no GPU: cudaGetDeviceCount ", 0) == 0);
  }
}

TEST_CASE("bad arguments are refused before any CUDA call") {
  ExecContext ctx;
  float* p = nullptr;
  const CudaStatus a = Add(ctx, p, p, p, -1);
  REQUIRE_FALSE(a.ok());
  CHECK(a.message().find("invalid argument") != std::string::npos);
  CHECK_FALSE(DropoutForward(ctx, p, p, 10, 1.0f, RngKey{}, 0).ok());
  CHECK_FALSE(LayerNormForward(ctx, p, p, p, 1e-5f, -3, 8, p, p, p).ok());
  CHECK_FALSE(CrossEntropyForward(ctx, p, nullptr, 4, 10, 11, p, p).ok());  // v > vp
  const CudaStatus w = AdamWStep(ctx, p, p, p, p, 10, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 0);
  REQUIRE_FALSE(w.ok());
  CHECK(w.message().find("step must be >= 1") != std::string::npos);
  // Empty work is fine and enqueues nothing.
  CHECK(Scale(ctx, p, 0, 2.0f).ok());
}

}  // namespace
}  // namespace mxmaca::kernels::cuda
