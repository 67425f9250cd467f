// kernels/cuda_graph_flags.h: the CUDA-graph flags of Megatron-Core 0.15 and MXMACA's
// `--no-cuda-graph`, mapped to a CudaGraphMode plus a human-readable note.
//
// Source: Megatron-LM megatron/training/arguments.py at the commit api/args pins for
// core_v0.15.0 (000c4ac24f61159c138b0975def722c65245983c), _add_inference_args:
//   --cuda-graph-impl {none,local,transformer_engine}   default 'none'
//   --cuda-graph-scope {full,attn,full_iteration}       default 'full'; "full_iteration
//       scope is only supported with --cuda-graph-impl=local, attn scope is only
//       supported with --cuda-graph-impl=transformer_engine"
//   --cuda-graph-warmup-steps INT                       default 3
//   --enable-cuda-graph      (store_true) deprecated: "Use --cuda-graph-impl=local"
//   --external-cuda-graph    (store_true) deprecated: "Use --cuda-graph-impl=transformer_engine"
// and validate_args: "Do not use --enable-cuda-graph or --external-cuda-graph with
// --cuda-graph-impl"; the two deprecated flags are mutually exclusive.
//
// What each maps to here (no Transformer Engine in MXMACA; our own capture does the job):
//   --cuda-graph-impl local              -> kLocal
//   --cuda-graph-impl transformer_engine -> kLocal, with a note saying so
//   --cuda-graph-impl none               -> kNone
//   --enable-cuda-graph                  -> kLocal, with a deprecation note
//   --external-cuda-graph                -> kLocal, with a deprecation note
//   --no-cuda-graph (MXMACA)             -> kNone
//   nothing                              -> kNone (Megatron's default 'none')
// Warm-up: MXMACA's default is 1 eager run per segment (cuBLAS and NCCL initialise
// lazily in the first run; our kernels allocate nothing), not Megatron's 3; an explicit
// --cuda-graph-warmup-steps N is honoured as N eager runs per segment.
// Scope: MXMACA's unit of capture is one stage segment (an F, B, W or optimizer step of
// one chunk at one micro-batch shape), whatever the scope; the note says what the given
// scope maps to.
#ifndef MXMACA_KERNELS_CUDA_GRAPH_FLAGS_H_
#define MXMACA_KERNELS_CUDA_GRAPH_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda_graph_mode.h"

namespace mxmaca::kernels {

// kDefaultCudaGraphWarmupSteps: MXMACA's eager runs per segment before capture when
// --cuda-graph-warmup-steps is not given (Megatron's default is 3).
inline constexpr int kDefaultCudaGraphWarmupSteps = 1;

// CudaGraphFlagValues: the raw values of the flags, as any argparse-like parser read
// them (unset optional / false = flag absent).
struct CudaGraphFlagValues {
  std::optional<std::string> cuda_graph_impl;         // --cuda-graph-impl VALUE
  std::optional<std::string> cuda_graph_scope;        // --cuda-graph-scope VALUE
  std::optional<int64_t> cuda_graph_warmup_steps;     // --cuda-graph-warmup-steps N
  bool enable_cuda_graph = false;                     // --enable-cuda-graph (deprecated)
  bool external_cuda_graph = false;                   // --external-cuda-graph (deprecated)
  bool no_cuda_graph = false;                         // --no-cuda-graph (MXMACA)
};

// CudaGraphConfig: the decision.
struct CudaGraphConfig {
  CudaGraphMode mode = CudaGraphMode::kNone;
  // Eager runs of each segment before it is captured (>= 0).
  int warmup_steps = kDefaultCudaGraphWarmupSteps;
  // Megatron's scope as given ("full" when absent).
  std::string scope = "full";
  // What the flags map to, one sentence per decision, joined by "; " (e.g.
  // "--cuda-graph-impl transformer_engine: mapped to MXMACA's own capture (local); ...").
  std::string note;
};

// ParseCudaGraphFlags: validates `values` and maps them. Errors (InvalidArgument) name
// both flags of a conflicting pair (--no-cuda-graph with a flag that enables graphs,
// --enable-cuda-graph with --external-cuda-graph, either deprecated flag with
// --cuda-graph-impl), an unknown --cuda-graph-impl / --cuda-graph-scope value (listing
// the choices), a scope Megatron does not allow with the chosen implementation, and a
// negative or absurd (> 1000) warm-up count.
absl::StatusOr<CudaGraphConfig> ParseCudaGraphFlags(const CudaGraphFlagValues& values);

// ParseCudaGraphArgv: reads the six flags out of a command line (`--flag VALUE` and
// `--flag=VALUE`; other arguments ignored; a repeated valued flag keeps its last value,
// as argparse) and calls ParseCudaGraphFlags. Errors: a valued flag without a value, a
// non-integer warm-up count, a value given to a switch (`--no-cuda-graph=1`), and those
// of ParseCudaGraphFlags.
absl::StatusOr<CudaGraphConfig> ParseCudaGraphArgv(const std::vector<std::string>& args);

}  // namespace mxmaca::kernels

#endif  // MXMACA_KERNELS_CUDA_GRAPH_FLAGS_H_
