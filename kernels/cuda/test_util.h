// kernels/cuda/test_util.h: helpers of the kernels/cuda Catch2 tests (testonly).
//
// Tests compare each CUDA kernel with its kernels/cpu twin on seeded random inputs. On a
// machine without a GPU every GPU-needing TEST_CASE returns early through GpuOrSkip(),
// which prints the reason ("SKIPPED: no GPU: cudaGetDeviceCount returned
// cudaErrorInsufficientDriver") so a passing run says it checked nothing.
#ifndef MXMACA_KERNELS_CUDA_TEST_UTIL_H_
#define MXMACA_KERNELS_CUDA_TEST_UTIL_H_

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace mxmaca::kernels::cuda::testing {

// GpuOrSkip: true when a device is usable; else prints the skip reason and returns false.
inline bool GpuOrSkip() {
  const CudaStatus s = ProbeDevice();
  if (s.ok()) return true;
  std::printf("SKIPPED (%s): %s\n", Catch::getResultCapture().getCurrentTestName().c_str(),
              s.message().c_str());
  WARN("SKIPPED: " << s.message());
  return false;
}

// DeviceVector: a device copy of a host vector; Host() copies back (synchronising).
template <typename T>
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<T>& host) : n_(host.size()) {
    REQUIRE(cudaMalloc(&p_, (n_ ? n_ : 1) * sizeof(T)) == cudaSuccess);
    REQUIRE(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  explicit DeviceVector(size_t n) : DeviceVector(std::vector<T>(n)) {}
  ~DeviceVector() { cudaFree(p_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  T* get() const { return p_; }
  std::vector<T> Host() const {
    std::vector<T> h(n_);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    REQUIRE(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return h;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

inline std::vector<float> Normal(uint64_t seed, size_t n, float stddev = 1.0f, float mean = 0.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(mean, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// RelErr: ||got - want||_2 / ||want||_2.
inline double RelErr(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// REQUIRE_OK: a CudaStatus that must be ok (the message shows on failure).
#define REQUIRE_OK(expr)                        \
  do {                                          \
    const auto req_ok_s_ = (expr);              \
    INFO(req_ok_s_.message());                  \
    REQUIRE(req_ok_s_.ok());                    \
  } while (0)

}  // namespace mxmaca::kernels::cuda::testing

#endif  // MXMACA_KERNELS_CUDA_TEST_UTIL_H_
