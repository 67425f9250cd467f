// kernels/exec_context.h: the execution context every kernel call takes.
//
// docs/ARCHITECTURE.md, "Kernel calls only enqueue": a kernel call gets an explicit context
// (stream or CPU executor, workspace, RNG key, precision policy) and does no host
// synchronisation, no allocation visible to the caller, and no host read of device data,
// so a stage's work can be captured into a CUDA graph as it is. On CPU "enqueue" means
// "run now on the calling thread, using at most `num_threads` threads".
#ifndef MXMACA_KERNELS_EXEC_CONTEXT_H_
#define MXMACA_KERNELS_EXEC_CONTEXT_H_

#include <cstddef>
#include <cstdint>

namespace mxmaca::kernels {

// Precision: the input precision of matrix products. Accumulation, master weights,
// gradients and optimizer state are always fp32.
//   kFp32: fp32 inputs (oneDNN sgemm on CPU).
//   kBf16: inputs rounded to bf16 (round-to-nearest-even), fp32 accumulation and output
//          (Megatron's --bf16 structure; oneDNN bf16 matmul on CPU, cuBLASLt on GPU).
enum class Precision { kFp32, kBf16 };

// RngKey: the key of a counter-based random stream (docs/ARCHITECTURE.md, "Randomness is a
// function, not a stream"). The value drawn for element i of a tensor is
// f(seed, stream, i) — independent of thread count, layout or schedule. `stream`
// identifies the use (layer, dropout site, iteration, micro-batch), built by
// MakeRngStream in kernels/philox.h.
struct RngKey {
  uint64_t seed = 0;
  uint64_t stream = 0;
};

// ExecContext: what a kernel call may use.
struct ExecContext {
  // CUDA: the cudaStream_t to enqueue on. CPU: unused (nullptr).
  void* stream = nullptr;
  // CPU: the number of threads this call may use (OpenMP / oneDNN), >= 1.
  int num_threads = 1;
  // Matrix-product input precision.
  Precision precision = Precision::kFp32;
};

}  // namespace mxmaca::kernels

#endif  // MXMACA_KERNELS_EXEC_CONTEXT_H_
