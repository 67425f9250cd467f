// layers/moe/moe_stats.h: what one MoE layer reports for logging (issue 7, "Per-layer
// metrics in the log"), summed over the training micro-batches since the last report.
#ifndef MXMACA_LAYERS_MOE_MOE_STATS_H_
#define MXMACA_LAYERS_MOE_MOE_STATS_H_

#include <cstdint>
#include <limits>
#include <vector>

namespace mxmaca::layers::moe {

struct MoELayerStats {
  int64_t layer = 0;                       // global layer number (0-based)
  int64_t calls = 0;                       // training micro-batches folded in
  std::vector<double> tokens_per_expert;   // [E] rows each expert processed, summed
  double dropped_tokens = 0.0;             // (token, expert) choices dropped by capacity
  double load_balancing_loss = 0.0;        // aux loss / coeff (Megatron's logged value), summed
  double z_loss = 0.0;                     // z-loss / coeff, summed
  // The smallest MoEMetrics::min_topk_margin of those micro-batches (+inf: none).
  double min_topk_margin = std::numeric_limits<double>::infinity();
};

}  // namespace mxmaca::layers::moe

#endif  // MXMACA_LAYERS_MOE_MOE_STATS_H_
