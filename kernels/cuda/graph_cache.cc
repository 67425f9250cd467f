// kernels/cuda/graph_cache.cc: capture / replay of stage segments with CUDA graphs.
#include "kernels/cuda/graph_cache.h"

#include <string>

namespace mxmaca::kernels::cuda {

CudaGraphCache::~CudaGraphCache() {
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
}

CudaStatus CudaGraphCache::Run(const SegmentKey& key, cudaStream_t stream,
                               const SegmentFn& fn) {
  switch (state_.Next(key)) {
    case SegmentAction::kEager: {
      CudaStatus s = fn(stream);
      if (s.ok()) state_.RecordEager(key);
      return s;
    }
    case SegmentAction::kCapture:
      return CaptureAndLaunch(key, stream, fn);
    case SegmentAction::kReplay:
      break;
  }
  const auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    // The table and the map disagree: a broken invariant of this class, reported.
    return InvalidArgumentAt("CudaGraphCache: no graph for captured segment " + key.ToString(),
                             __FILE__, __LINE__);
  }
  MXMACA_CUDA_CHECK(cudaGraphLaunch(it->second, stream));
  state_.RecordReplay(key);
  return CudaStatus();
}

CudaStatus CudaGraphCache::CaptureAndLaunch(const SegmentKey& key, cudaStream_t stream,
                                            const SegmentFn& fn) {
  const cudaError_t begin = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (begin != cudaSuccess) {
    return EagerFallback(
        key, stream, fn,
        CudaErrorAt(begin, "cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal)",
                    __FILE__, __LINE__)
            .message());
  }
  const CudaStatus captured = fn(stream);
  cudaGraph_t graph = nullptr;
  // Always ended, whatever fn did: the stream must not stay in capture mode.
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  const cudaError_t query = cudaStreamIsCapturing(stream, &capturing);
  if (query != cudaSuccess || capturing != cudaStreamCaptureStatusNone) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return InvalidArgumentAt("CudaGraphCache: stream still capturing after "
                             "cudaStreamEndCapture for segment " +
                                 key.ToString(),
                             __FILE__, __LINE__);
  }
  std::string reason;
  if (!captured.ok()) {
    reason = "segment failed during capture: " + captured.message();
  } else if (end != cudaSuccess) {
    reason = CudaErrorAt(end, "cudaStreamEndCapture(stream, &graph)", __FILE__, __LINE__)
                 .message();
  }
  cudaGraphExec_t exec = nullptr;
  if (reason.empty()) {
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    if (inst != cudaSuccess) {
      exec = nullptr;
      reason = CudaErrorAt(inst, "cudaGraphInstantiate(&exec, graph, 0)", __FILE__, __LINE__)
                   .message();
    }
  }
  if (graph != nullptr) cudaGraphDestroy(graph);  // the executable graph is independent
  if (!reason.empty()) return EagerFallback(key, stream, fn, reason);
  graphs_[key] = exec;
  MXMACA_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  state_.RecordCaptured(key);
  return CudaStatus();
}

CudaStatus CudaGraphCache::EagerFallback(const SegmentKey& key, cudaStream_t stream,
                                         const SegmentFn& fn, const std::string& reason) {
  // A call that failed during capture left its code in the last-error slot, where a
  // later MXMACA_CUDA_CHECK_LAUNCH (cudaGetLastError) would report it.
  (void)cudaGetLastError();
  state_.RecordCaptureFailure(key, reason);
  CudaStatus s = fn(stream);
  if (s.ok()) state_.RecordEager(key);
  return s;
}

void CudaGraphCache::DropGraph(const SegmentKey& key) {
  const auto it = graphs_.find(key);
  if (it == graphs_.end()) return;
  cudaGraphExecDestroy(it->second);
  graphs_.erase(it);
}

void CudaGraphCache::MarkEagerOnly(const SegmentKey& key, const std::string& reason) {
  DropGraph(key);
  state_.MarkEagerOnly(key, reason);
}

int CudaGraphCache::Invalidate() {
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
  return state_.Invalidate();
}

bool CudaGraphCache::Invalidate(const SegmentKey& key) {
  DropGraph(key);
  return state_.Invalidate(key);
}

}  // namespace mxmaca::kernels::cuda
