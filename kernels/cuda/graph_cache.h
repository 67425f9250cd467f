// kernels/cuda/graph_cache.h: per-actor CUDA-graph capture and replay of stage segments
// (issue 8).
//
// After an eager warm-up (cuBLAS and NCCL initialise lazily), each static-shape segment
// of a stage's work — keyed by SegmentKey (op kind, chunk, micro-batch shape, caller's
// extras; graph_state.h) — is captured once into a CUDA graph and then replayed, so the
// CPU issues one launch per segment. Decisions (warm-up counting, key states,
// invalidation, statistics) live in GraphStateTable, host only and tested without a GPU;
// this class makes the CUDA calls.
//
// Run(key, stream, fn):
//   warming up / mode kNone / eager-only -> fn(stream) eagerly
//   capture  -> cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
//               fn(stream), cudaStreamEndCapture, cudaGraphInstantiate, cudaGraphLaunch
//   replay   -> cudaGraphLaunch only (fn is not called)
// A failed capture — fn returned an error, a call inside it was illegal during capture
// (a synchronisation, an allocation) and invalidated it, BeginCapture or instantiation
// failed — always ends the capture (the stream is never left capturing), clears CUDA's
// last-error slot, marks the key eager-only with the reason (Stats(key)), and runs fn
// eagerly so the segment's work still happens; Run returns that eager run's status.
//
// Contract for fn: enqueue-only work on `stream` (kernels/exec_context.h), using memory
// at fixed addresses (DeviceArena) and host scalars that are fixed for the key; work on
// other streams must fork from and join back to `stream` through events (StreamSet's
// ComputeToComm / CommToCompute pair) before fn returns. fn may be called twice for one
// run (capture, then the eager fallback), so its host-side effects must be repeatable.
// Dynamic-shape work (dropless MoE) is kept eager by MarkEagerOnly, or padded to capacity
// so that its shape becomes part of a key.
// Not thread-safe: one actor owns a cache. Graphs belong to the device current at capture.
#ifndef MXMACA_KERNELS_CUDA_GRAPH_CACHE_H_
#define MXMACA_KERNELS_CUDA_GRAPH_CACHE_H_

#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/graph_state.h"
#include "kernels/cuda_graph_mode.h"

namespace mxmaca::kernels::cuda {

// SegmentFn: enqueues one segment's work on the given stream.
using SegmentFn = std::function<CudaStatus(cudaStream_t)>;

// CudaGraphCache: graphs of one actor's segments.
class CudaGraphCache {
 public:
  // CudaGraphCache: mode kNone runs everything eagerly (--no-cuda-graph); warmup_runs
  // eager runs per key precede its capture (default 1; cuda_graph_flags.h).
  explicit CudaGraphCache(CudaGraphMode mode, int warmup_runs = 1)
      : state_(mode, warmup_runs) {}
  // ~CudaGraphCache: destroys the executable graphs (a graph still running is freed by
  // CUDA when it completes).
  ~CudaGraphCache();
  CudaGraphCache(const CudaGraphCache&) = delete;
  CudaGraphCache& operator=(const CudaGraphCache&) = delete;

  // Run: runs the segment `key` on `stream` as described above. Errors: fn's (eager
  // runs), cudaGraphLaunch's, and a stream still capturing after EndCapture (a broken
  // CUDA invariant, reported rather than aborted).
  CudaStatus Run(const SegmentKey& key, cudaStream_t stream, const SegmentFn& fn);

  // MarkEagerOnly: keeps `key` eager until invalidated (dynamic shapes), dropping its
  // graph if it had one.
  void MarkEagerOnly(const SegmentKey& key, const std::string& reason);
  // Invalidate: drops every graph (shape plan change, layer migration, arena reset); each
  // key warms up and is captured again. Returns the number of graphs dropped.
  int Invalidate();
  // Invalidate(key): the same for one key; true when it had a graph.
  bool Invalidate(const SegmentKey& key);

  // Stats: counts for `key` (launches, captures, eager runs, failures with reason), or
  // nullptr for a key never run.
  const SegmentStats* Stats(const SegmentKey& key) const { return state_.Stats(key); }
  const GraphStateTable& state() const { return state_; }

 private:
  CudaStatus CaptureAndLaunch(const SegmentKey& key, cudaStream_t stream, const SegmentFn& fn);
  CudaStatus EagerFallback(const SegmentKey& key, cudaStream_t stream, const SegmentFn& fn,
                           const std::string& reason);
  void DropGraph(const SegmentKey& key);

  GraphStateTable state_;
  std::map<SegmentKey, cudaGraphExec_t> graphs_;
};

}  // namespace mxmaca::kernels::cuda

#endif  // MXMACA_KERNELS_CUDA_GRAPH_CACHE_H_
