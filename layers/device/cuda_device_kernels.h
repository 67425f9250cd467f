// layers/device/cuda_device_kernels.h: DeviceKernels on one CUDA device (kernels/cuda).
//
// CudaDeviceKernels::Create makes an instance bound to one device and one stream. Every
// compute method checks its arguments (kernel_args.h), makes the instance's device
// current on the calling thread if it is not, and enqueues the kernels/cuda function of
// the same name on the stream; nothing synchronises, so a sequence of calls can be
// captured into a CUDA graph on stream() — with one exception, the attention scratch
// below. Memory: Allocate = cudaMalloc, Free = cudaFree (which waits for the device),
// copies = cudaMemcpyAsync and Zero = cudaMemsetAsync on the stream, Synchronize =
// cudaStreamSynchronize plus the first pending asynchronous error.
//
// Owned workspaces:
//   - a cuBLASLt GemmHandle with 32 MiB of workspace (Gemm and the attention GEMMs);
//   - the SumSquares partials (kernels/cuda/elementwise.h kSumSquaresPartials doubles);
//   - the attention scratch, [B, NH, S, S] fp32, which kernels/cuda AttentionForward
//     (with dropout) and AttentionBackward need. It is grown lazily, when a call needs
//     more than the instance holds, and growing ALLOCATES (cudaFree + cudaMalloc, both of
//     which synchronise the device). So the largest attention shape must run once
//     eagerly before any CUDA graph capture — the device GPT stage's first iteration is
//     eager; a call that would grow the scratch while stream() is capturing fails with
//     kFailedPrecondition instead of breaking the capture.
//
// Errors: kInternal for a failed CUDA/cuBLAS call or a kernel-side precondition (the
// message names the call, file and line; kernels/cuda/status_adapter.h),
// kInvalidArgument for bad sizes, kResourceExhausted when cudaMalloc has no room.
//
// Without CUDA (the build's HAS_CUDA is False) the class still exists and Create returns
// kUnimplemented, so a `--device cuda` flag always links.
//
// Thread safety: none (as GemmHandle): one owner — the stage actor that owns the stream.
#ifndef MXMACA_LAYERS_DEVICE_CUDA_DEVICE_KERNELS_H_
#define MXMACA_LAYERS_DEVICE_CUDA_DEVICE_KERNELS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/exec_context.h"
#include "layers/device/device_kernels.h"

// The CUDA runtime's stream type is `typedef struct CUstream_st* cudaStream_t`
// (driver_types.h); declaring the struct keeps this header free of CUDA headers, so it
// compiles where there is no toolkit.
struct CUstream_st;

namespace mxmaca::layers::device {

// CudaStream: the same type as cudaStream_t.
using CudaStream = ::CUstream_st*;

class CudaDeviceKernels : public DeviceKernels {
 public:
  // kGemmWorkspaceBytes: the cuBLASLt workspace of the owned GemmHandle (32 MiB, what
  // cuBLAS recommends on Hopper).
  static constexpr int64_t kGemmWorkspaceBytes = int64_t{32} << 20;

  // Create: an instance on CUDA device `device` (0-based) enqueuing on `stream`, which
  // must belong to that device and outlive the instance; nullptr creates a non-blocking
  // stream (cudaStreamNonBlocking) that the instance owns and destroys. `precision` is
  // the Gemm (and attention GEMM) input precision.
  // Errors: kFailedPrecondition "no GPU: ..." when no device is usable (ProbeDevice's
  // reason, e.g. "cudaGetDeviceCount returned cudaErrorInsufficientDriver");
  // kInvalidArgument for a device outside [0, device count); kInternal for a failed
  // cudaSetDevice, stream creation or cuBLASLt setup (including its workspace's
  // cudaMalloc); kResourceExhausted when the SumSquares workspace does not fit;
  // kUnimplemented "MXMACA was built without CUDA (no nvcc at CUDA_PATH)".
  static absl::StatusOr<std::unique_ptr<CudaDeviceKernels>> Create(int device, CudaStream stream,
                                                                   kernels::Precision precision);

  // FreeMemoryBytes: cudaMemGetInfo's free bytes of CUDA device `device` (what a new
  // allocation may use; memory admission, api/train/memory_admission.h), and its total in
  // `total_bytes` when non-null. Errors: as Create's (no GPU, a device outside the count,
  // a build without CUDA), kInternal for a failed cudaSetDevice / cudaMemGetInfo.
  static absl::StatusOr<int64_t> FreeMemoryBytes(int device, int64_t* total_bytes = nullptr);

  // device: the CUDA device index. stream: the stream every call enqueues on (for the
  // caller's events and graph capture).
  int device() const { return device_; }
  CudaStream stream() const { return stream_; }

  std::string name() const override { return "cuda"; }
  bool has_fused_attention(int64_t head_dim) const override {
    return head_dim == 32 || head_dim == 64 || head_dim == 128;  // fused_attention.cu's tiles
  }

 protected:
  CudaDeviceKernels(int device, CudaStream stream) : device_(device), stream_(stream) {}

 private:
  const int device_;
  const CudaStream stream_;
};

}  // namespace mxmaca::layers::device

#endif  // MXMACA_LAYERS_DEVICE_CUDA_DEVICE_KERNELS_H_
