// kernels/cuda/graph_state.h: the decisions of the CUDA-graph cache, host only.
//
// A stage's work is cut into segments (one F, B, W or optimizer step of one chunk at one
// micro-batch shape); SegmentKey names one. GraphStateTable decides, per key, whether the
// next run is eager (warm-up, graphs off, or eager-only after a failed capture), a
// capture, or a replay of the captured graph, and counts what happened. CudaGraphCache
// (graph_cache.h) does the CUDA calls and consults this table; keeping the state machine
// here lets it be tested without a GPU.
//
// Per key:   WarmingUp --(warmup_runs eager runs)--> capture --ok--> Captured (replays)
//                                                            --failed--> EagerOnly
//            Invalidate(key) / Invalidate(): back to WarmingUp with a fresh warm-up count
//            (shape change, layer migration, arena reset); statistics are kept.
// A shape change needs no call: the shape is part of the key, so a new shape warms up and
// is captured as a new segment while the old one's graph stays cached for its return.
// Not thread-safe: one actor owns a cache.
#ifndef MXMACA_KERNELS_CUDA_GRAPH_STATE_H_
#define MXMACA_KERNELS_CUDA_GRAPH_STATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/cuda_graph_mode.h"

namespace mxmaca::kernels::cuda {

// SegmentKey: what makes a captured graph reusable. Everything a segment bakes into its
// kernels must be in the key or fixed for the cache's lifetime: device addresses (use a
// DeviceArena; put a message slot's index in `extra`), host scalars passed to kernels
// (learning rate: keep it in device memory or add it to `extra`), shapes.
struct SegmentKey {
  std::string op;              // "F", "B", "W", "step", ...
  int chunk = 0;               // virtual-pipeline chunk of the stage
  int64_t micro_batch = 0;     // b: micro-batch size (sequences)
  int64_t seq = 0;             // s: sequence length (tokens)
  std::vector<int64_t> extra;  // caller-defined: variant, slot index, ...

  bool operator<(const SegmentKey& o) const;
  bool operator==(const SegmentKey& o) const;
  // ToString: "F chunk 0 b 4 s 1024" plus " extra [1,2]" when extra is not empty.
  std::string ToString() const;
};

// SegmentAction: what the cache should do with the next run of a key.
enum class SegmentAction { kEager, kCapture, kReplay };

// SegmentStats: counts for one key since the table was made (kept across invalidation).
struct SegmentStats {
  int64_t eager_runs = 0;        // fn run directly on the stream (warm-up, off, fallback)
  int64_t captures = 0;          // successful captures (each also launched once)
  int64_t launches = 0;          // cudaGraphLaunch calls, including the one after capture
  int64_t capture_failures = 0;  // captures that failed and made the key eager-only
  int64_t invalidations = 0;     // graphs dropped by Invalidate
  bool eager_only = false;       // the key currently always runs eagerly
  std::string eager_only_reason;  // why (the failed call's message, or the caller's)
};

// GraphStateTable: the per-key state machine above.
class GraphStateTable {
 public:
  // GraphStateTable: mode kNone makes every run eager; warmup_runs (>= 0; negative is
  // treated as 0) eager runs of a key precede its capture.
  GraphStateTable(CudaGraphMode mode, int warmup_runs)
      : mode_(mode), warmup_runs_(warmup_runs < 0 ? 0 : warmup_runs) {}

  // Next: the action for the key's next run (adds the key on first sight).
  SegmentAction Next(const SegmentKey& key);

  // Outcomes, reported by the cache after acting on Next():
  // RecordEager: an eager run finished (counts toward warm-up while warming up).
  void RecordEager(const SegmentKey& key);
  // RecordCaptured: the key was captured and its graph launched once.
  void RecordCaptured(const SegmentKey& key);
  // RecordReplay: the key's graph was launched.
  void RecordReplay(const SegmentKey& key);
  // RecordCaptureFailure: capture failed; the key runs eagerly until invalidated.
  void RecordCaptureFailure(const SegmentKey& key, const std::string& reason);
  // MarkEagerOnly: the caller keeps a key out of graphs (dynamic shapes, e.g. dropless
  // MoE) until it is invalidated.
  void MarkEagerOnly(const SegmentKey& key, const std::string& reason);

  // Invalidate: every key back to warming up (eager-only marks cleared); returns the
  // number of captured graphs that must be dropped.
  int Invalidate();
  // Invalidate(key): the same for one key; true when it had a captured graph.
  bool Invalidate(const SegmentKey& key);

  // Stats: the key's counts, or nullptr for a key never seen.
  const SegmentStats* Stats(const SegmentKey& key) const;
  // Totals: the sum over keys (eager_only = any key is eager-only; no reason).
  SegmentStats Totals() const;
  // num_captured: keys whose graph is live now.
  int num_captured() const;
  // Report: one line per key, "F chunk 0 b 4 s 1024: eager 1, captures 1, launches 7,
  // failures 0, invalidations 0" plus ", eager-only: <reason>" where it applies.
  std::string Report() const;

  CudaGraphMode mode() const { return mode_; }
  int warmup_runs() const { return warmup_runs_; }

 private:
  enum class Phase { kWarmingUp, kCaptured, kEagerOnly };
  struct Entry {
    Phase phase = Phase::kWarmingUp;
    int warm_runs = 0;  // eager runs since the last (re)start of warm-up
    SegmentStats stats;
  };
  bool Reset(Entry& e);

  CudaGraphMode mode_;
  int warmup_runs_;
  std::map<SegmentKey, Entry> entries_;
};

}  // namespace mxmaca::kernels::cuda

#endif  // MXMACA_KERNELS_CUDA_GRAPH_STATE_H_
