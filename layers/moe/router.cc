// layers/moe/router.cc: TopKRouter forward/backward (see router.h for the formulas).
#include "layers/moe/router.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/gemm.h"
#include "layers/moe/expert_gemm.h"

namespace mxmaca::layers::moe {
namespace {

constexpr float kSigmoidNormEps = 1e-20f;       // Megatron's "+ 1e-20" in the sigmoid normalisation
constexpr int kSinkhornMaxIterations = 100000;  // guard only; Megatron loops until tol

float Sigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
}

// Softmax over n values in fp32 (max-subtracted, sum accumulated in double).
void Softmax(const float* x, int64_t n, float* y) {
  float m = x[0];
  for (int64_t i = 1; i < n; ++i) m = std::max(m, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    y[i] = std::exp(x[i] - m);
    sum += y[i];
  }
  const float inv = static_cast<float>(sum);
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] / inv;
}

// log(sum(exp(x))) in double.
double LogSumExp(const float* x, int64_t n) {
  double m = x[0];
  for (int64_t i = 1; i < n; ++i) m = std::max(m, static_cast<double>(x[i]));
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - m);
  return m + std::log(sum);
}

// Selection values for one token (before group limiting): what Megatron's compute_topk sees.
void SelectionValues(const RouterConfig& c, const float* logits, const float* expert_bias,
                     float* scores, float* values) {
  const int64_t e = c.num_experts;
  if (c.score_function == ScoreFunction::kSoftmax) {
    if (c.pre_softmax) {
      Softmax(logits, e, scores);
      std::copy(scores, scores + e, values);
    } else {
      std::copy(logits, logits + e, values);
    }
  } else {
    for (int64_t i = 0; i < e; ++i) scores[i] = Sigmoid(logits[i]);
    for (int64_t i = 0; i < e; ++i) {
      values[i] = expert_bias != nullptr ? scores[i] + expert_bias[i] : scores[i];
    }
  }
}

// TopKMargin: how far the top-k choice `sel` (k indices of values[0, n), TopKIndices's
// order) is from a tie: its smallest selected value minus the largest value it left out,
// ignoring left-out values <= `floor`; +inf when nothing is left out.
float TopKMargin(const float* values, int64_t n, const int32_t* sel, int64_t k,
                 float floor = -INFINITY) {
  if (k <= 0 || k >= n) return INFINITY;
  // A few experts per token: scan `sel`; capacity's k of T tokens: a map.
  std::vector<uint8_t> chosen;
  if (k > 8) {
    chosen.assign(n, 0);
    for (int64_t i = 0; i < k; ++i) chosen[sel[i]] = 1;
  }
  auto selected = [&](int64_t i) {
    if (!chosen.empty()) return chosen[i] != 0;
    for (int64_t j = 0; j < k; ++j) {
      if (sel[j] == i) return true;
    }
    return false;
  };
  const float smallest = values[sel[k - 1]];  // TopKIndices: descending
  float best_left = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    if (values[i] > floor && values[i] > best_left && !selected(i)) best_left = values[i];
  }
  return best_left == -INFINITY ? INFINITY : smallest - best_left;
}

// Megatron's group_limited_topk or a plain top-k on `values` (may be modified); returns the
// smaller TopKMargin of the group choice and the expert choice.
float SelectExperts(const RouterConfig& c, float* values, int32_t* sel) {
  const int64_t e = c.num_experts, k = c.topk;
  float group_margin = INFINITY;
  if (c.num_groups > 0 && c.group_topk > 0) {
    const int64_t g = c.num_groups, per = e / g, kg = k / c.group_topk;
    std::vector<float> group_scores(g);
    std::vector<int32_t> idx(kg);
    for (int64_t gi = 0; gi < g; ++gi) {
      TopKIndices(values + gi * per, per, kg, idx.data());
      float sum = 0.0f;
      for (int64_t j = 0; j < kg; ++j) sum += values[gi * per + idx[j]];
      group_scores[gi] = sum;
    }
    std::vector<int32_t> groups(c.group_topk);
    TopKIndices(group_scores.data(), g, c.group_topk, groups.data());
    group_margin = TopKMargin(group_scores.data(), g, groups.data(), c.group_topk);
    std::vector<uint8_t> keep(g, 0);
    for (int32_t gi : groups) keep[gi] = 1;
    for (int64_t i = 0; i < e; ++i) {
      if (!keep[i / per]) values[i] = -INFINITY;
    }
  }
  TopKIndices(values, e, k, sel);
  return std::min(group_margin, TopKMargin(values, e, sel, k));
}

