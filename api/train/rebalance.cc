// api/train/rebalance.cc: see rebalance.h.
#include "api/train/rebalance.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace mxmaca::api {

absl::Status ParseForcedMove(const std::string& value, int32_t pipeline_size,
                             RebalancePolicy* policy) {
  const std::vector<std::string> parts = absl::StrSplit(value, ':');
  int64_t iter = 0, from = -1, to = -1;
  const bool ok = parts.size() == 3 && absl::SimpleAtoi(parts[0], &iter) &&
                  absl::SimpleAtoi(parts[1], &from) && absl::SimpleAtoi(parts[2], &to);
  if (!ok || iter < 1 || from < 0 || to < 0 || from >= pipeline_size || to >= pipeline_size ||
      std::abs(from - to) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--force-layer-move ", value, ": expected ITER:FROM:TO with ITER >= 1 and FROM, TO "
        "neighbouring pipeline stages in [0, ", pipeline_size, ")"));
  }
  policy->forced_iteration = iter;
  policy->forced_move = {static_cast<int32_t>(from), static_cast<int32_t>(to)};
  return absl::OkStatus();
}

std::optional<LayerMove> Rebalancer::Decide(int64_t iteration,
                                            const std::vector<double>& stage_busy,
                                            const layers::PipelinePlacement& placement,
                                            std::string* why) {
  if (policy_.forced_iteration && *policy_.forced_iteration == iteration) {
    *why = absl::StrCat("forced by --force-layer-move at iteration ", iteration);
    return policy_.forced_move;
  }
  const int32_t p = static_cast<int32_t>(stage_busy.size());
  if (policy_.threshold <= 0 || p < 2) return std::nullopt;
  const double mean = std::accumulate(stage_busy.begin(), stage_busy.end(), 0.0) / p;
  const int32_t slow = static_cast<int32_t>(
      std::max_element(stage_busy.begin(), stage_busy.end()) - stage_busy.begin());
  if (mean <= 0 || stage_busy[slow] <= mean * (1.0 + policy_.threshold)) {
    over_ = 0;
    return std::nullopt;
  }
  if (++over_ < policy_.window) return std::nullopt;
  over_ = 0;
  const int64_t n_from = placement.layouts[slow][0].num_layers();
  if (n_from <= 1) return std::nullopt;
  int32_t to = -1;
  for (int32_t n : {slow - 1, slow + 1}) {
    if (n < 0 || n >= p) continue;
    if (to < 0 || stage_busy[n] < stage_busy[to]) to = n;
  }
  // Move only if it is predicted to help: with per-layer times busy / layers on each
  // stage, the slower of the two afterwards must beat the slow stage now (this keeps a
  // balanced pair from trading a layer back and forth on noise).
  const int64_t n_to = std::max<int64_t>(1, placement.layouts[to][0].num_layers());
  const double from_after = stage_busy[slow] * static_cast<double>(n_from - 1) / n_from;
  const double to_after = stage_busy[to] * static_cast<double>(n_to + 1) / n_to;
  if (std::max(from_after, to_after) >= stage_busy[slow]) return std::nullopt;
  *why = absl::StrFormat(
      "stage %d busy %.1f ms vs mean %.1f ms (> %.0f%% over for %d iterations)", slow,
      stage_busy[slow] * 1e3, mean * 1e3, policy_.threshold * 100, policy_.window);
  return LayerMove{slow, to};
}

absl::StatusOr<layers::PipelinePlacement> ApplyMove(const layers::PipelinePlacement& placement,
                                                    const LayerMove& move) {
  const int32_t p = static_cast<int32_t>(placement.pipeline_model_parallel_size);
  if (placement.virtual_pipeline_model_parallel_size != 1 || placement.v_shape) {
    return absl::UnimplementedError("moving layers between stages needs one model chunk per stage");
  }
  if (move.from < 0 || move.from >= p || move.to < 0 || move.to >= p ||
      std::abs(move.from - move.to) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer move ", move.from, " -> ", move.to, ": not neighbouring stages"));
  }
  layers::PipelinePlacement out = placement;
  layers::StageLayout& from = out.layouts[move.from][0];
  layers::StageLayout& to = out.layouts[move.to][0];
  if (from.num_layers() <= 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stage ", move.from, " has ", from.num_layers(), " layer(s): none can move"));
  }
  if (move.to < move.from) {  // the first layer of `from` joins the end of `to`
    ++from.first_layer;
    ++to.last_layer;
  } else {  // the last layer of `from` joins the start of `to`
    --from.last_layer;
    --to.first_layer;
  }
  return out;
}

absl::StatusOr<std::vector<StageRank>> RebuildRanks(const layers::GptConfig& model,
                                                    const layers::PipelinePlacement& placement,
                                                    const StageRankOptions& options,
                                                    const std::vector<StageRank>& old) {
  if (options.distributed_optimizer) {
    return absl::UnimplementedError(
        "moving layers between stages is not supported with --use-distributed-optimizer");
  }
  MXMACA_ASSIGN_OR_RETURN(std::vector<StageRank> ranks, BuildStageRanks(model, placement, options));
  // (dp rank, tp rank, name) -> the old rank's store and optimizer entry holding it.
  struct Source {
    const layers::ParameterStore* store;
    int param;
    layers::AdamWOptimizer* optimizer;
    size_t entry;
  };
  std::map<std::tuple<int32_t, int32_t, std::string>, Source> sources;
  int64_t step = 0;
  for (const StageRank& r : old) {
    for (int c = 0; c < r.program->num_chunks(); ++c) {
      const layers::ParameterStore& store = r.program->parameters(c);
      layers::AdamWOptimizer& opt = *r.optimizers[c];
      step = opt.step();
      for (size_t k = 0; k < opt.tensors().size(); ++k) {
        const std::string& name = opt.tensors()[k].name;
        absl::StatusOr<int> id = store.Index(name);
        if (!id.ok()) continue;
        sources.emplace(std::make_tuple(r.data_parallel_rank, r.tensor_parallel_rank, name),
                        Source{&store, *id, &opt, k});
      }
    }
  }
  for (StageRank& r : ranks) {
    for (int c = 0; c < r.program->num_chunks(); ++c) {
      layers::ParameterStore& store = r.program->parameters(c);
      layers::AdamWOptimizer& opt = *r.optimizers[c];
      opt.set_step(step);
      for (size_t k = 0; k < opt.tensors().size(); ++k) {
        const std::string& name = opt.tensors()[k].name;
        auto it = sources.find(std::make_tuple(r.data_parallel_rank, r.tensor_parallel_rank, name));
        if (it == sources.end()) {
          return absl::InternalError(absl::StrCat("rebalance: no rank held ", name));
        }
        const Source& src = it->second;
        const int id = *store.Index(name);
        const int64_t n = store.info(id).numel;
        if (src.store->info(src.param).numel != n) {
          return absl::InternalError(absl::StrCat("rebalance: ", name, " changed size"));
        }
        std::copy(src.store->param(src.param), src.store->param(src.param) + n, store.param(id));
        absl::Span<float> m = src.optimizer->exp_avg(src.entry), v = src.optimizer->exp_avg_sq(src.entry);
        std::copy(m.begin(), m.end(), opt.exp_avg(k).begin());
        std::copy(v.begin(), v.end(), opt.exp_avg_sq(k).begin());
      }
    }
  }
  return ranks;
}

}  // namespace mxmaca::api
