// layers/tp_grad_norm_test.cc: the GLOBAL gradient norm under tensor parallelism, from
// KNOWN gradients. For TP 2 and 4 we build every TP rank's GptStage (its shards of the
// parameters), write into each rank's gradient arena the values of one known full
// gradient (element = KnownGrad(logical name, full index), so split tensors' shards are
// slices of it and replicated tensors are identical on every rank), and check that
//   sum over TP ranks r, DP ranks d of
//     ShardGradNormSquared(store_r, buckets, d, counts = CountsTowardGradNorm(info, r))
// equals the squared norm of the full gradient computed independently in fp64 from the
// logical tensors of the single-device stage (each logical tensor once), for dp = 1 and 2
// with the arena cut into 2 buckets. We also check that counting replicated tensors on
// every TP rank (the mistake CountsTowardGradNorm prevents) is caught.
//
// Tolerance. KnownGrad returns k / 256 for an integer k in [-256, 256]: its square is
// k^2 / 65536, and every partial sum is a multiple of 2^-16 below 2^20 (fewer than 2^20
// elements of magnitude <= 1), which fp64 holds exactly (53-bit significand). Both sides
// are therefore exact whatever the summation order and must agree to the bit; we still
// state the check as the brief's 1e-12 relative and print the difference. The deliberate
// mistake adds (p - 1) x the replicated tensors' squares: percent-level here.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/exec_context.h"
#include "layers/gpt_stage.h"
#include "layers/grad_buckets.h"
#include "layers/tensor_parallel.h"
#include "layers/testing/gpt_test_configs.h"
#include "transport/inprocess_communicator.h"
#include "transport/rank_grid.h"