bool UsesAuxLoss(const RouterConfig& c, const RouterCall& call) {
  return call.training && c.aux_loss_coeff > 0.0 &&
         (c.load_balancing_type == LoadBalancingType::kAuxLoss ||
          c.load_balancing_type == LoadBalancingType::kSeqAuxLoss ||
          c.load_balancing_type == LoadBalancingType::kGlobalAuxLoss);
}

// compute_routing_scores_for_aux_loss for one token: softmax, or sigmoid normalised.
void AuxScores(const RouterConfig& c, const float* logits, float* scores) {
  const int64_t e = c.num_experts;
  if (c.score_function == ScoreFunction::kSoftmax) {
    Softmax(logits, e, scores);
  } else {
    float sum = 0.0f;
    for (int64_t i = 0; i < e; ++i) {
      scores[i] = Sigmoid(logits[i]);
      sum += scores[i];
    }
    for (int64_t i = 0; i < e; ++i) scores[i] = scores[i] / (sum + kSigmoidNormEps);
  }
}

// Megatron's sinkhorn (fp32) on logits [T, E]; returns the normalised cost [T, E].
std::vector<float> Sinkhorn(const float* logits, int64_t t, int64_t e, double tol) {
  std::vector<float> cost(t * e);
  for (int64_t i = 0; i < t * e; ++i) cost[i] = std::exp(logits[i]);
  std::vector<float> d0(t, 1.0f), d1(e, 1.0f), d1_old(e, 1.0f);
  const float eps = 1e-8f;
  const float inv_t = static_cast<float>(1.0 / t), inv_e = static_cast<float>(1.0 / e);
  double error = 1e9;
  for (int it = 0; error > tol && it < kSinkhornMaxIterations; ++it) {
    for (int64_t r = 0; r < t; ++r) {
      float s = 0.0f;
      for (int64_t c = 0; c < e; ++c) s += d1[c] * cost[r * e + c];
      d0[r] = inv_t / (s + eps);
    }
    std::vector<float> col(e, 0.0f);
    for (int64_t r = 0; r < t; ++r) {
      for (int64_t c = 0; c < e; ++c) col[c] += d0[r] * cost[r * e + c];
    }
    double err = 0.0;
    for (int64_t c = 0; c < e; ++c) {
      d1[c] = inv_e / (col[c] + eps);
      err += std::abs(d1_old[c] - d1[c]);
    }
    error = err / e;
    d1_old = d1;
  }
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t c = 0; c < e; ++c) cost[r * e + c] = d1[c] * cost[r * e + c] * d0[r];
  }
  return cost;
}

bool IsSinkhorn(const RouterConfig& c) {
  return c.load_balancing_type == LoadBalancingType::kSinkhorn;
}

// Adds to dl [E] the gradient through y = softmax(logits) given dy [E] (y recomputed).
void SoftmaxBackwardAdd(const float* logits, const float* dy, int64_t e, float scale, float* dl) {
  std::vector<float> y(e);
  Softmax(logits, e, y.data());
  double dot = 0.0;
  for (int64_t i = 0; i < e; ++i) dot += static_cast<double>(dy[i]) * y[i];
  for (int64_t i = 0; i < e; ++i) {
    dl[i] += scale * static_cast<float>(y[i] * (dy[i] - dot));
  }
}

}  // namespace

