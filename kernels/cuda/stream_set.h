// kernels/cuda/stream_set.h: the CUDA streams one actor owns (issue 8; STYLE.md "Actors":
// one actor owns one device's streams, memory and communicators).
//
// A StreamSet holds a compute stream and a communication stream on one device, both
// non-blocking (no implicit sync with the legacy default stream), the communication
// stream at the device's highest priority so that sends and collectives overtake queued
// compute kernels (the usual overlap arrangement, e.g. Megatron's comm streams). Cross
// stream ordering goes through two reusable events created with cudaEventDisableTiming:
// ComputeToComm() makes the comm stream wait for everything enqueued on compute so far,
// CommToCompute() the reverse; neither blocks the host, and both are legal inside CUDA
// graph capture (they become graph edges).
//
// Threads: CUDA's current device is per host thread and CAF runs a pooled actor on any
// worker thread, so an actor calls MakeCurrent() at the start of each handler that
// enqueues work (cudaSetDevice is cheap when nothing changes).
// Errors: CudaStatus naming file, line, call and the CUDA error.
#ifndef MXMACA_KERNELS_CUDA_STREAM_SET_H_
#define MXMACA_KERNELS_CUDA_STREAM_SET_H_

#include <cuda_runtime.h>

#include <memory>

#include "kernels/cuda/cuda_check.h"
#include "kernels/exec_context.h"

namespace mxmaca::kernels::cuda {

// StreamPriorities: CUDA stream priorities (lower number = higher priority).
struct StreamPriorities {
  int compute = 0;
  int comm = 0;
};

// ChooseStreamPriorities: from cudaDeviceGetStreamPriorityRange's (least, greatest) —
// e.g. (0, -5) on Hopper — compute gets the least priority, comm the greatest.
inline StreamPriorities ChooseStreamPriorities(int least, int greatest) {
  return StreamPriorities{least, greatest};
}

// StreamSet: RAII owner of the two streams and two events; not copyable or movable
// (handles are shared with enqueued work).
class StreamSet {
 public:
  // Create: makes `device` current on the calling thread and creates the streams and
  // events there. Errors: no such device / no driver (the CUDA call's message), creation
  // failures; nothing leaks on failure.
  static CudaStatus Create(int device, std::unique_ptr<StreamSet>* out);
  ~StreamSet();
  StreamSet(const StreamSet&) = delete;
  StreamSet& operator=(const StreamSet&) = delete;

  cudaStream_t compute() const { return compute_; }
  cudaStream_t comm() const { return comm_; }
  int device() const { return device_; }
  const StreamPriorities& priorities() const { return priorities_; }

  // MakeCurrent: cudaSetDevice(device()) on the calling thread.
  CudaStatus MakeCurrent() const;
  // ComputeToComm: comm waits (on the device) for the work enqueued on compute so far.
  CudaStatus ComputeToComm();
  // CommToCompute: compute waits for the work enqueued on comm so far.
  CudaStatus CommToCompute();
  // compute_ctx: the ExecContext of kernel calls on the compute stream.
  ExecContext compute_ctx(Precision precision = Precision::kFp32) const;
  // comm_ctx: the same for the comm stream (reductions fused into communication).
  ExecContext comm_ctx(Precision precision = Precision::kFp32) const;
  // Synchronize: blocks the host until both streams are idle. Not for per-micro-batch
  // paths (docs/ARCHITECTURE.md: collectives never block a thread); illegal during capture.
  CudaStatus Synchronize() const;

 private:
  StreamSet() = default;

  int device_ = 0;
  StreamPriorities priorities_;
  cudaStream_t compute_ = nullptr;
  cudaStream_t comm_ = nullptr;
  cudaEvent_t compute_done_ = nullptr;  // recorded on compute, waited on by comm
  cudaEvent_t comm_done_ = nullptr;     // recorded on comm, waited on by compute
};

}  // namespace mxmaca::kernels::cuda

#endif  // MXMACA_KERNELS_CUDA_STREAM_SET_H_
