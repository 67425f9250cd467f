// kernels/cuda_graph_mode.h: whether stage segments are captured into CUDA graphs.
//
// A dependency-free header (no CUDA, no Abseil) so the CPU-only build, the flag parser
// (kernels/cuda_graph_flags.h) and the self-contained GPU check binary can all name it.
// Issue 8: after an eager warm-up, each static-shape segment of a stage's work is
// captured once and replayed (kernels/cuda/graph_cache.h).
#ifndef MXMACA_KERNELS_CUDA_GRAPH_MODE_H_
#define MXMACA_KERNELS_CUDA_GRAPH_MODE_H_

namespace mxmaca::kernels {

// CudaGraphMode: kNone runs every segment eagerly (stream launches); kLocal captures
// static-shape segments with MXMACA's own capture (kernels/cuda/graph_cache.h). Megatron's
// `--cuda-graph-impl transformer_engine` also maps to kLocal (see cuda_graph_flags.h).
enum class CudaGraphMode { kNone, kLocal };

// CudaGraphModeName: "none" or "local" (Megatron-Core's spelling of the same choice).
inline const char* CudaGraphModeName(CudaGraphMode mode) {
  return mode == CudaGraphMode::kLocal ? "local" : "none";
}

}  // namespace mxmaca::kernels

#endif  // MXMACA_KERNELS_CUDA_GRAPH_MODE_H_
