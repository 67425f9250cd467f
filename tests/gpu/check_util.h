// tests/gpu/check_util.h: helpers of the self-contained GPU check binary: device buffers,
// fatal checks (a check tool may stop at the first broken call), random inputs, timing
// and the result table.
#ifndef MXMACA_TESTS_GPU_CHECK_UTIL_H_
#define MXMACA_TESTS_GPU_CHECK_UTIL_H_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"

// CK: a kernels/cuda call that must succeed; otherwise throws CheckError with the
// call's file:line message. Each check group catches it and records a failed row, so
// one broken kernel does not hide the others' results.
#define CK(expr)                                                                   \
  do {                                                                             \
    const ::mxmaca::kernels::cuda::CudaStatus ck_s_ = (expr);                      \
    if (!ck_s_.ok()) {                                                             \
      throw ::mxmaca::gpu_check::CheckError(std::string(__FILE__) + ":" +           \
                                            std::to_string(__LINE__) + ": " +      \
                                            ck_s_.message());                      \
    }                                                                              \
  } while (0)

// CU: a CUDA runtime call that must succeed (throws CheckError otherwise).
#define CU(expr)                                                                         \
  do {                                                                                   \
    const cudaError_t cu_e_ = (expr);                                                    \
    if (cu_e_ != cudaSuccess) {                                                          \
      throw ::mxmaca::gpu_check::CheckError(std::string(__FILE__) + ":" +                 \
                                            std::to_string(__LINE__) + ": " #expr        \
                                            " failed: " + cudaGetErrorName(cu_e_) +      \
                                            " (" + cudaGetErrorString(cu_e_) + ")");     \
    }                                                                                    \
  } while (0)

namespace mxmaca::gpu_check {

// CheckError: a failed CUDA / kernel call inside a check.
struct CheckError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Dev: a device array of n T's (freed on destruction).
template <typename T>
class Dev {
 public:
  explicit Dev(size_t n) : n_(n) { CU(cudaMalloc(&p_, (n ? n : 1) * sizeof(T))); }
  explicit Dev(const std::vector<T>& host) : Dev(host.size()) { Up(host); }
  ~Dev() { cudaFree(p_); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  void Up(const std::vector<T>& host) {
    CU(cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> Down() const {
    std::vector<T> host(n_);
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  T* get() const { return p_; }
  size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_;
};

// Random inputs (seeded, never all zeros).
inline std::vector<float> Normal(std::mt19937_64& rng, size_t n, float stddev = 1.0f,
                                 float mean = 0.0f) {
  std::normal_distribution<float> d(mean, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline std::vector<int32_t> Ints(std::mt19937_64& rng, size_t n, int32_t lo, int32_t hi) {
  std::uniform_int_distribution<int32_t> d(lo, hi);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline std::vector<double> ToDouble(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Table: one row per check; printed as a fixed-width table.
struct Table {
  struct Row {
    std::string kernel, shape, path, metric;
    double value, bound;
    bool pass;
  };
  std::vector<Row> rows;
  int failures = 0;

  // Accuracy: pass iff err <= bound (and err is not NaN).
  void Accuracy(const std::string& kernel, const std::string& shape, const std::string& path,
                double err, double bound) {
    const bool pass = err <= bound;
    if (!pass) ++failures;
    rows.push_back({kernel, shape, path, "rel.err", err, bound, pass});
    std::printf("%-34s %-26s %-10s rel.err %10.3e  bound %10.3e  %s\n", kernel.c_str(),
                shape.c_str(), path.c_str(), err, bound, pass ? "PASS" : "FAIL");
    std::fflush(stdout);
  }
  // Error: a check group stopped by a failed call (counts as a failure).
  void Error(const std::string& group, const std::string& what) {
    ++failures;
    rows.push_back({group, "-", "-", "error", 0, 0, false});
    std::printf("%-34s ERROR: %s  FAIL\n", group.c_str(), what.c_str());
    std::fflush(stdout);
  }
  // Exact: pass iff mismatches == 0.
  void Exact(const std::string& kernel, const std::string& shape, const std::string& what,
             int64_t mismatches) {
    const bool pass = mismatches == 0;
    if (!pass) ++failures;
    rows.push_back({kernel, shape, what, "mismatch", static_cast<double>(mismatches), 0, pass});
    std::printf("%-34s %-26s %-10s mismatches %7lld (must be 0)        %s\n", kernel.c_str(),
                shape.c_str(), what.c_str(), static_cast<long long>(mismatches),
                pass ? "PASS" : "FAIL");
    std::fflush(stdout);
  }
};

// ClearStaleError: drops a non-sticky error left in this thread's last-error slot by an
// earlier failed call, so that the next check's first launch check does not report it.
// (A sticky error, e.g. cudaErrorIllegalAddress, cannot be cleared: gpu_check_main.cc
// stops the run when it sees one.)
inline void ClearStaleError() { (void)cudaGetLastError(); }

// Guard: runs f; a CheckError (or any other std::exception, e.g. std::bad_alloc) becomes
// a failed row named `name` and the caller goes on.
template <typename F>
void Guard(Table* t, const std::string& name, F&& f) {
  ClearStaleError();
  try {
    f();
  } catch (const std::exception& e) {
    ClearStaleError();
    t->Error(name, e.what());
  }
}

// Timer: the median time in ms of `reps` runs of f (after `warmup`), by CUDA events on
// the default stream.
template <typename F>
double TimeMs(F&& f, int warmup = 2, int reps = 7) {
  for (int i = 0; i < warmup; ++i) f();
  CU(cudaDeviceSynchronize());
  std::vector<float> t(reps);
  cudaEvent_t a, b;
  CU(cudaEventCreate(&a));
  CU(cudaEventCreate(&b));
  for (int i = 0; i < reps; ++i) {
    CU(cudaEventRecord(a));
    f();
    CU(cudaEventRecord(b));
    CU(cudaEventSynchronize(b));
    CU(cudaEventElapsedTime(&t[i], a, b));
  }
  CU(cudaEventDestroy(a));
  CU(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[reps / 2];
}

// Checks and benchmarks (gpu_check_numerics.cc, gpu_check_perf.cc).
void RunNumericChecks(Table* table);
void RunPerf(bool quick);

}  // namespace mxmaca::gpu_check

#endif  // MXMACA_TESTS_GPU_CHECK_UTIL_H_
