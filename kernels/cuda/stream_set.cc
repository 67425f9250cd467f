// kernels/cuda/stream_set.cc: compute + communication streams of one actor.
#include "kernels/cuda/stream_set.h"

#include <memory>

namespace mxmaca::kernels::cuda {

CudaStatus StreamSet::Create(int device, std::unique_ptr<StreamSet>* out) {
  MXMACA_CUDA_REQUIRE(device >= 0, "StreamSet: device index " + std::to_string(device));
  // Built before the calls so that its destructor frees whatever was created.
  std::unique_ptr<StreamSet> set(new StreamSet());
  set->device_ = device;
  MXMACA_CUDA_CHECK(cudaSetDevice(device));
  int least = 0, greatest = 0;
  MXMACA_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  set->priorities_ = ChooseStreamPriorities(least, greatest);
  MXMACA_CUDA_CHECK(cudaStreamCreateWithPriority(&set->compute_, cudaStreamNonBlocking,
                                                 set->priorities_.compute));
  MXMACA_CUDA_CHECK(
      cudaStreamCreateWithPriority(&set->comm_, cudaStreamNonBlocking, set->priorities_.comm));
  MXMACA_CUDA_CHECK(cudaEventCreateWithFlags(&set->compute_done_, cudaEventDisableTiming));
  MXMACA_CUDA_CHECK(cudaEventCreateWithFlags(&set->comm_done_, cudaEventDisableTiming));
  *out = std::move(set);
  return CudaStatus();
}

StreamSet::~StreamSet() {
  // Destroying a stream or event with work pending is legal: CUDA frees it on completion.
  if (compute_done_ != nullptr) cudaEventDestroy(compute_done_);
  if (comm_done_ != nullptr) cudaEventDestroy(comm_done_);
  if (compute_ != nullptr) cudaStreamDestroy(compute_);
  if (comm_ != nullptr) cudaStreamDestroy(comm_);
}

CudaStatus StreamSet::MakeCurrent() const {
  MXMACA_CUDA_CHECK(cudaSetDevice(device_));
  return CudaStatus();
}

CudaStatus StreamSet::ComputeToComm() {
  MXMACA_CUDA_CHECK(cudaEventRecord(compute_done_, compute_));
  MXMACA_CUDA_CHECK(cudaStreamWaitEvent(comm_, compute_done_, 0));
  return CudaStatus();
}

CudaStatus StreamSet::CommToCompute() {
  MXMACA_CUDA_CHECK(cudaEventRecord(comm_done_, comm_));
  MXMACA_CUDA_CHECK(cudaStreamWaitEvent(compute_, comm_done_, 0));
  return CudaStatus();
}

ExecContext StreamSet::compute_ctx(Precision precision) const {
  ExecContext ctx;
  ctx.stream = compute_;
  ctx.precision = precision;
  return ctx;
}

ExecContext StreamSet::comm_ctx(Precision precision) const {
  ExecContext ctx;
  ctx.stream = comm_;
  ctx.precision = precision;
  return ctx;
}

CudaStatus StreamSet::Synchronize() const {
  MXMACA_CUDA_CHECK(cudaStreamSynchronize(compute_));
  MXMACA_CUDA_CHECK(cudaStreamSynchronize(comm_));
  return CudaStatus();
}

}  // namespace mxmaca::kernels::cuda
