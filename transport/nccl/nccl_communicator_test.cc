// transport/nccl/nccl_communicator_test.cc (CUDA build): NcclCommunicator.
//
// Without a GPU (this machine, CI): the checking macros' messages and dtype mapping, and
// Create's "no GPU: cudaGetDeviceCount returned ..." error; the GPU cases print
// "SKIPPED (...): no GPU: ..." and pass having checked nothing. With a GPU: a 1-rank
// communicator (NCCL cannot put two ranks of one communicator on one GPU), every operation
// a 1-rank group supports, on fresh random inputs checked against the host values (one
// rank's sum is its input: exact), ordering after the compute stream, batches, refusals and
// the timeout path. Multi-rank numerics (NCCL's ring/tree summation order) need a machine
// with two or more GPUs and one process per GPU: not tested here nor on the single-GPU
// check machine.
#include "transport/nccl/nccl_communicator.h"

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "transport/nccl/nccl_status.h"

namespace mxmaca::transport::nccl {
namespace {

// NoGpuReason: empty when a device is usable, else the skip reason.
std::string NoGpuReason() {
  int count = 0;  // cudaErrorInsufficientDriver leaves it untouched
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return std::string("no GPU: cudaGetDeviceCount returned ") + cudaGetErrorName(err);
  }
  if (count == 0) return "no GPU: cudaGetDeviceCount found 0 devices";
  return "";
}

bool GpuOrSkip() {
  const std::string reason = NoGpuReason();
  if (reason.empty()) return true;
  std::printf("SKIPPED (%s): %s\n", Catch::getResultCapture().getCurrentTestName().c_str(),
              reason.c_str());
  WARN("SKIPPED: " << reason);
  return false;
}

// WorldOfOne: the world group of a 1-rank job (id kWorld * world_size + 0).
ProcessGroup WorldOfOne() {
  ProcessGroup g;
  g.kind = GroupKind::kWorld;
  g.id = static_cast<int64_t>(GroupKind::kWorld);
  g.ranks = {0};
  g.rank_in_group = 0;
  return g;
}

AllGatherFn Alone() {
  return [](absl::string_view blob) {
    return absl::StatusOr<std::vector<std::string>>(std::vector<std::string>{std::string(blob)});
  };
}

// Result: what one `done` received.
struct Result {
  absl::Notification notified;
  CollectiveInfo info;
  absl::Status status;
  int calls = 0;
};

DoneCallback Into(const std::shared_ptr<Result>& r) {
  return [r](const CollectiveInfo& info, absl::Status s) {
    r->info = info;
    r->status = std::move(s);
    if (++r->calls == 1) r->notified.Notify();
  };
}

// Await: the status `done` delivered within 60 s (a GPU collective of this size takes
// milliseconds; 60 s only bounds a hang).
absl::Status Await(const std::shared_ptr<Result>& r) {
  if (!r->notified.WaitForNotificationWithTimeout(absl::Seconds(60))) {
    return absl::DeadlineExceededError("done did not run within 60 s");
  }
  return r->status;
}

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    REQUIRE(cudaMalloc(&p_, (n ? n : 1) * sizeof(T)) == cudaSuccess);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    REQUIRE(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return p_; }
  std::vector<T> Host() const {
    std::vector<T> h(n_);
    REQUIRE(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return h;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

template <typename T>
std::vector<T> Random(size_t n, std::mt19937_64& gen) {
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::normal_distribution<T> d(0, 3);
    for (auto& x : v) x = d(gen);
  } else {
    for (auto& x : v) x = static_cast<T>(gen());
  }
  return v;
}

absl::Status CallThatFails(ncclResult_t r) {
  MXMACA_NCCL_RETURN_IF_ERROR(r, "all_reduce on data_parallel#0 (group 32) seq 7");
  return absl::OkStatus();
}

TEST_CASE("checking macros name the call, file, line, operation and the vendor error") {
  const absl::Status s = CallThatFails(ncclInvalidUsage);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StartsWith(s.message(), "all_reduce on data_parallel#0 (group 32) seq 7: "));
  CHECK(absl::StrContains(s.message(), "transport/nccl/nccl_communicator_test.cc:"));
  CHECK(absl::StrContains(s.message(),
                          absl::StrCat(": r failed: ncclInvalidUsage (5): ",
                                       ncclGetErrorString(ncclInvalidUsage))));
  CHECK(CallThatFails(ncclRemoteError).code() == absl::StatusCode::kUnavailable);
  CHECK(CallThatFails(ncclSystemError).code() == absl::StatusCode::kUnavailable);
  CHECK(CallThatFails(ncclInternalError).code() == absl::StatusCode::kInternal);
  CHECK(CallThatFails(ncclUnhandledCudaError).code() == absl::StatusCode::kInternal);
  CHECK(CallThatFails(ncclSuccess).ok());
  const absl::Status c =
      CudaErrorAt(cudaErrorInvalidValue, "cudaMemcpyAsync(d, h, n, k, s)", "x.cc", 12, "ctx");
  CHECK(c.code() == absl::StatusCode::kInternal);
  CHECK(c.message() == absl::StrCat("ctx: x.cc:12: cudaMemcpyAsync(d, h, n, k, s) failed: "
                                    "cudaErrorInvalidValue (1): ",
                                    cudaGetErrorString(cudaErrorInvalidValue)));
  CHECK(ToNcclDataType(DataType::kFloat32) == ncclFloat32);
  CHECK(ToNcclDataType(DataType::kBFloat16) == ncclBfloat16);
  CHECK(ToNcclDataType(DataType::kInt32) == ncclInt32);
  CHECK(ToNcclDataType(DataType::kInt64) == ncclInt64);
  CHECK(ToNcclDataType(DataType::kUInt8) == ncclUint8);
}

TEST_CASE("Create without a usable GPU fails with the reason") {
  const std::string reason = NoGpuReason();
  if (reason.empty()) {
    std::printf("SKIPPED (Create without a usable GPU): a GPU is present\n");
    return;
  }
  auto comm = NcclCommunicator::Create(0, 1, {WorldOfOne()}, Alone(), StreamPair{},
                                       NcclCommunicator::Options{});
  REQUIRE_FALSE(comm.ok());
  CHECK(comm.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(comm.status().message() == "NcclCommunicator rank 0 (device 0): " + reason);
  auto bad = NcclCommunicator::Create(2, 2, {WorldOfOne()}, Alone(), StreamPair{},
                                      NcclCommunicator::Options{});
  CHECK(bad.status().message() == "NcclCommunicator: rank 2 outside a world of 2");
}

TEST_CASE("one rank: every operation on fresh random inputs gives the host values") {
  if (!GpuOrSkip()) return;
  std::mt19937_64 gen(std::random_device{}());
  const ProcessGroup world = WorldOfOne();
  auto created = NcclCommunicator::Create(0, 1, {world}, Alone(), StreamPair{},
                                          NcclCommunicator::Options{});
  REQUIRE(created.ok());
  NcclCommunicator& comm = **created;
  CHECK(comm.rank() == 0);
  CHECK(comm.streams().communication != nullptr);  // created and owned

  const int64_t n = 1000 + static_cast<int64_t>(gen() % 5000);
  INFO("n = " << n);
  // All-reduce in place and out of place: one rank's sum is its input, bit for bit.
  const auto x = Random<float>(n, gen);
  DeviceBuffer<float> send(x), recv(n);
  auto r0 = std::make_shared<Result>(), r1 = std::make_shared<Result>();
  const CollectiveInfo i0 = comm.AllReduceSum(world, send.get(), recv.get(), n, Into(r0));
  const CollectiveInfo i1 = comm.AllReduceSum(world, send.get(), send.get(), n, Into(r1));
  REQUIRE(Await(r0).ok());
  REQUIRE(Await(r1).ok());
  CHECK(recv.Host() == x);
  CHECK(send.Host() == x);
  CHECK(i0.sequence == 0);
  CHECK(i1.sequence == 1);
  CHECK(r1->info.sequence == 1);
  CHECK(i0.bytes == 4 * n);
  CHECK(i0.group_name == "world#0");

  // All-gather (bf16 as raw 16-bit words), reduce-scatter, broadcast.
  const auto h = Random<uint16_t>(n, gen);
  DeviceBuffer<uint16_t> hs(h), hr(n);
  auto r2 = std::make_shared<Result>();
  comm.AllGather(world, hs.get(), hr.get(), n, DataType::kBFloat16, Into(r2));
  REQUIRE(Await(r2).ok());
  CHECK(hr.Host() == h);
  const auto y = Random<float>(n, gen);
  DeviceBuffer<float> ys(y), yr(n);
  auto r3 = std::make_shared<Result>();
  const CollectiveInfo i3 = comm.ReduceScatterSum(world, ys.get(), yr.get(), n, Into(r3));
  REQUIRE(Await(r3).ok());
  CHECK(yr.Host() == y);
  CHECK(i3.sequence == 3);
  const auto z = Random<int64_t>(n, gen);
  DeviceBuffer<int64_t> zb(z);
  auto r4 = std::make_shared<Result>();
  const CollectiveInfo i4 = comm.Broadcast(world, 0, zb.get(), n, DataType::kInt64, Into(r4));
  REQUIRE(Await(r4).ok());
  CHECK(zb.Host() == z);
  CHECK(i4.peer == 0);

  // All-to-all-v to oneself: the grouped ncclSend/ncclRecv pair, into an offset.
  const auto u = Random<int32_t>(n, gen);
  DeviceBuffer<int32_t> us(u), ur(n + 17);
  const int64_t off = 3, len = n - 5;
  auto r5 = std::make_shared<Result>();
  comm.AllToAllV(world, us.get(), {len}, {off}, ur.get(), {len}, {17}, DataType::kInt32,
                 Into(r5));
  REQUIRE(Await(r5).ok());
  const auto got = ur.Host();
  CHECK(std::vector<int32_t>(got.begin() + 17, got.begin() + 17 + len) ==
        std::vector<int32_t>(u.begin() + off, u.begin() + off + len));

  // A batch: two operations in one NCCL group, one completion.
  const auto w = Random<float>(n, gen);
  DeviceBuffer<float> wa(w), wb(n), wc(n);
  auto r6 = std::make_shared<Result>(), r7 = std::make_shared<Result>();
  comm.BeginBatch();
  comm.AllReduceSum(world, wa.get(), wb.get(), n, Into(r6));
  comm.AllGather(world, wa.get(), wc.get(), n, DataType::kFloat32, Into(r7));
  CHECK(comm.pending_operations() == 2);
  REQUIRE(comm.EndBatch().ok());
  REQUIRE(Await(r6).ok());
  REQUIRE(Await(r7).ok());
  CHECK(wb.Host() == w);
  CHECK(wc.Host() == w);
  CHECK(comm.EndBatch().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(comm.pending_operations() == 0);
  CHECK(r6->calls == 1);
}

TEST_CASE("one rank: NCCL waits for the compute stream's earlier work") {
  if (!GpuOrSkip()) return;
  std::mt19937_64 gen(std::random_device{}());
  cudaStream_t compute = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking) == cudaSuccess);
  const ProcessGroup world = WorldOfOne();
  auto created = NcclCommunicator::Create(0, 1, {world}, Alone(), StreamPair{compute, nullptr},
                                          NcclCommunicator::Options{});
  REQUIRE(created.ok());
  // 64 MiB: the host-to-device copy on the compute stream takes milliseconds, so an
  // all-reduce not ordered after it would read the old (zero) contents.
  const int64_t n = int64_t{16} << 20;
  float* pinned = nullptr;
  REQUIRE(cudaMallocHost(&pinned, n * sizeof(float)) == cudaSuccess);
  const auto x = Random<float>(n, gen);
  std::memcpy(pinned, x.data(), n * sizeof(float));
  DeviceBuffer<float> in(n), out(n);
  REQUIRE(cudaMemset(in.get(), 0, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(in.get(), pinned, n * sizeof(float), cudaMemcpyHostToDevice,
                          compute) == cudaSuccess);
  auto r = std::make_shared<Result>();
  (*created)->AllReduceSum(world, in.get(), out.get(), n, Into(r));
  REQUIRE(Await(r).ok());
  CHECK(out.Host() == x);
  created->reset();
  cudaFreeHost(pinned);
  cudaStreamDestroy(compute);
}

TEST_CASE("one rank: refusals come at once and consume no sequence number") {
  if (!GpuOrSkip()) return;
  const ProcessGroup world = WorldOfOne();
  auto created = NcclCommunicator::Create(0, 1, {world}, Alone(), StreamPair{},
                                          NcclCommunicator::Options{});
  REQUIRE(created.ok());
  NcclCommunicator& comm = **created;
  DeviceBuffer<float> buf(16);
  auto self = std::make_shared<Result>();
  comm.Send(world, 0, buf.get(), 16, DataType::kFloat32, Into(self));
  REQUIRE(self->notified.HasBeenNotified());
  CHECK(self->status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(self->status.message(), "send/recv to itself"));
  ProcessGroup other = world;
  other.id = 99;
  auto unknown = std::make_shared<Result>();
  comm.AllReduceSum(other, buf.get(), buf.get(), 16, Into(unknown));
  REQUIRE(unknown->notified.HasBeenNotified());
  CHECK(unknown->status.message() ==
        "NcclCommunicator: all_reduce on world#0 (group 99) seq 0 fp32 x 16 (64 bytes) from "
        "rank 0: group 99 (world#0) was not given to NcclCommunicator::Create");
  auto negative = std::make_shared<Result>();
  comm.Broadcast(world, 1, buf.get(), 16, DataType::kFloat32, Into(negative));
  CHECK(negative->status.code() == absl::StatusCode::kInvalidArgument);
  auto ok = std::make_shared<Result>();
  const CollectiveInfo info = comm.AllReduceSum(world, buf.get(), buf.get(), 16, Into(ok));
  CHECK(info.sequence == 0);
  CHECK(Await(ok).ok());
}

TEST_CASE("one rank: a stuck operation times out with a report and breaks its group") {
  if (!GpuOrSkip()) return;
  cudaStream_t compute = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking) == cudaSuccess);
  // The compute stream blocks in a host function until `release` is set, so the all-reduce
  // (which waits for the compute stream) stays in flight.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto* wait = new std::shared_future<void>(released);
  REQUIRE(cudaLaunchHostFunc(
              compute,
              [](void* p) {
                auto* f = static_cast<std::shared_future<void>*>(p);
                f->wait();
                delete f;
              },
              wait) == cudaSuccess);
  absl::Mutex mu;
  absl::Time now = absl::FromUnixSeconds(1000);
  NcclCommunicator::Options options;
  options.timeout = absl::Minutes(5);
  options.clock = [&] {
    absl::MutexLock lock(&mu);
    return now;
  };
  const ProcessGroup world = WorldOfOne();
  auto created = NcclCommunicator::Create(0, 1, {world}, Alone(), StreamPair{compute, nullptr},
                                          options);
  REQUIRE(created.ok());
  NcclCommunicator& comm = **created;
  DeviceBuffer<float> buf(256);
  auto stuck = std::make_shared<Result>();
  comm.AllReduceSum(world, buf.get(), buf.get(), 256, Into(stuck));
  // Released from another thread after 5 s (far later than the checks below need), in case
  // ncclCommAbort waits for the streams it shares work with.
  std::thread releaser([&release] {
    absl::SleepFor(absl::Seconds(5));
    release.set_value();
  });
  CHECK(comm.CheckTimeouts(now + absl::Minutes(4)).empty());
  const auto reports = comm.CheckTimeouts(now + absl::Minutes(5));
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(absl::StartsWith(reports[0].message(),
                         "NcclCommunicator: all_reduce on world#0 (group 16) seq 0 did not "
                         "complete within 5m (posted 5m ago)"));
  REQUIRE(Await(stuck).code() == absl::StatusCode::kDeadlineExceeded);
  auto later = std::make_shared<Result>();
  comm.AllReduceSum(world, buf.get(), buf.get(), 256, Into(later));
  CHECK(later->status.code() == absl::StatusCode::kFailedPrecondition);
  releaser.join();
  REQUIRE(cudaStreamSynchronize(compute) == cudaSuccess);
  created->reset();
  CHECK(stuck->calls == 1);
  cudaStreamDestroy(compute);
}

}  // namespace
}  // namespace mxmaca::transport::nccl
