// layers/parameter_store_test.cc: registration, names, flags and the pure-function init.
#include "layers/parameter_store.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "layers/gpt_parameters.h"
#include "layers/testing/gpt_test_configs.h"

namespace mxmaca::layers {
namespace {

GptConfig SmallConfig() { return testing::Gpt2StyleConfig({4, 32, 64, 4, 16, 16, 100, 128}); }

TEST_CASE("Register rejects duplicates, bad shapes and late registration") {
  ParameterStore store;
  REQUIRE(store.Register({"a", {2, 3}}).ok());
  CHECK(store.Register({"a", {4}}).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(store.Register({"b", {2, 0}}).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(store.Register({"c", {}}).status().code() == absl::StatusCode::kInvalidArgument);
  store.Finalize();
  CHECK(store.Register({"d", {1}}).status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(store.Index("zzz").status().code() == absl::StatusCode::kNotFound);
  CHECK(store.info(0).arena_offset % 16 == 0);
}

TEST_CASE("GPT parameter names, shapes and decay flags follow Megatron") {
  GptConfig c = SmallConfig();
  c.num_query_groups = 2;
  ParameterStore store;
  auto ids = RegisterGptParameters(c, {1, 3, true, true}, &store);
  REQUIRE(ids.ok());
  store.Finalize();
  auto shape = [&](const std::string& name) {
    auto i = store.Index(name);
    REQUIRE(i.ok());
    return store.info(*i).spec.shape;
  };
  CHECK(shape("embedding.word_embeddings.weight") == std::vector<int64_t>{128, 32});
  CHECK(shape("embedding.position_embeddings.weight") == std::vector<int64_t>{16, 32});
  // Global layer numbers 1 and 2; (np + 2 ng) hn = (4 + 4) * 8 rows.
  CHECK(shape("decoder.layers.1.self_attention.linear_qkv.weight") == std::vector<int64_t>{64, 32});
  CHECK(shape("decoder.layers.2.mlp.linear_fc2.weight") == std::vector<int64_t>{32, 64});
  CHECK_FALSE(store.Index("decoder.layers.0.input_layernorm.weight").ok());
  CHECK_FALSE(store.Index("output_layer.weight").ok());  // tied
  CHECK(ids->output_weight == ids->word_embeddings);
  for (int i = 0; i < store.size(); ++i) {
    const ParameterSpec& s = store.info(i).spec;
    const bool is_bias = s.name.size() > 5 && s.name.substr(s.name.size() - 5) == ".bias";
    INFO(s.name);
    CHECK(s.weight_decay == !(is_bias || s.shape.size() == 1));
  }
}

TEST_CASE("Initial values are a pure function of (seed, name, index) with Megatron's stds") {
  GptConfig c = SmallConfig();
  ParameterStore full, part;
  REQUIRE(RegisterGptParameters(c, {0, 4, true, true}, &full).ok());
  REQUIRE(RegisterGptParameters(c, {2, 4, false, true}, &part).ok());
  full.Finalize();
  part.Finalize();
  full.Initialize(7);
  part.Initialize(7);
  // The same tensor on a different stage layout has the same values.
  for (const char* name : {"decoder.layers.3.mlp.linear_fc1.weight",
                           "decoder.layers.2.self_attention.linear_qkv.weight"}) {
    const int a = *full.Index(name), b = *part.Index(name);
    INFO(name);
    CHECK(std::equal(full.param(a), full.param(a) + full.info(a).numel, part.param(b)));
  }
  // Initialize agrees with the element-wise definition.
  for (int i = 0; i < full.size(); ++i) {
    const ParameterInfo& info = full.info(i);
    for (int64_t e : {int64_t{0}, info.numel / 2, info.numel - 1}) {
      CHECK(full.param(i)[e] == InitialValue(7, info.spec, e));
    }
  }
  // Statistics: std within 5% (the sample std of n >= 8192 normals has relative standard
  // error 1/sqrt(2n) < 0.8%), mean within 4 standard errors.
  auto stats = [&](const std::string& name, double want_std) {
    const int i = *full.Index(name);
    const int64_t n = full.info(i).numel;
    double s1 = 0, s2 = 0;
    for (int64_t e = 0; e < n; ++e) {
      s1 += full.param(i)[e];
      s2 += double(full.param(i)[e]) * full.param(i)[e];
    }
    const double mean = s1 / n, sd = std::sqrt(s2 / n - mean * mean);
    INFO(name << " mean " << mean << " std " << sd);
    CHECK(std::abs(sd - want_std) < 0.05 * want_std);
    CHECK(std::abs(mean) < 4 * want_std / std::sqrt(double(n)));
  };
  stats("embedding.word_embeddings.weight", 0.02);
  stats("decoder.layers.0.mlp.linear_fc1.weight", 0.02);
  stats("decoder.layers.0.mlp.linear_fc2.weight", 0.02 / std::sqrt(8.0));
  stats("decoder.layers.1.self_attention.linear_proj.weight", 0.02 / std::sqrt(8.0));
  const int ln = *full.Index("decoder.layers.0.input_layernorm.weight");
  const int lb = *full.Index("decoder.layers.0.input_layernorm.bias");
  const int qb = *full.Index("decoder.layers.0.self_attention.linear_qkv.bias");
  CHECK(full.param(ln)[5] == 1.0f);
  CHECK(full.param(lb)[5] == 0.0f);
  CHECK(full.param(qb)[7] == 0.0f);
  // A different seed changes the values.
  ParameterStore other;
  REQUIRE(RegisterGptParameters(c, {0, 4, true, true}, &other).ok());
  other.Finalize();
  other.Initialize(8);
  const int w = *full.Index("embedding.word_embeddings.weight");
  CHECK(full.param(w)[0] != other.param(w)[0]);
}

TEST_CASE("Untied, RMSNorm, no-bias, SwiGLU register the right set") {
  GptConfig c = SmallConfig();
  c.untie_embeddings_and_output_weights = true;
  c.normalization = Normalization::kRmsNorm;
  c.add_bias_linear = false;
  c.swiglu = true;
  c.position_embedding_type = PositionEmbeddingType::kRope;
  ParameterStore store;
  auto ids = RegisterGptParameters(c, {0, 1, true, true}, &store);
  REQUIRE(ids.ok());
  CHECK(store.Index("output_layer.weight").ok());
  CHECK_FALSE(store.Index("embedding.position_embeddings.weight").ok());
  CHECK_FALSE(store.Index("decoder.layers.0.input_layernorm.bias").ok());
  CHECK_FALSE(store.Index("decoder.layers.0.mlp.linear_fc1.bias").ok());
  CHECK(store.info(*store.Index("decoder.layers.0.mlp.linear_fc1.weight")).spec.shape ==
        std::vector<int64_t>{128, 32});
  // 1 word + 2 norms + qkv + proj + fc1 + fc2 + final norm + output = 9.
  CHECK(store.size() == 9);
}

}  // namespace
}  // namespace mxmaca::layers

namespace mxmaca::layers {
namespace {

TEST_CASE("Initialize fills large stores on all cores with the one-thread bits") {
  // 6.3M elements in pieces of 2^20: several threads, each element still
  // InitialValue(seed, spec, full index); a shard of the same tensor gets its slice.
  ParameterStore store, shard;
  ParameterSpec big{"decoder.layers.0.mlp.linear_fc1.weight", {1536, 4096},
                    ParameterInit::kNormal, 0.02f};
  ParameterSpec ones{"decoder.layers.0.input_layernorm.weight", {4096}, ParameterInit::kOnes};
  REQUIRE(store.Register(big).ok());
  REQUIRE(store.Register(ones).ok());
  REQUIRE(shard.RegisterShard(big, {768, 0}, {768, 4096}).ok());
  store.Finalize();
  shard.Finalize();
  store.Initialize(99);
  shard.Initialize(99);
  int64_t mismatches = 0;
  for (int64_t e = 0; e < 1536 * 4096; ++e) {
    mismatches += store.param(0)[e] != InitialValue(99, big, e);
  }
  for (int64_t e = 0; e < 768 * 4096; ++e) {
    mismatches += shard.param(0)[e] != store.param(0)[768 * 4096 + e];
  }
  for (int64_t e = 0; e < 4096; ++e) mismatches += store.param(1)[e] != 1.0f;
  CHECK(mismatches == 0);
}

}  // namespace
}  // namespace mxmaca::layers
