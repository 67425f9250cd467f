// layers/moe/grouped_experts.cc: one block of BatchInvariantGemm calls per local expert.
#include "layers/moe/grouped_experts.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "layers/moe/expert_gemm.h"

namespace mxmaca::layers::moe {
namespace {

// The activation row by row (a fixed split of every row into vector/scalar parts, so a
// row's bits do not depend on the rows around it).
void ActivationForward(const kernels::ExecContext& ctx, const ExpertMlpConfig& c, const float* fc1,
                       float* act, int64_t rows) {
  const int64_t f = c.ffn_hidden_size;
  if (c.swiglu) {
    kernels::cpu::SwigluForward(ctx, fc1, act, rows, f);  // row-wise by construction
    return;
  }
  kernels::ExecContext one = ctx;
  one.num_threads = 1;
  for (int64_t r = 0; r < rows; ++r) {
    if (c.gelu_tanh_approximation) {
      kernels::cpu::GeluTanhForward(one, fc1 + r * f, act + r * f, f);
    } else {
      kernels::cpu::GeluForward(one, fc1 + r * f, act + r * f, f);
    }
  }
}

void ActivationBackward(const kernels::ExecContext& ctx, const ExpertMlpConfig& c, const float* fc1,
                        const float* d_act, float* d_fc1, int64_t rows) {
  const int64_t f = c.ffn_hidden_size;
  if (c.swiglu) {
    kernels::cpu::SwigluBackward(ctx, fc1, d_act, d_fc1, rows, f);
    return;
  }
  kernels::ExecContext one = ctx;
  one.num_threads = 1;
  for (int64_t r = 0; r < rows; ++r) {
    if (c.gelu_tanh_approximation) {
      kernels::cpu::GeluTanhBackward(one, fc1 + r * f, d_act + r * f, d_fc1 + r * f, f);
    } else {
      kernels::cpu::GeluBackward(one, fc1 + r * f, d_act + r * f, d_fc1 + r * f, f);
    }
  }
}

int64_t TotalRows(absl::Span<const int64_t> counts) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  return total;
}

}  // namespace

absl::Status ValidateExpertMlpConfig(const ExpertMlpConfig& c) {
  if (c.hidden_size < 1 || c.ffn_hidden_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("MoE experts: --hidden-size (", c.hidden_size,
                                                   ") and --moe-ffn-hidden-size (",
                                                   c.ffn_hidden_size, ") must be >= 1"));
  }
  return absl::OkStatus();
}

void GroupedExpertsForward(const kernels::ExecContext& ctx, const ExpertMlpConfig& c,
                           const ExpertWeights& w, absl::Span<const int64_t> counts, const float* x,
                           float* y, GroupedExpertsStash* stash) {
  const int64_t h = c.hidden_size, f = c.ffn_hidden_size, f1 = c.fc1_size();
  const int64_t rows_total = TotalRows(counts);
  stash->fc1_out.assign(rows_total * f1, 0.0f);
  stash->act_out.assign(rows_total * f, 0.0f);
  int64_t row = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t m = counts[i];
    if (m == 0) continue;
    float* fc1 = stash->fc1_out.data() + row * f1;
    float* act = stash->act_out.data() + row * f;
    float* out = y + row * h;
    BatchInvariantGemm(ctx, /*trans_b=*/true, m, f1, h, x + row * h, w.fc1_weight[i], fc1);
    if (c.add_bias) kernels::cpu::AddBias(ctx, fc1, w.fc1_bias[i], m, f1);
    ActivationForward(ctx, c, fc1, act, m);
    BatchInvariantGemm(ctx, /*trans_b=*/true, m, h, f, act, w.fc2_weight[i], out);
    if (c.add_bias) kernels::cpu::AddBias(ctx, out, w.fc2_bias[i], m, h);
    row += m;
  }
}

void GroupedExpertsBackwardInput(const kernels::ExecContext& ctx, const ExpertMlpConfig& c,
                                 const ExpertWeights& w, absl::Span<const int64_t> counts,
                                 const float* dy, float* dx, GroupedExpertsStash* stash) {
  const int64_t h = c.hidden_size, f = c.ffn_hidden_size, f1 = c.fc1_size();
  const int64_t rows_total = TotalRows(counts);
  stash->d_fc1.assign(rows_total * f1, 0.0f);
  std::vector<float> d_act;
  int64_t row = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t m = counts[i];
    if (m == 0) continue;
    d_act.assign(m * f, 0.0f);
    // d_act [m, f] = dY [m, h] · W2 [h, f]
    BatchInvariantGemm(ctx, /*trans_b=*/false, m, f, h, dy + row * h, w.fc2_weight[i],
                       d_act.data());
    float* d_fc1 = stash->d_fc1.data() + row * f1;
    ActivationBackward(ctx, c, stash->fc1_out.data() + row * f1, d_act.data(), d_fc1, m);
    // dX [m, h] = d_fc1 [m, f1] · W1 [f1, h]
    BatchInvariantGemm(ctx, /*trans_b=*/false, m, h, f1, d_fc1, w.fc1_weight[i], dx + row * h);
    row += m;
  }
}

void GroupedExpertsBackwardWeight(const kernels::ExecContext& ctx, const ExpertMlpConfig& c,
                                  absl::Span<const int64_t> counts, const float* x, const float* dy,
                                  const GroupedExpertsStash& stash, const ExpertGrads& g) {
  const int64_t h = c.hidden_size, f = c.ffn_hidden_size, f1 = c.fc1_size();
  int64_t row = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t m = counts[i];
    if (m == 0) continue;
    const float* dyi = dy + row * h;
    const float* act = stash.act_out.data() + row * f;
    const float* d_fc1 = stash.d_fc1.data() + row * f1;
    // dW2 [h, f] += dY^T [h, m] · act [m, f]
    kernels::cpu::Gemm(ctx, true, false, h, f, m, 1.0f, dyi, h, act, f, 1.0f, g.fc2_weight[i], f);
    // dW1 [f1, h] += d_fc1^T [f1, m] · X [m, h]
    kernels::cpu::Gemm(ctx, true, false, f1, h, m, 1.0f, d_fc1, f1, x + row * h, h, 1.0f,
                       g.fc1_weight[i], h);
    if (c.add_bias) {
      kernels::cpu::BiasGrad(ctx, dyi, m, h, g.fc2_bias[i]);
      kernels::cpu::BiasGrad(ctx, d_fc1, m, f1, g.fc1_bias[i]);
    }
    row += m;
  }
}

}  // namespace mxmaca::layers::moe
