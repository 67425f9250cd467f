// layers/flops.cc: see flops.h.
#include "layers/flops.h"

namespace mxmaca::layers {

double NumFloatingPointOperations(const DenseGptShape& m, int64_t global_batch_size) {
  const double expansion_factor = 3.0 * 2.0 * 2.0;
  const double h = static_cast<double>(m.hidden_size);
  const double s = static_cast<double>(m.seq_length);
  const double L = static_cast<double>(m.num_layers);
  const double np = static_cast<double>(m.num_attention_heads);
  const double ng = static_cast<double>(m.num_query_groups);
  const double q_ratio = static_cast<double>(m.kv_channels) * np / h;
  const double gated = m.swiglu ? 1.5 : 1.0;
  const double attention = (1.0 + ng / np + s / h / 2.0) * q_ratio;
  const double moe_share = static_cast<double>(m.num_moe_layers) / L;
  const double mlp = (static_cast<double>(m.ffn_hidden_size) * (1.0 - moe_share) +
                      (static_cast<double>(m.moe_ffn_hidden_size * m.moe_router_topk) +
                       static_cast<double>(m.shared_expert_ffn_hidden_size)) *
                          moe_share) /
                     h * gated;
  const double logits = static_cast<double>(m.padded_vocab_size) / (2.0 * L * h);
  return expansion_factor * static_cast<double>(global_batch_size) * s * L * h * h *
         (attention + mlp + logits);
}

}  // namespace mxmaca::layers
