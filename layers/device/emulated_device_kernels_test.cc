// layers/device/emulated_device_kernels_test.cc: the emulated device's rules hold (a host
// read of device memory faults, a host pointer handed to a kernel is refused, copies are
// counted) and its kernels give CpuDeviceKernels' bits.
#include "layers/device/emulated_device_kernels.h"

#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <vector>

#include "layers/device/cpu_device_kernels.h"

namespace mxmaca::layers::device {
namespace {

std::vector<float> Fresh(int64_t n) {
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// ChildSignal: runs f in a forked child; returns the signal that ended it (0 = exited).
template <typename F>
int ChildSignal(F f) {
  const pid_t pid = fork();
  if (pid == 0) {
    f();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

TEST_CASE("a host read or write of emulated device memory faults; the interface's copies work") {
  EmulatedDeviceKernels dev(kernels::ExecContext{});
  absl::StatusOr<void*> p = dev.Allocate(1000);
  REQUIRE(p.ok());
  float* d = static_cast<float*>(*p);
  const std::vector<float> host = Fresh(250);
  REQUIRE(dev.CopyToDevice(d, host.data(), 1000).ok());
  std::vector<float> back(250);
  REQUIRE(dev.CopyToHost(back.data(), d, 1000).ok());
  REQUIRE(std::memcmp(back.data(), host.data(), 1000) == 0);

  volatile float* vd = d;
  CHECK(ChildSignal([&] { (void)vd[3]; }) == SIGSEGV);   // host read
  CHECK(ChildSignal([&] { vd[3] = 1.0f; }) == SIGSEGV);  // host write
  // Control: the same child reading host memory exits normally.
  volatile const float* vh = host.data();
  CHECK(ChildSignal([&] { (void)vh[3]; }) == 0);
  dev.Free(d);
}

TEST_CASE("emulated device kernels refuse host pointers and wrong-way copies, naming them") {
  EmulatedDeviceKernels dev(kernels::ExecContext{});
  absl::StatusOr<void*> p = dev.Allocate(64 * sizeof(float));
  REQUIRE(p.ok());
  float* d = static_cast<float*>(*p);
  std::vector<float> host(64, 1.0f);
  const absl::Status s = dev.GeluForward(host.data(), d, 64);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(s.message()).find("GeluForward: argument x") != std::string::npos);
  CHECK(dev.CopyToHost(host.data(), host.data(), 16).code() ==
        absl::StatusCode::kInvalidArgument);  // src is host memory
  CHECK(dev.CopyToDevice(d, d, 16).code() ==
        absl::StatusCode::kInvalidArgument);  // host_src is device memory
  // One past the allocation's last page is not its memory.
  CHECK(dev.Zero(d, 8192).code() == absl::StatusCode::kInvalidArgument);
  // Another instance's memory is not this one's.
  EmulatedDeviceKernels other(kernels::ExecContext{});
  CHECK(other.Scale(d, 64, 2.0f).code() == absl::StatusCode::kInvalidArgument);
  dev.Free(d);
  // Freed memory is no longer device memory.
  CHECK(dev.Scale(d, 64, 2.0f).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("emulated device kernels give CpuDeviceKernels' bits and count every copy") {
  const int64_t m = 37, n = 29, k = 53;
  const std::vector<float> a = Fresh(m * k), b = Fresh(k * n);
  CpuDeviceKernels cpu(kernels::ExecContext{});
  std::vector<float> c_cpu(m * n), g_cpu(m * n);
  REQUIRE(cpu.Gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c_cpu.data(), n)
              .ok());
  REQUIRE(cpu.GeluForward(c_cpu.data(), g_cpu.data(), m * n).ok());

  EmulatedDeviceKernels dev(kernels::ExecContext{});
  auto alloc = [&](int64_t count) { return static_cast<float*>(*dev.Allocate(count * 4)); };
  float *da = alloc(m * k), *db = alloc(k * n), *dc = alloc(m * n), *dg = alloc(m * n);
  REQUIRE(dev.CopyToDevice(da, a.data(), m * k * 4).ok());
  REQUIRE(dev.CopyToDevice(db, b.data(), k * n * 4).ok());
  REQUIRE(dev.Gemm(false, false, m, n, k, 1.0f, da, k, db, n, 0.0f, dc, n).ok());
  REQUIRE(dev.GeluForward(dc, dg, m * n).ok());
  REQUIRE(dev.CopyDeviceToDevice(dc, dg, m * n * 4).ok());
  std::vector<float> g(m * n);
  REQUIRE(dev.CopyToHost(g.data(), dc, m * n * 4).ok());
  CHECK(std::memcmp(g.data(), g_cpu.data(), g.size() * 4) == 0);

  const TransferCounts t = dev.transfers();
  CHECK(t.host_to_device_bytes == (m * k + k * n) * 4);
  CHECK(t.host_to_device_calls == 2);
  CHECK(t.device_to_host_bytes == m * n * 4);
  CHECK(t.device_to_host_calls == 1);
  CHECK(t.device_to_device_bytes == m * n * 4);
  dev.ResetTransfers();
  CHECK(dev.transfers().host_to_device_bytes == 0);
}

}  // namespace
}  // namespace mxmaca::layers::device
