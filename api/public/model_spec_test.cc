// api/public/model_spec_test.cc: ModelSpec::Gpt and ModelSpec::Validate (which graphs the
// runtime accepts, and that every rejection names the layer index, kind and problem).
#include "mxmaca/model_spec.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace mxmaca {
namespace {

GptShape SmallShape() {
  GptShape s;
  s.num_layers = 3;
  s.hidden_size = 32;
  s.num_attention_heads = 4;
  return s;
}

// The message of a failed Validate (which must be InvalidArgument).
std::string Error(const ModelSpec& spec) {
  const absl::Status s = spec.Validate();
  REQUIRE(s.code() == absl::StatusCode::kInvalidArgument);
  return std::string(s.message());
}

TEST_CASE("Gpt builds Embedding, L identical layers, FinalNorm, OutputLayer, Loss") {
  std::mt19937 rng(20261130);
  for (int trial = 0; trial < 5; ++trial) {
    GptShape shape = SmallShape();
    shape.num_layers = 1 + static_cast<int64_t>(rng() % 6);
    shape.normalization = trial % 2 ? Normalization::kRmsNorm : Normalization::kLayerNorm;
    shape.tied_embeddings = trial % 3 != 0;
    const ModelSpec spec = ModelSpec::Gpt(shape);
    REQUIRE(spec.Validate().ok());
    REQUIRE(spec.layers().size() == static_cast<size_t>(shape.num_layers + 4));
    CHECK(spec.NumTransformerLayers() == shape.num_layers);
    CHECK(std::string(LayerKindName(spec.layers().front())) == "Embedding");
    for (int64_t i = 1; i <= shape.num_layers; ++i) {
      CHECK(std::string(LayerKindName(spec.layers()[i])) == "TransformerLayer");
    }
    CHECK(std::string(LayerKindName(spec.layers()[shape.num_layers + 1])) == "FinalNorm");
    CHECK(std::string(LayerKindName(spec.layers()[shape.num_layers + 2])) == "OutputLayer");
    CHECK(std::string(LayerKindName(spec.layers().back())) == "Loss");
    CHECK(spec.Layer().normalization == shape.normalization);
    CHECK(spec.Output().tied == shape.tied_embeddings);
  }
}

TEST_CASE("an explicit graph built with Add equals the Gpt builder's") {
  const ModelSpec gpt = ModelSpec::Gpt(SmallShape());
  ModelSpec explicit_spec;
  TransformerLayerSpec layer;
  layer.hidden_size = 32;
  layer.num_attention_heads = 4;
  explicit_spec.Add(EmbeddingSpec{}).Add(layer).Add(layer).Add(layer);
  explicit_spec.Add(FinalNormSpec{}).Add(OutputLayerSpec{}).Add(LossSpec{});
  REQUIRE(explicit_spec.Validate().ok());
  CHECK(explicit_spec.NumTransformerLayers() == gpt.NumTransformerLayers());
  CHECK(explicit_spec.Layer() == gpt.Layer());
}

TEST_CASE("Validate rejects graphs out of order, naming the layer") {
  TransformerLayerSpec layer;
  layer.hidden_size = 32;
  layer.num_attention_heads = 4;

  CHECK(absl::StrContains(Error(ModelSpec()), "no layers"));

  ModelSpec no_embedding;
  no_embedding.Add(layer).Add(FinalNormSpec{}).Add(OutputLayerSpec{}).Add(LossSpec{});
  CHECK(absl::StartsWith(Error(no_embedding),
                         "layer 0 (TransformerLayer): the first layer must be the Embedding"));

  ModelSpec no_layers;
  no_layers.Add(EmbeddingSpec{}).Add(FinalNormSpec{}).Add(OutputLayerSpec{}).Add(LossSpec{});
  CHECK(absl::StartsWith(Error(no_layers),
                         "layer 1 (FinalNorm): expected at least one TransformerLayer"));

  ModelSpec no_loss;
  no_loss.Add(EmbeddingSpec{}).Add(layer).Add(FinalNormSpec{}).Add(OutputLayerSpec{});
  CHECK(absl::StrContains(Error(no_loss), "ends after layer 3 (OutputLayer): expected a Loss"));

  ModelSpec after_loss = ModelSpec::Gpt(SmallShape());
  after_loss.Add(layer);
  CHECK(absl::StartsWith(Error(after_loss),
                         "layer 7 (TransformerLayer): nothing may follow the Loss"));

  ModelSpec second_embedding;
  second_embedding.Add(EmbeddingSpec{}).Add(layer).Add(EmbeddingSpec{}).Add(FinalNormSpec{});
  second_embedding.Add(OutputLayerSpec{}).Add(LossSpec{});
  const std::string e = Error(second_embedding);
  CHECK(absl::StartsWith(e, "layer 2 (Embedding): expected a FinalNorm here"));
  CHECK(absl::StrContains(e, "a second Embedding is not supported"));

  ModelSpec split_layers;
  split_layers.Add(EmbeddingSpec{}).Add(layer).Add(FinalNormSpec{}).Add(layer);
  split_layers.Add(OutputLayerSpec{}).Add(LossSpec{});
  CHECK(
      absl::StartsWith(Error(split_layers), "layer 3 (TransformerLayer): expected an OutputLayer"));
}

TEST_CASE("Validate names heterogeneous transformer layers as not supported yet") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 4; ++trial) {
    GptShape shape = SmallShape();
    shape.num_layers = 2 + static_cast<int64_t>(rng() % 5);
    const ModelSpec base = ModelSpec::Gpt(shape);
    // Replace one layer (not the first: the first is the reference) with a wider one.
    const size_t odd = 2 + rng() % (shape.num_layers - 1);
    ModelSpec spec;
    for (size_t i = 0; i < base.layers().size(); ++i) {
      if (i == odd) {
        TransformerLayerSpec wide = base.Layer();
        wide.hidden_size = 64;
        spec.Add(wide);
      } else {
        spec.Add(base.layers()[i]);
      }
    }
    const std::string e = Error(spec);
    CHECK(absl::StartsWith(e, absl::StrCat("layer ", odd,
                                           " (TransformerLayer): differs from layer 1 "
                                           "in hidden_size (32 vs 64)")));
    CHECK(absl::StrContains(e, "heterogeneous transformer layers are not supported yet"));
  }
}