void TopKIndices(const float* values, int64_t n, int64_t k, int32_t* out) {
  std::vector<int32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [values](int32_t a, int32_t b) { return values[a] > values[b]; });
  std::copy(idx.begin(), idx.begin() + k, out);
}

int64_t GetCapacity(int64_t num_tokens, int64_t num_experts, double capacity_factor) {
  return static_cast<int64_t>(
      std::ceil(static_cast<double>(num_tokens) / num_experts * capacity_factor));
}

absl::Status ValidateRouterConfig(const RouterConfig& c) {
  auto bad = [](auto... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (c.hidden_size < 1) return bad("MoE router: --hidden-size must be >= 1, got ", c.hidden_size);
  if (c.num_experts < 1) return bad("MoE router: --num-experts must be >= 1, got ", c.num_experts);
  if (c.topk < 1 || c.topk > c.num_experts) {
    return bad("MoE router: --moe-router-topk must be in [1, --num-experts = ", c.num_experts,
               "], got ", c.topk);
  }
  if (c.num_groups > 0 || c.group_topk > 0) {
    if (c.num_groups < 1 || c.group_topk < 1) {
      return bad("MoE router: --moe-router-num-groups (", c.num_groups,
                 ") and --moe-router-group-topk (", c.group_topk, ") must be set together");
    }
    if (c.num_experts % c.num_groups != 0) {
      return bad("MoE router: --num-experts ", c.num_experts,
                 " is not divisible by --moe-router-num-groups ", c.num_groups);
    }
    if (c.group_topk > c.num_groups) {
      return bad("MoE router: --moe-router-group-topk ", c.group_topk,
                 " exceeds --moe-router-num-groups ", c.num_groups);
    }
    if (c.topk % c.group_topk != 0 || c.topk / c.group_topk > c.num_experts / c.num_groups) {
      return bad("MoE router: --moe-router-topk ", c.topk,
                 " must be a multiple of --moe-router-group-topk ", c.group_topk,
                 " with topk / group_topk <= experts per group (", c.num_experts / c.num_groups,
                 ")");
    }
  }
  if (c.pre_softmax && c.score_function != ScoreFunction::kSoftmax) {
    return bad("MoE router: --moe-router-pre-softmax needs --moe-router-score-function softmax");
  }
  if (c.enable_expert_bias && c.score_function != ScoreFunction::kSigmoid) {
    return bad(
        "MoE router: --moe-router-enable-expert-bias needs "
        "--moe-router-score-function sigmoid (Megatron applies the bias only there)");
  }
  if (IsSinkhorn(c) && c.aux_loss_coeff != 0.0) {
    return bad("MoE router: sinkhorn load balancing needs --moe-aux-loss-coeff 0, got ",
               c.aux_loss_coeff);
  }
  if (c.capacity_factor.has_value() && !(*c.capacity_factor > 0.0)) {
    return bad("MoE router: --moe-expert-capacity-factor must be > 0, got ", *c.capacity_factor);
  }
  if (c.pad_to_capacity && !c.capacity_factor.has_value()) {
    return bad(
        "MoE router: --moe-pad-expert-input-to-capacity needs "
        "--moe-expert-capacity-factor");
  }
  if (c.aux_loss_coeff < 0.0 || c.z_loss_coeff < 0.0 || c.bias_update_rate < 0.0) {
    return bad("MoE router: negative --moe-aux-loss-coeff (", c.aux_loss_coeff,
               "), --moe-z-loss-coeff (", c.z_loss_coeff, ") or --moe-router-bias-update-rate (",
               c.bias_update_rate, ")");
  }
  return absl::OkStatus();
}

absl::Status RouterForward(const kernels::ExecContext& ctx, const RouterConfig& c,
                           const RouterCall& call, const float* x, const float* weight,
                           RouterState* st) {
  const int64_t t = call.num_tokens, e = c.num_experts, k = c.topk, h = c.hidden_size;
  if (t < 1) return absl::InvalidArgumentError(absl::StrCat("MoE router: ", t, " tokens"));
  const bool seq_aux =
      UsesAuxLoss(c, call) && c.load_balancing_type == LoadBalancingType::kSeqAuxLoss;
  if (seq_aux && (call.seq_length < 1 || t % call.seq_length != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("MoE router: seq_aux_loss needs the token count ", t,
                     " to be a multiple of the sequence length ", call.seq_length));
  }
  if (call.token_group_size > 1 && UsesAuxLoss(c, call) &&
      (c.load_balancing_type != LoadBalancingType::kAuxLoss || !call.reduce_token_counts)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MoE router: a token group of ", call.token_group_size,
        " ranks (expert parallelism with sequence parallelism) supports "
        "--moe-router-load-balancing-type aux_loss (with the group's count reduction) or none"));
  }
  const bool use_bias = c.enable_expert_bias && !IsSinkhorn(c);
  if (use_bias && call.expert_bias == nullptr) {
    return absl::InvalidArgumentError("MoE router: expert bias enabled but not given");
  }
  st->num_tokens = t;
  st->logits.assign(t * e, 0.0f);
  kernels::ExecContext fp32 = ctx;
  fp32.precision = kernels::Precision::kFp32;  // --moe-router-dtype fp32
  BatchInvariantGemm(fp32, /*trans_b=*/true, t, e, h, x, weight, st->logits.data());
  for (int64_t i = 0; i < t * e; ++i) {
    if (!std::isfinite(st->logits[i])) {
      return absl::InvalidArgumentError(absl::StrCat("MoE router: logit of token ", i / e,
                                                     ", expert ", i % e, " is ", st->logits[i]));
    }
  }
  const float* logits = st->logits.data();

  // Selection and probs.
  st->top_indices.assign(t * k, 0);
  st->probs.assign(t * e, 0.0f);
  float margin = INFINITY;
  std::vector<float> scores(e), values(e), sel_probs(k);
  if (IsSinkhorn(c)) {
    std::vector<float> norm;
    if (call.training) norm = Sinkhorn(logits, t, e, 1e-4);
    for (int64_t r = 0; r < t; ++r) {
      const float* l = logits + r * e;
      if (k == 1) {
        for (int64_t i = 0; i < e; ++i) scores[i] = Sigmoid(l[i]);
      } else {
        Softmax(l, e, scores.data());
      }
      int32_t* sel = &st->top_indices[r * k];
      const float* chosen_by = call.training ? &norm[r * e] : scores.data();
      TopKIndices(chosen_by, e, k, sel);
      margin = std::min(margin, TopKMargin(chosen_by, e, sel, k));
      for (int64_t i = 0; i < k; ++i) st->probs[r * e + sel[i]] = scores[sel[i]];
    }
  } else {
    for (int64_t r = 0; r < t; ++r) {
      const float* l = logits + r * e;
      SelectionValues(c, l, use_bias ? call.expert_bias : nullptr, scores.data(), values.data());
      int32_t* sel = &st->top_indices[r * k];
      margin = std::min(margin, SelectExperts(c, values.data(), sel));
      if (c.score_function == ScoreFunction::kSoftmax) {
        if (c.pre_softmax) {
          for (int64_t i = 0; i < k; ++i) sel_probs[i] = scores[sel[i]];
        } else {
          std::vector<float> sl(k);
          for (int64_t i = 0; i < k; ++i) sl[i] = l[sel[i]];
          Softmax(sl.data(), k, sel_probs.data());
        }
      } else {
        float sum = 0.0f;
        for (int64_t i = 0; i < k; ++i) {
          sel_probs[i] = scores[sel[i]];
          sum += sel_probs[i];
        }
        if (k > 1) {
          for (int64_t i = 0; i < k; ++i) sel_probs[i] = sel_probs[i] / (sum + kSigmoidNormEps);
        }
      }
      if (c.topk_scaling_factor != 0.0) {
        const float sf = static_cast<float>(c.topk_scaling_factor);
        for (int64_t i = 0; i < k; ++i) sel_probs[i] *= sf;
      }
      for (int64_t i = 0; i < k; ++i) st->probs[r * e + sel[i]] = sel_probs[i];
    }
  }
  st->routing_map.assign(t * e, 0);
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t i = 0; i < k; ++i) st->routing_map[r * e + st->top_indices[r * k + i]] = 1;
  }
  st->routed_tokens_per_expert.assign(e, 0);
  for (int64_t i = 0; i < t * e; ++i) st->routed_tokens_per_expert[i % e] += st->routing_map[i];

  // Capacity: apply_router_token_dropping.
  st->capacity = -1;
  st->dropped_tokens = 0;
  if (c.capacity_factor.has_value()) {
    const int64_t cap = GetCapacity(t * k, e, *c.capacity_factor);
    st->capacity = cap;
    std::vector<uint8_t> keep(t * e, 1);
    if (cap <= t) {
      std::fill(keep.begin(), keep.end(), 0);
      std::vector<float> col(t);
      std::vector<int32_t> best(cap);
      for (int64_t ex = 0; ex < e; ++ex) {
        for (int64_t r = 0; r < t; ++r) {
          col[r] = c.drop_policy == TokenDropPolicy::kProbs
                       ? st->probs[r * e + ex]
                       : static_cast<float>(st->routing_map[r * e + ex]);
        }
        TopKIndices(col.data(), t, cap, best.data());
        // Routed tokens only (the position policy's 0/1 ranks are exact).
        if (c.drop_policy == TokenDropPolicy::kProbs) {
          margin = std::min(margin, TopKMargin(col.data(), t, best.data(), cap, 0.0f));
        }
        for (int32_t r : best) keep[r * e + ex] = 1;
      }
    }
    for (int64_t i = 0; i < t * e; ++i) {
      const uint8_t final_map = c.pad_to_capacity ? keep[i] : (st->routing_map[i] & keep[i]);
      if (st->routing_map[i] && !keep[i]) ++st->dropped_tokens;
      st->routing_map[i] = final_map;
      if (!final_map) st->probs[i] = 0.0f;
    }
  }
  st->tokens_per_expert.assign(e, 0);
  for (int64_t i = 0; i < t * e; ++i) st->tokens_per_expert[i % e] += st->routing_map[i];

  // z loss.
  st->z_loss = 0.0;
  st->lse.clear();
  if (call.training && c.z_loss_coeff > 0.0) {
    st->lse.resize(t);
    double sum = 0.0;
    for (int64_t r = 0; r < t; ++r) {
      st->lse[r] = LogSumExp(logits + r * e, e);
      sum += st->lse[r] * st->lse[r];
    }
    st->z_loss = c.z_loss_coeff * sum / t;
  }

  // Aux losses.
  st->aux_loss = 0.0;
  st->aux_grad.clear();
  if (UsesAuxLoss(c, call)) {
    std::vector<float> aux_scores(t * e);
    std::vector<uint8_t> aux_map(t * e, 0);
    std::vector<int32_t> sel(k);
    for (int64_t r = 0; r < t; ++r) {
      AuxScores(c, logits + r * e, &aux_scores[r * e]);
      TopKIndices(&aux_scores[r * e], e, k, sel.data());
      margin = std::min(margin, TopKMargin(&aux_scores[r * e], e, sel.data(), k));
      for (int32_t s : sel) aux_map[r * e + s] = 1;
    }
    st->aux_grad.assign(t * e, 0.0f);
    const double coeff = c.aux_loss_coeff;
    const int64_t groups = seq_aux ? t / call.seq_length : 1;
    const int64_t rows = t / groups;  // tokens per group (a sequence, or all)
    double total = static_cast<double>(seq_aux ? call.seq_length : t);
    if (call.token_group_size > 1) total *= static_cast<double>(call.token_group_size);
    const bool global = c.load_balancing_type == LoadBalancingType::kGlobalAuxLoss;
    if (global && call.global.total_num_tokens > 0.0) total = call.global.total_num_tokens;
    const double scale = e * coeff / (k * total * total) / groups;
    double loss = 0.0;
    std::vector<double> tpe(e), psum(e);
    for (int64_t gi = 0; gi < groups; ++gi) {
      std::fill(tpe.begin(), tpe.end(), 0.0);
      std::fill(psum.begin(), psum.end(), 0.0);
      for (int64_t r = gi * rows; r < (gi + 1) * rows; ++r) {
        for (int64_t ex = 0; ex < e; ++ex) {
          tpe[ex] += aux_map[r * e + ex];
          psum[ex] += aux_scores[r * e + ex];
        }
      }
      if (global && call.global.tokens_per_expert != nullptr) {
        for (int64_t ex = 0; ex < e; ++ex) tpe[ex] = call.global.tokens_per_expert[ex];
      }
      if (call.token_group_size > 1) {  // aux_loss only (checked above): one group
        std::vector<float> counts(tpe.begin(), tpe.end());
        MXMACA_RETURN_IF_ERROR(call.reduce_token_counts(counts.data(), e));
        for (int64_t ex = 0; ex < e; ++ex) tpe[ex] = counts[ex];
      }
      for (int64_t ex = 0; ex < e; ++ex) loss += psum[ex] * tpe[ex];
      for (int64_t r = gi * rows; r < (gi + 1) * rows; ++r) {
        for (int64_t ex = 0; ex < e; ++ex) {
          st->aux_grad[r * e + ex] = static_cast<float>(scale * tpe[ex]);
        }
      }
    }
    st->aux_loss = loss * scale;
  }
  st->min_topk_margin = margin;
  return absl::OkStatus();
}

