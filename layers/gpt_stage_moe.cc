// layers/gpt_stage_moe.cc: GptStage's Mixture-of-Experts bookkeeping (gpt_stage.h): the
// routing statistics of each MoE layer, the expert-data-parallel gradient sum, the experts'
// share of the gradient norm and the aux-loss-free expert-bias update.
#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "kernels/cpu/elementwise.h"
#include "layers/gpt_stage.h"

namespace mxmaca::layers {

void GptStage::AddMoEStats(int64_t local_layer, const moe::MoEMetrics& m) {
  const int64_t layer = layout_.first_layer + local_layer;
  for (moe::MoELayerStats& s : moe_stats_) {
    if (s.layer != layer) continue;
    ++s.calls;
    for (size_t e = 0; e < s.tokens_per_expert.size() && e < m.tokens_per_expert.size(); ++e) {
      s.tokens_per_expert[e] += static_cast<double>(m.tokens_per_expert[e]);
    }
    s.dropped_tokens += static_cast<double>(m.dropped_tokens);
    s.load_balancing_loss += m.load_balancing_loss;
    s.z_loss += m.z_loss;
    s.min_topk_margin = std::min(s.min_topk_margin, m.min_topk_margin);
  }
}

absl::Status GptStage::AllReduceExpertGrads() {
  if (!has_expert_region_ || expert_dp_.size <= 1) return absl::OkStatus();
  absl::Span<float> g = store_.grads_arena();
  const int64_t n = static_cast<int64_t>(g.size()) - expert_region_begin_;
  if (n <= 0) return absl::OkStatus();
  return AllReduceSum(expert_dp_, g.data() + expert_region_begin_, n);
}

double GptStage::ExpertGradNormSquared() {
  if (!has_expert_region_ || expert_dp_.rank != 0) return 0.0;
  // The same fp64 sum of squares the bucketed part of the norm uses (ShardGradNormSquared).
  return kernels::cpu::SumSquares(ctx_, store_.grads_arena().data() + expert_region_begin_,
                                  store_.arena_elements() - expert_region_begin_);
}

std::vector<std::pair<std::string, std::vector<float>*>> GptStage::ExpertBiasBuffers() {
  std::vector<std::pair<std::string, std::vector<float>*>> out;
  for (size_t i = 0; i < moe_layers_.size(); ++i) {
    moe::MoELayer* m = moe_layers_[i].get();
    if (m == nullptr || !m->config().router.enable_expert_bias) continue;
    out.emplace_back(moe::MoEParameterPrefix(layout_.first_layer + static_cast<int64_t>(i)) +
                         ".router.expert_bias",
                     &m->expert_bias());
  }
  return out;
}

absl::Status GptStage::UpdateExpertBias(
    const std::function<absl::Status(float* data, int64_t n)>& all_reduce) {
  for (const std::unique_ptr<moe::MoELayer>& m : moe_layers_) {
    if (m == nullptr || !m->config().router.enable_expert_bias) continue;
    std::vector<float> counts = m->local_tokens_per_expert();
    if (all_reduce) {
      MXMACA_RETURN_IF_ERROR(all_reduce(counts.data(), static_cast<int64_t>(counts.size())));
    }
    m->UpdateExpertBias(counts.data());
  }
  return absl::OkStatus();
}

std::vector<moe::MoELayerStats> GptStage::TakeMoEStats() {
  std::vector<moe::MoELayerStats> out = moe_stats_;
  for (moe::MoELayerStats& s : moe_stats_) {
    s.calls = 0;
    std::fill(s.tokens_per_expert.begin(), s.tokens_per_expert.end(), 0.0);
    s.dropped_tokens = s.load_balancing_loss = s.z_loss = 0.0;
    s.min_topk_margin = std::numeric_limits<double>::infinity();
  }
  return out;
}

}  // namespace mxmaca::layers