TEST_CASE("Validate checks layer fields") {
  auto with_layer = [](auto edit) {
    ModelSpec base = ModelSpec::Gpt(SmallShape());
    TransformerLayerSpec t = base.Layer();
    edit(t);
    GptShape shape = SmallShape();
    ModelSpec spec;
    spec.Add(EmbeddingSpec{});
    for (int64_t i = 0; i < shape.num_layers; ++i) spec.Add(t);
    spec.Add(FinalNormSpec{t.normalization, t.norm_epsilon}).Add(OutputLayerSpec{}).Add(LossSpec{});
    return spec;
  };
  CHECK(absl::StrContains(Error(with_layer([](auto& t) { t.num_attention_heads = 5; })),
                          "layer 1 (TransformerLayer): hidden_size 32 is not divisible by "
                          "num_attention_heads 5"));
  CHECK(with_layer([](auto& t) {
          t.num_attention_heads = 5;
          t.kv_channels = 8;
        })
            .Validate()
            .ok());
  CHECK(absl::StrContains(Error(with_layer([](auto& t) { t.num_query_groups = 3; })),
                          "num_attention_heads 4 is not divisible by num_query_groups 3"));
  CHECK(with_layer([](auto& t) { t.num_query_groups = 2; }).Validate().ok());
  CHECK(absl::StrContains(Error(with_layer([](auto& t) { t.hidden_dropout = 1.0; })),
                          "dropouts must be in [0, 1)"));
  CHECK(absl::StrContains(Error(with_layer([](auto& t) { t.attention_dropout = -0.1; })),
                          "dropouts must be in [0, 1)"));
  CHECK(absl::StrContains(Error(with_layer([](auto& t) { t.add_bias_linear = false; })),
                          "kGeluTanh is Megatron's fused bias-GELU and needs add_bias_linear"));
  CHECK(with_layer([](auto& t) {
          t.add_bias_linear = false;
          t.activation = Activation::kSwiGlu;
        })
            .Validate()
            .ok());
  CHECK(absl::StrContains(Error(with_layer([](auto& t) { t.hidden_size = 0; })),
                          "hidden_size 0 is not > 0"));
  CHECK(absl::StrContains(Error(with_layer([](auto& t) { t.norm_epsilon = 0; })),
                          "norm_epsilon 0 is not > 0"));

  ModelSpec rope = ModelSpec::Gpt(SmallShape());
  EmbeddingSpec e;
  e.position_embedding = PositionEmbedding::kRope;
  e.rotary_percent = 0.0;
  ModelSpec bad_rope;
  bad_rope.Add(e);
  for (size_t i = 1; i < rope.layers().size(); ++i) bad_rope.Add(rope.layers()[i]);
  CHECK(
      absl::StartsWith(Error(bad_rope), "layer 0 (Embedding): rotary_percent 0 is not in (0, 1]"));

  ModelSpec rms_final;
  const ModelSpec base = ModelSpec::Gpt(SmallShape());
  for (size_t i = 0; i < base.layers().size(); ++i) {
    if (std::string(LayerKindName(base.layers()[i])) == "FinalNorm") {
      rms_final.Add(FinalNormSpec{Normalization::kRmsNorm, 1e-5});
    } else {
      rms_final.Add(base.layers()[i]);
    }
  }
  CHECK(absl::StartsWith(Error(rms_final),
                         "layer 4 (FinalNorm): its normalization and epsilon "
                         "must be the transformer layers'"));
}

}  // namespace
}  // namespace mxmaca