void RouterBackward(const kernels::ExecContext& ctx, const RouterConfig& c, const RouterState& st,
                    const float* x, const float* weight, const float* d_probs,
                    double aux_loss_grad_scale, float* dx, float* dweight,
                    std::vector<float>* d_logits_out) {
  const int64_t t = st.num_tokens, e = c.num_experts, k = c.topk, h = c.hidden_size;
  std::vector<float> dl(t * e, 0.0f);
  const float gscale = static_cast<float>(aux_loss_grad_scale);
  std::vector<float> g(k), scores(e), dfull(e), sl(k), p(k);
  for (int64_t r = 0; r < t; ++r) {
    const float* l = st.logits.data() + r * e;
    float* d = dl.data() + r * e;
    const int32_t* sel = st.top_indices.data() + r * k;
    bool any = false;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t at = r * e + sel[i];
      g[i] = (d_probs != nullptr && st.routing_map[at]) ? d_probs[at] : 0.0f;
      any = any || g[i] != 0.0f;
    }
    if (any) {
      if (IsSinkhorn(c)) {
        if (k == 1) {
          const float s = Sigmoid(l[sel[0]]);
          d[sel[0]] += g[0] * s * (1.0f - s);
        } else {
          std::fill(dfull.begin(), dfull.end(), 0.0f);
          for (int64_t i = 0; i < k; ++i) dfull[sel[i]] = g[i];
          SoftmaxBackwardAdd(l, dfull.data(), e, 1.0f, d);
        }
      } else {
        if (c.topk_scaling_factor != 0.0) {
          for (int64_t i = 0; i < k; ++i) g[i] *= static_cast<float>(c.topk_scaling_factor);
        }
        if (c.score_function == ScoreFunction::kSoftmax && !c.pre_softmax) {
          for (int64_t i = 0; i < k; ++i) sl[i] = l[sel[i]];
          Softmax(sl.data(), k, p.data());
          double dot = 0.0;
          for (int64_t i = 0; i < k; ++i) dot += static_cast<double>(g[i]) * p[i];
          for (int64_t i = 0; i < k; ++i) d[sel[i]] += static_cast<float>(p[i] * (g[i] - dot));
        } else if (c.score_function == ScoreFunction::kSoftmax) {
          std::fill(dfull.begin(), dfull.end(), 0.0f);
          for (int64_t i = 0; i < k; ++i) dfull[sel[i]] = g[i];
          SoftmaxBackwardAdd(l, dfull.data(), e, 1.0f, d);
        } else {
          float sum = 0.0f;
          double gr = 0.0;
          for (int64_t i = 0; i < k; ++i) {
            p[i] = Sigmoid(l[sel[i]]);
            sum += p[i];
            gr += static_cast<double>(g[i]) * p[i];
          }
          const double den = static_cast<double>(sum + kSigmoidNormEps);
          for (int64_t i = 0; i < k; ++i) {
            const double dr = k > 1 ? g[i] / den - gr / (den * den) : g[i];
            d[sel[i]] += static_cast<float>(dr * p[i] * (1.0f - p[i]));
          }
        }
      }
    }
    if (!st.aux_grad.empty() && gscale != 0.0f) {
      const float* a = st.aux_grad.data() + r * e;
      if (c.score_function == ScoreFunction::kSoftmax) {
        SoftmaxBackwardAdd(l, a, e, gscale, d);
      } else {
        float sum = 0.0f;
        double ar = 0.0;
        for (int64_t i = 0; i < e; ++i) {
          scores[i] = Sigmoid(l[i]);
          sum += scores[i];
          ar += static_cast<double>(a[i]) * scores[i];
        }
        const double den = static_cast<double>(sum + kSigmoidNormEps);
        for (int64_t i = 0; i < e; ++i) {
          const double dr = a[i] / den - ar / (den * den);
          d[i] += gscale * static_cast<float>(dr * scores[i] * (1.0f - scores[i]));
        }
      }
    }
    if (!st.lse.empty() && gscale != 0.0f) {
      Softmax(l, e, scores.data());
      const double f = c.z_loss_coeff / t * 2.0 * st.lse[r];
      for (int64_t i = 0; i < e; ++i) d[i] += gscale * static_cast<float>(f * scores[i]);
    }
  }
  kernels::ExecContext fp32 = ctx;
  fp32.precision = kernels::Precision::kFp32;
  // dx [T, h] += dl [T, E] · W [E, h];  dW [E, h] += dl^T · x [T, h].
  if (dx != nullptr) {
    kernels::cpu::Gemm(fp32, false, false, t, h, e, 1.0f, dl.data(), e, weight, h, 1.0f, dx, h);
  }
  if (dweight != nullptr) RouterWeightGrad(ctx, c, t, dl.data(), x, dweight);
  if (d_logits_out != nullptr) *d_logits_out = std::move(dl);
}

void RouterWeightGrad(const kernels::ExecContext& ctx, const RouterConfig& c, int64_t num_tokens,
                      const float* d_logits, const float* x, float* dweight) {
  kernels::ExecContext fp32 = ctx;
  fp32.precision = kernels::Precision::kFp32;
  kernels::cpu::Gemm(fp32, true, false, c.num_experts, c.hidden_size, num_tokens, 1.0f, d_logits,
                     c.num_experts, x, c.hidden_size, 1.0f, dweight, c.hidden_size);
}

void UpdateExpertBias(const float* tokens_per_expert, int64_t num_experts, double update_rate,
                      float* bias) {
  float sum = 0.0f;
  for (int64_t i = 0; i < num_experts; ++i) sum += tokens_per_expert[i];
  const float mean = sum / static_cast<float>(num_experts);
  const float rate = static_cast<float>(update_rate);
  for (int64_t i = 0; i < num_experts; ++i) {
    const float offset = mean - tokens_per_expert[i];
    const float sign = offset > 0.0f ? 1.0f : (offset < 0.0f ? -1.0f : 0.0f);
    bias[i] = bias[i] + sign * rate;
  }
}

}  // namespace mxmaca::layers::moe
