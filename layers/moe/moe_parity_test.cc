// Parity of MoELayer (EP = 1) against the independent PyTorch reference
// layers/moe/moe_reference.py (float64, autograd) on fresh seeded random inputs: outputs,
// routing map and probs, aux and z losses, dx and every parameter gradient.
//
// Tolerances (fp32 against float64):
//  - routing_map and tokens_per_expert: exact (discrete decisions; ties resolved by the
//    same rule on both sides; random inputs have no near-ties at fp32 resolution).
//  - probs: max abs 2e-6. Probabilities are <= max(1, scaling) and come from an fp32
//    softmax/sigmoid of fp32 logits (h = 16 products): a few ulp of 1 (1.2e-7 each).
//  - y, dx, gradients: norm-wise relative 2e-5. Every value is a chain of fp32 sums of
//    at most max(h, f1, T) = 48 terms; the measured error is ~1e-7..1e-6 and a wrong
//    formula (a missing term, a wrong mask, a transposed weight) shows up as O(1e-2..1).
//    Gradients whose reference is exactly 0 (experts that got no token) must be 0.
//  - aux and z loss: relative 1e-5 (sums of T*E fp32 terms accumulated in double).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "layers/moe/moe_layer.h"
#include "layers/parameter_store.h"

namespace mxmaca::layers::moe {
namespace {

constexpr int64_t kLayer = 3;

enum class Inputs { kRandom, kTiedRouter, kNegativeLogits, kSameExpert };

struct Case {
  std::string name;
  MoELayerConfig config;
  Inputs inputs = Inputs::kRandom;
  int64_t b = 2, s = 12;
  double grad_scale = 0.5;
  bool zero_dy = false;
  bool random_expert_bias = false;
  bool global_counts = false;
  uint32_t seed = 1;
};

MoELayerConfig BaseConfig() {
  MoELayerConfig c;
  c.router.hidden_size = 16;
  c.router.num_experts = 6;
  c.router.topk = 2;
  c.router.load_balancing_type = LoadBalancingType::kAuxLoss;
  c.router.aux_loss_coeff = 0.3;
  c.expert.hidden_size = 16;
  c.expert.ffn_hidden_size = 24;
  c.expert.add_bias = true;
  c.init_method_std = 0.3;
  c.num_layers = 2;
  return c;
}

std::string TempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/moe_parity_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  REQUIRE(mkdtemp(buf.data()) != nullptr);
  return std::string(buf.data());
}

void WriteF32(const std::string& dir, const std::string& name, const float* data, int64_t n) {
  std::ofstream out(dir + "/" + name + ".f32", std::ios::binary);
  out.write(reinterpret_cast<const char*>(data), sizeof(float) * n);
  REQUIRE(out.good());
}

std::vector<double> ReadF64(const std::string& dir, const std::string& name) {
  std::ifstream in(dir + "/" + name + ".f64", std::ios::binary | std::ios::ate);
  INFO("reference output " << name);
  REQUIRE(in.good());
  const std::streamsize bytes = in.tellg();
  in.seekg(0);
  std::vector<double> v(bytes / sizeof(double));
  in.read(reinterpret_cast<char*>(v.data()), bytes);
  return v;
}

std::string ScriptPath() {
  const std::string rel = "layers/moe/moe_reference.py";
  if (std::ifstream(rel).good()) return rel;
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") + "/mxmaca/" + rel;
}

double RelError(const float* got, const std::vector<double>& want) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

void RunCase(const Case& tc) {
  INFO("case " << tc.name);
  const MoELayerConfig& c = tc.config;
  const int64_t t = tc.b * tc.s, h = c.router.hidden_size, e = c.router.num_experts;
  ParameterStore store;
  REQUIRE(RegisterMoEParameters(c, kLayer, &store).ok());
  store.Finalize();
  store.Initialize(1000 + tc.seed);

  std::mt19937 gen(tc.seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(t * h), dy(t * h);
  for (float& v : x) v = normal(gen);
  for (float& v : dy) v = tc.zero_dy ? 0.0f : normal(gen);
  const int router = *store.Index(MoEParameterPrefix(kLayer) + ".router.weight");
  float* wg = store.param(router);
  switch (tc.inputs) {
    case Inputs::kRandom:
      break;
    case Inputs::kTiedRouter:  // experts 1, 3, 5 identical; 0 and 2 identical
      for (int64_t j = 0; j < h; ++j) {
        wg[3 * h + j] = wg[5 * h + j] = wg[1 * h + j];
        wg[2 * h + j] = wg[0 * h + j];
      }
      break;
    case Inputs::kNegativeLogits:  // x > 0, W_g < 0: every logit negative
      for (float& v : x) v = std::abs(v) + 0.1f;
      for (int64_t i = 0; i < e * h; ++i) wg[i] = -std::abs(wg[i]) - 0.01f;
      break;
    case Inputs::kSameExpert:  // x > 0, only expert 2's row positive: all choose 2 first
      for (float& v : x) v = std::abs(v) + 0.1f;
      for (int64_t i = 0; i < e * h; ++i) {
        wg[i] = i / h == 2 ? std::abs(wg[i]) + 0.05f : -std::abs(wg[i]);
      }
      break;
  }

  absl::StatusOr<MoELayer> layer_or = MoELayer::Create(c, kLayer, &store);
  REQUIRE(layer_or.ok());
  MoELayer& layer = *layer_or;
  std::uniform_real_distribution<float> small(-0.05f, 0.05f);
  if (tc.random_expert_bias) {
    for (float& v : layer.expert_bias()) v = small(gen);
  }
  std::vector<float> global_tpe(e);
  MoECall call;
  call.num_tokens = t;
  call.seq_length = tc.s;
  if (tc.global_counts) {
    std::uniform_int_distribution<int> count(0, 12);
    for (float& v : global_tpe) v = static_cast<float>(count(gen));
    call.global.tokens_per_expert = global_tpe.data();
    call.global.total_num_tokens = 3.0 * t;
  }

  kernels::ExecContext ctx;
  std::vector<float> y(t * h), dx(t * h);
  MoEStash stash;
  MoEMetrics metrics;
  REQUIRE(layer.Forward(ctx, call, x.data(), y.data(), &stash, &metrics).ok());
  REQUIRE(layer.BackwardInput(ctx, x.data(), dy.data(), tc.grad_scale, &stash, dx.data()).ok());
  REQUIRE(layer.BackwardWeight(ctx, x.data(), dy.data(), stash).ok());

  // Inputs for the reference.
  const std::string dir = TempDir();
  {
    std::ofstream params(dir + "/params.txt");
    const RouterConfig& r = c.router;
    auto put = [&](const char* k, double v) { params << k << " " << v << "\n"; };
    params.precision(17);
    put("tokens", t);
    put("hidden", h);
    put("experts", e);
    put("topk", r.topk);
    put("ffn", c.expert.ffn_hidden_size);
    put("shared_ffn", c.shared_expert_ffn_hidden_size);
    put("swiglu", c.expert.swiglu);
    put("gelu_tanh", c.expert.gelu_tanh_approximation);
    put("bias", c.expert.add_bias);
    put("score_sigmoid", r.score_function == ScoreFunction::kSigmoid);
    put("pre_softmax", r.pre_softmax);
    put("num_groups", r.num_groups);
    put("group_topk", r.group_topk);
    put("scaling", r.topk_scaling_factor);
    put("lb_type", static_cast<int>(r.load_balancing_type));
    put("aux_coeff", r.aux_loss_coeff);
    put("z_coeff", r.z_loss_coeff);
    put("expert_bias", r.enable_expert_bias);
    put("capacity_factor", r.capacity_factor.value_or(0.0));
    put("drop_position", r.drop_policy == TokenDropPolicy::kPosition);
    put("pad", r.pad_to_capacity);
    put("seq_length", tc.s);
    put("has_global", tc.global_counts);
    put("global_total", 3.0 * t);
    put("grad_scale", tc.grad_scale);
    put("layer", kLayer);
    REQUIRE(params.good());
  }
  WriteF32(dir, "x", x.data(), t * h);
  WriteF32(dir, "dy", dy.data(), t * h);
  WriteF32(dir, "expert_bias", layer.expert_bias().data(), e);
  WriteF32(dir, "global_tpe", global_tpe.data(), e);
  for (int i = 0; i < store.size(); ++i) {
    WriteF32(dir, store.info(i).spec.name, store.param(i), store.info(i).numel);
  }
  const std::string cmd = "/usr/bin/python3 " + ScriptPath() + " " + dir;
  REQUIRE(std::system(cmd.c_str()) == 0);

  // Discrete decisions: exact.
  const std::vector<double> want_map = ReadF64(dir, "routing_map");
  REQUIRE(want_map.size() == static_cast<size_t>(t * e));
  int64_t map_mismatch = 0;
  for (int64_t i = 0; i < t * e; ++i) {
    map_mismatch += (stash.router.routing_map[i] != 0) != (want_map[i] != 0.0);
  }
  CHECK(map_mismatch == 0);
  const std::vector<double> want_tpe = ReadF64(dir, "tokens_per_expert");
  for (int64_t i = 0; i < e; ++i) CHECK(metrics.tokens_per_expert[i] == want_tpe[i]);

  const std::vector<double> want_probs = ReadF64(dir, "probs");
  double probs_err = 0.0;
  for (int64_t i = 0; i < t * e; ++i) {
    probs_err = std::max(probs_err, std::abs(stash.router.probs[i] - want_probs[i]));
  }
  CHECK(probs_err <= 2e-6);

  const double aux_want = ReadF64(dir, "aux_loss")[0], z_want = ReadF64(dir, "z_loss")[0];
  CHECK(std::abs(stash.router.aux_loss - aux_want) <= 1e-5 * std::abs(aux_want));
  CHECK(std::abs(stash.router.z_loss - z_want) <= 1e-5 * std::abs(z_want));

  const double y_err = RelError(y.data(), ReadF64(dir, "y"));
  const double dx_err = RelError(dx.data(), ReadF64(dir, "dx"));
  CHECK(y_err <= 2e-5);
  CHECK(dx_err <= 2e-5);
  double worst_grad = 0.0;
  for (int i = 0; i < store.size(); ++i) {
    const std::string& name = store.info(i).spec.name;
    const double err = RelError(store.grad(i), ReadF64(dir, "grad." + name));
    INFO("gradient of " << name);
    CHECK(err <= 2e-5);
    worst_grad = std::max(worst_grad, err);
  }
  // The router weight gradient must not be vacuous (zero_dy: it is the aux/z part alone).
  double router_grad_norm = 0.0;
  for (int64_t i = 0; i < e * h; ++i) router_grad_norm += std::abs(store.grad(router)[i]);
  CHECK(router_grad_norm > 0.0);
  std::printf("%-28s map ok=%d probs %.1e y %.1e dx %.1e grads %.1e aux %.4g z %.4g dropped %lld\n",
              tc.name.c_str(), map_mismatch == 0, probs_err, y_err, dx_err, worst_grad,
              stash.router.aux_loss, stash.router.z_loss,
              static_cast<long long>(metrics.dropped_tokens));
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  auto add = [&](const std::string& name, const std::function<void(Case&)>& edit) {
    Case tc;
    tc.name = name;
    tc.config = BaseConfig();
    tc.seed = static_cast<uint32_t>(cases.size() + 1);
    edit(tc);
    cases.push_back(tc);
  };
  add("softmax_top2_aux", [](Case&) {});
  add("softmax_top1_z_swiglu", [](Case& tc) {
    tc.config.router.topk = 1;
    tc.config.router.z_loss_coeff = 0.1;
    tc.config.expert.swiglu = true;
    tc.config.expert.add_bias = false;
  });
  add("pre_softmax_top2_seq_aux", [](Case& tc) {
    tc.config.router.pre_softmax = true;
    tc.config.router.load_balancing_type = LoadBalancingType::kSeqAuxLoss;
  });
  add("sigmoid_top2_bias_scaling", [](Case& tc) {
    tc.config.router.score_function = ScoreFunction::kSigmoid;
    tc.config.router.enable_expert_bias = true;
    tc.config.router.topk_scaling_factor = 2.5;
    tc.config.router.z_loss_coeff = 0.05;
    tc.random_expert_bias = true;
  });
  add("sigmoid_top1_global_aux", [](Case& tc) {
    tc.config.router.score_function = ScoreFunction::kSigmoid;
    tc.config.router.topk = 1;
    tc.config.router.load_balancing_type = LoadBalancingType::kGlobalAuxLoss;
    tc.global_counts = true;
  });
  add("group_limited_softmax", [](Case& tc) {
    tc.config.router.num_experts = 8;
    tc.config.router.topk = 4;
    tc.config.router.num_groups = 4;
    tc.config.router.group_topk = 2;
  });
  add("group_limited_sigmoid_bias", [](Case& tc) {
    tc.config.router.num_experts = 8;
    tc.config.router.topk = 2;
    tc.config.router.num_groups = 4;
    tc.config.router.group_topk = 2;
    tc.config.router.score_function = ScoreFunction::kSigmoid;
    tc.config.router.enable_expert_bias = true;
    tc.random_expert_bias = true;
  });
  add("capacity_probs_drop", [](Case& tc) {
    tc.config.router.capacity_factor = 1.0;
    tc.config.router.drop_policy = TokenDropPolicy::kProbs;
  });
  add("capacity_position_drop", [](Case& tc) {
    tc.config.router.capacity_factor = 0.75;
    tc.config.router.drop_policy = TokenDropPolicy::kPosition;
  });
  add("capacity_probs_pad", [](Case& tc) {
    tc.config.router.capacity_factor = 1.25;
    tc.config.router.pad_to_capacity = true;
  });
  add("capacity_position_pad", [](Case& tc) {
    tc.config.router.capacity_factor = 1.5;
    tc.config.router.drop_policy = TokenDropPolicy::kPosition;
    tc.config.router.pad_to_capacity = true;
  });
  add("sinkhorn_top1", [](Case& tc) {
    tc.config.router.topk = 1;
    tc.config.router.load_balancing_type = LoadBalancingType::kSinkhorn;
    tc.config.router.aux_loss_coeff = 0.0;
    tc.config.router.z_loss_coeff = 0.1;
  });
  add("sinkhorn_top2", [](Case& tc) {
    tc.config.router.load_balancing_type = LoadBalancingType::kSinkhorn;
    tc.config.router.aux_loss_coeff = 0.0;
  });
  add("shared_expert_gelu_tanh", [](Case& tc) {
    tc.config.shared_expert_ffn_hidden_size = 20;
    tc.config.expert.gelu_tanh_approximation = true;
  });
  add("shared_expert_swiglu", [](Case& tc) {
    tc.config.shared_expert_ffn_hidden_size = 12;
    tc.config.expert.swiglu = true;
    tc.config.router.z_loss_coeff = 0.1;
  });
  add("ties_softmax", [](Case& tc) { tc.inputs = Inputs::kTiedRouter; });
  add("ties_pre_softmax_capacity", [](Case& tc) {
    tc.inputs = Inputs::kTiedRouter;
    tc.config.router.pre_softmax = true;
    tc.config.router.capacity_factor = 1.0;
  });
  add("ties_sigmoid_groups", [](Case& tc) {
    tc.inputs = Inputs::kTiedRouter;
    tc.config.router.score_function = ScoreFunction::kSigmoid;
    tc.config.router.num_groups = 3;
    tc.config.router.group_topk = 2;
  });
  add("negative_logits", [](Case& tc) {
    tc.inputs = Inputs::kNegativeLogits;
    tc.config.router.z_loss_coeff = 0.1;
  });
  add("negative_logits_sigmoid", [](Case& tc) {
    tc.inputs = Inputs::kNegativeLogits;
    tc.config.router.score_function = ScoreFunction::kSigmoid;
  });
  add("same_expert_dropless", [](Case& tc) { tc.inputs = Inputs::kSameExpert; });
  add("same_expert_capacity", [](Case& tc) {
    tc.inputs = Inputs::kSameExpert;
    tc.config.router.topk = 1;
    tc.config.router.capacity_factor = 1.0;
  });
  add("aux_and_z_only", [](Case& tc) {
    tc.zero_dy = true;
    tc.config.router.z_loss_coeff = 0.1;
  });
  return cases;
}

TEST_CASE("MoELayer matches the PyTorch reference", "[parity]") {
  for (const Case& tc : Cases()) RunCase(tc);
}

}  // namespace
}  // namespace mxmaca::layers::moe