namespace mxmaca::layers {
namespace {

// LayerNorm + GELU + learned positions + biases, tied embeddings (VP 96: at TP 4 the last
// vocab shard is padding only).
GptConfig GeluConfig() { return testing::Gpt2StyleConfig({2, 32, 64, 4, 8, 8, 70, 96}, /*seed=*/77); }

GptConfig SwigluConfig() {
  GptConfig c = testing::LlamaStyle(GeluConfig());
  c.num_attention_heads = 8;
  c.num_query_groups = 4;
  c.kv_channels = 8;
  c.vocab_size = 90;
  return c;
}

// RMSNorm + SwiGLU (fc1 sharded in 2 chunks) + RoPE + GQA, no biases, untied output layer.

// KnownGrad: the full gradient's element `full_index` of logical tensor `name`:
// k / 256 with k = (FNV-1a(name) mixed with the index, SplitMix64) mod 513 - 256.
float KnownGrad(const std::string& name, int64_t full_index) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  uint64_t z = h + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(full_index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<int64_t>(z % 513) - 256) / 256.0f;
}

// FullNormSquared: sum of KnownGrad^2 over every element of every logical tensor of the
// single-device stage (full shapes), fp64, in plain loops: the independent reference.
double FullNormSquared(const ParameterStore& single) {
  double sum = 0.0;
  for (int i = 0; i < single.size(); ++i) {
    const ParameterSpec& spec = single.info(i).spec;
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    for (int64_t e = 0; e < n; ++e) {
      const double g = KnownGrad(spec.name, e);
      sum += g * g;
    }
  }
  return sum;
}

// FillKnownGrads: each tensor's gradient shard = the slice of the known full gradient.
void FillKnownGrads(ParameterStore* store) {
  for (int i = 0; i < store->size(); ++i) {
    const ParameterInfo& info = store->info(i);
    float* g = store->grad(i);
    for (int64_t e = 0; e < info.numel; ++e) g[e] = KnownGrad(info.spec.name, info.FullIndex(e));
  }
}

struct TpStages {
  std::unique_ptr<transport::InProcessHub> hub;
  std::vector<TensorParallelContext> ctx;
  std::vector<std::unique_ptr<GptStage>> stages;
};

// MakeTpStages: the p TP ranks' stages (Create does not communicate, so no threads).
TpStages MakeTpStages(const GptConfig& c, const StageLayout& layout, int p,
                      int64_t arena_multiple) {
  TpStages s;
  s.hub = std::make_unique<transport::InProcessHub>(p);
  auto grid = transport::RankGrid::Create(p, p, 1);
  REQUIRE(grid.ok());
  s.ctx.resize(p);
  for (int r = 0; r < p; ++r) {
    auto view = grid->ForRank(r);
    REQUIRE(view.ok());
    s.ctx[r] = TensorParallelContextFor(*view, s.hub->ForRank(r), /*sequence_parallel=*/false);
    auto stage = GptStage::Create(c, layout, arena_multiple, &s.ctx[r]);
    INFO(stage.status().ToString());
    REQUIRE(stage.ok());
    s.stages.push_back(std::move(*stage));
    FillKnownGrads(&s.stages.back()->parameters());
  }
  return s;
}

// TpNormSquared: sum over TP ranks and DP ranks of ShardGradNormSquared, with `counts`
// deciding per (tensor, TP rank) which gradients enter; 2 buckets per arena.
double TpNormSquared(TpStages& s, int dp,
                     const std::function<bool(const ParameterInfo&, int)>& counts) {
  const kernels::ExecContext ctx;
  double total = 0.0;
  for (size_t r = 0; r < s.stages.size(); ++r) {
    const ParameterStore& store = s.stages[r]->parameters();
    auto buckets = BuildDataParallelBuckets(store, dp, store.arena_elements() / 2);
    INFO(buckets.status().ToString());
    REQUIRE(buckets.ok());
    REQUIRE(buckets->num_buckets() == 2);
    const int tp_rank = static_cast<int>(r);
    for (int d = 0; d < dp; ++d) {
      total += ShardGradNormSquared(ctx, store, *buckets, d, [&](const ParameterInfo& info) {
        return counts(info, tp_rank);
      });
    }
  }
  return total;
}

TEST_CASE("Global grad norm over TP shards equals the full gradient's norm", "[tp][grad_norm]") {
  struct Named {
    const char* name;
    GptConfig config;
  };
  const StageLayout whole{0, 2, true, true};
  for (const Named& k : {Named{"LayerNorm+GELU, tied", GeluConfig()},
                         Named{"RMSNorm+SwiGLU+GQA, untied", SwigluConfig()}}) {
    auto single = GptStage::Create(k.config, whole);
    REQUIRE(single.ok());
    const double want = FullNormSquared((*single)->parameters());
    REQUIRE(want > 0.0);
    for (int p : {2, 4}) {
      for (int dp : {1, 2}) {
        INFO(k.name << ", TP " << p << ", DP " << dp);
        TpStages s = MakeTpStages(k.config, whole, p, 16 * dp);
        // The shards really are shards: the ranks together hold the single-device elements
        // (split tensors once, replicated ones p times).
        int64_t split = 0, replicated = 0;
        for (const auto& st : s.stages) {
          for (int i = 0; i < st->parameters().size(); ++i) {
            const ParameterInfo& info = st->parameters().info(i);
            (info.is_whole() ? replicated : split) += info.numel;
          }
        }
        REQUIRE(replicated % p == 0);
        CHECK(split + replicated / p == (*single)->parameters().num_elements());
        REQUIRE(split > 0);
        REQUIRE(replicated > 0);

        const double got = TpNormSquared(s, dp, CountsTowardGradNorm);
        const double rel = std::abs(got - want) / want;
        UNSCOPED_INFO("norm^2 " << want << ", relative difference " << rel);
        CHECK(rel <= 1e-12);
        CHECK(std::sqrt(got) == Approx(std::sqrt(want)).epsilon(1e-12));

        // The deliberate mistake: replicated tensors counted on every TP rank.
        const double wrong = TpNormSquared(s, dp, [](const ParameterInfo&, int) { return true; });
        const double wrong_rel = std::abs(wrong - want) / want;
        UNSCOPED_INFO("every-rank counting: relative difference " << wrong_rel);
        CHECK(wrong_rel > 1e-3);
        // ... and exactly by (p - 1) times the replicated tensors' share.
        double replicated_sq = 0.0;
        const ParameterStore& r0 = s.stages[0]->parameters();
        for (int i = 0; i < r0.size(); ++i) {
          if (!r0.info(i).is_whole()) continue;
          for (int64_t e = 0; e < r0.info(i).numel; ++e) {
            const double g = r0.grad(i)[e];
            replicated_sq += g * g;
          }
        }
        CHECK(std::abs(wrong - (want + (p - 1) * replicated_sq)) <= 1e-12 * want);
        // Counting replicated tensors on no rank is caught as well.
        const double none =
            TpNormSquared(s, dp, [](const ParameterInfo& info, int) { return !info.is_whole(); });
        CHECK(std::abs(none - want) / want > 1e-3);
      }
    }
  }
}

TEST_CASE("Global grad norm over TP shards of pipeline stages", "[tp][grad_norm]") {
  // A first and a last stage (untied: the last stage owns output_layer.weight; no tied
  // copy to leave out): the sum over both stages' TP ranks equals the whole model's norm.
  const GptConfig c = SwigluConfig();
  auto single = GptStage::Create(c, StageLayout{0, 2, true, true});
  REQUIRE(single.ok());
  const double want = FullNormSquared((*single)->parameters());
  for (int p : {2, 4}) {
    INFO("TP " << p);
    TpStages first = MakeTpStages(c, StageLayout{0, 1, true, false}, p, 16);
    TpStages last = MakeTpStages(c, StageLayout{1, 2, false, true}, p, 16);
    const double got = TpNormSquared(first, 1, CountsTowardGradNorm) +
                       TpNormSquared(last, 1, CountsTowardGradNorm);
    CHECK(std::abs(got - want) / want <= 1e-12);
  }
}

}  // namespace
}  // namespace mxmaca::layers
