// api/train/rebalance.h: runtime stage balancing — moving transformer layers between
// neighbouring pipeline stages between iterations (issue "Work-stealing pipeline
// scheduler ... runtime stage balancing").
//
// Policy: each iteration the coordinator reports every pipeline rank's busy time. When the
// slowest stage's busy time exceeds the mean by more than `threshold` (relative) for
// `window` iterations in a row, one layer moves from that stage to its less busy
// neighbour (the layer at the shared boundary, so every stage keeps a contiguous range and
// at least one layer) — if the move is predicted to lower the slower of the two stages
// (per-layer time = a stage's busy time / its layers), so a balanced pair does not trade
// a layer back and forth. A forced move (--force-layer-move ITER:FROM:TO) does the same at a
// given iteration, for tests.
//
// Mechanism: the new placement's ranks are built (api/train/stage_ranks.h) and every
// parameter and its Adam state is copied BY NAME from the old ranks of the same data- and
// tensor-parallel position (names are global, so a layer's tensors are the same whichever
// stage holds it); gradients are zero between iterations. Dropout masks are keyed by the
// global layer and W accumulates in micro-batch order, so the loss curve continues bit for
// bit. Not supported (an error): virtual stages (v > 1) and the distributed optimizer (its
// state is sharded by bucket ranges that change with the placement).
#ifndef MXMACA_API_TRAIN_REBALANCE_H_
#define MXMACA_API_TRAIN_REBALANCE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/train/stage_ranks.h"
#include "layers/gpt_config.h"
#include "layers/pipeline_placement.h"

namespace mxmaca::api {

// LayerMove: move the boundary layer between stages `from` and `to` (|from - to| == 1).
struct LayerMove {
  int32_t from = 0;
  int32_t to = 0;
};

// RebalancePolicy: see the file comment.
struct RebalancePolicy {
  double threshold = 0.0;  // 0 = automatic balancing off
  int32_t window = 3;
  // Forced move: at the end of iteration forced_iteration.
  std::optional<int64_t> forced_iteration;
  LayerMove forced_move;
};

// ParseForcedMove: "ITER:FROM:TO" with 0 <= FROM, TO < p and |FROM - TO| == 1.
// InvalidArgument naming the value otherwise.
absl::Status ParseForcedMove(const std::string& value, int32_t pipeline_size,
                             RebalancePolicy* policy);

// Rebalancer: the policy's state over iterations.
class Rebalancer {
 public:
  explicit Rebalancer(RebalancePolicy policy) : policy_(policy) {}

  // Decide: after `iteration` with per-stage busy seconds `stage_busy` and the current
  // placement: the move to make now, if any (with a one-line reason in *why).
  std::optional<LayerMove> Decide(int64_t iteration, const std::vector<double>& stage_busy,
                                  const layers::PipelinePlacement& placement, std::string* why);

 private:
  RebalancePolicy policy_;
  int32_t over_ = 0;  // consecutive iterations over the threshold
};

// ApplyMove: the placement with the boundary layer moved. InvalidArgument when the source
// stage would be left without transformer layers or the stages are not neighbours.
absl::StatusOr<layers::PipelinePlacement> ApplyMove(const layers::PipelinePlacement& placement,
                                                    const LayerMove& move);

// RebuildRanks: ranks for `placement` (BuildStageRanks with `options`) holding the state of
// `old` (parameters and Adam moments copied by name, optimizer step kept). Errors: those of
// BuildStageRanks; Unimplemented for v > 1 or the distributed optimizer; Internal for a
// tensor no old rank holds.
absl::StatusOr<std::vector<StageRank>> RebuildRanks(const layers::GptConfig& model,
                                                    const layers::PipelinePlacement& placement,
                                                    const StageRankOptions& options,
                                                    const std::vector<StageRank>& old);

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_REBALANCE_H_
