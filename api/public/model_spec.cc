// api/public/model_spec.cc: see model_spec.h.
#include "mxmaca/model_spec.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace mxmaca {
namespace {

constexpr int kEmbedding = 0;
constexpr int kTransformer = 1;
constexpr int kFinalNorm = 2;
constexpr int kOutput = 3;
constexpr int kLoss = 4;

absl::Status LayerError(size_t index, const LayerSpec& layer, const std::string& problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("layer ", index, " (", LayerKindName(layer), "): ", problem));
}

bool IsProbability(double p) { return std::isfinite(p) && p >= 0.0 && p < 1.0; }

// The first field in which `b` differs from `a`, as "name (a vs b)".
std::string FirstDifference(const TransformerLayerSpec& a, const TransformerLayerSpec& b) {
  auto diff = [](const char* name, auto x, auto y) {
    return absl::StrCat(name, " (", x, " vs ", y, ")");
  };
  if (a.hidden_size != b.hidden_size) return diff("hidden_size", a.hidden_size, b.hidden_size);
  if (a.num_attention_heads != b.num_attention_heads)
    return diff("num_attention_heads", a.num_attention_heads, b.num_attention_heads);
  if (a.num_query_groups != b.num_query_groups)
    return diff("num_query_groups", a.num_query_groups, b.num_query_groups);
  if (a.kv_channels != b.kv_channels) return diff("kv_channels", a.kv_channels, b.kv_channels);
  if (a.ffn_hidden_size != b.ffn_hidden_size)
    return diff("ffn_hidden_size", a.ffn_hidden_size, b.ffn_hidden_size);
  if (a.normalization != b.normalization)
    return diff("normalization", static_cast<int>(a.normalization),
                static_cast<int>(b.normalization));
  if (a.norm_epsilon != b.norm_epsilon) return diff("norm_epsilon", a.norm_epsilon, b.norm_epsilon);
  if (a.activation != b.activation)
    return diff("activation", static_cast<int>(a.activation), static_cast<int>(b.activation));
  if (a.hidden_dropout != b.hidden_dropout)
    return diff("hidden_dropout", a.hidden_dropout, b.hidden_dropout);
  if (a.attention_dropout != b.attention_dropout)
    return diff("attention_dropout", a.attention_dropout, b.attention_dropout);
  return diff("add_bias_linear", a.add_bias_linear, b.add_bias_linear);
}

absl::Status CheckEmbedding(size_t i, const LayerSpec& node) {
  const auto& e = std::get<EmbeddingSpec>(node);
  if (e.vocab_size < 0)
    return LayerError(i, node, absl::StrCat("vocab_size ", e.vocab_size, " < 0"));
  if (e.make_vocab_size_divisible_by < 1) {
    return LayerError(
        i, node,
        absl::StrCat("make_vocab_size_divisible_by ", e.make_vocab_size_divisible_by, " < 1"));
  }
  if (e.max_position_embeddings < 0) {
    return LayerError(i, node,
                      absl::StrCat("max_position_embeddings ", e.max_position_embeddings, " < 0"));
  }
  if (e.position_embedding == PositionEmbedding::kRope) {
    if (e.rotary_base <= 0) {
      return LayerError(i, node, absl::StrCat("rotary_base ", e.rotary_base, " is not > 0"));
    }
    if (!(e.rotary_percent > 0.0 && e.rotary_percent <= 1.0)) {
      return LayerError(i, node,
                        absl::StrCat("rotary_percent ", e.rotary_percent, " is not in (0, 1]"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTransformer(size_t i, const LayerSpec& node) {
  const auto& t = std::get<TransformerLayerSpec>(node);
  if (t.hidden_size <= 0)
    return LayerError(i, node, absl::StrCat("hidden_size ", t.hidden_size, " is not > 0"));
  if (t.num_attention_heads <= 0) {
    return LayerError(i, node,
                      absl::StrCat("num_attention_heads ", t.num_attention_heads, " is not > 0"));
  }
  if (t.kv_channels < 0 || t.num_query_groups < 0 || t.ffn_hidden_size < 0) {
    return LayerError(i, node,
                      "kv_channels, num_query_groups and ffn_hidden_size must be >= 0 "
                      "(0 = Megatron's default)");
  }
  if (t.kv_channels == 0 && t.hidden_size % t.num_attention_heads != 0) {
    return LayerError(
        i, node,
        absl::StrCat("hidden_size ", t.hidden_size, " is not divisible by num_attention_heads ",
                     t.num_attention_heads, " (or set kv_channels)"));
  }
  if (t.num_query_groups > 0 && t.num_attention_heads % t.num_query_groups != 0) {
    return LayerError(i, node,
                      absl::StrCat("num_attention_heads ", t.num_attention_heads,
                                   " is not divisible by num_query_groups ", t.num_query_groups));
  }
  if (!(t.norm_epsilon > 0.0) || !std::isfinite(t.norm_epsilon)) {
    return LayerError(i, node, absl::StrCat("norm_epsilon ", t.norm_epsilon, " is not > 0"));
  }
  if (!IsProbability(t.hidden_dropout) || !IsProbability(t.attention_dropout)) {
    return LayerError(i, node,
                      absl::StrCat("dropouts must be in [0, 1) (hidden_dropout ", t.hidden_dropout,
                                   ", attention_dropout ", t.attention_dropout, ")"));
  }
  if (t.activation == Activation::kGeluTanh && !t.add_bias_linear) {
    return LayerError(i, node,
                      "kGeluTanh is Megatron's fused bias-GELU and needs add_bias_linear; "
                      "without biases Megatron computes the exact GELU (use kGelu)");
  }
  return absl::OkStatus();
}

}  // namespace

bool operator==(const TransformerLayerSpec& a, const TransformerLayerSpec& b) {
  return a.hidden_size == b.hidden_size && a.num_attention_heads == b.num_attention_heads &&
         a.num_query_groups == b.num_query_groups && a.kv_channels == b.kv_channels &&
         a.ffn_hidden_size == b.ffn_hidden_size && a.normalization == b.normalization &&
         a.norm_epsilon == b.norm_epsilon && a.activation == b.activation &&
         a.hidden_dropout == b.hidden_dropout && a.attention_dropout == b.attention_dropout &&
         a.add_bias_linear == b.add_bias_linear;
}

const char* LayerKindName(const LayerSpec& layer) {
  static const char* const kNames[] = {"Embedding", "TransformerLayer", "FinalNorm", "OutputLayer",
                                       "Loss"};
  return kNames[layer.index()];
}

ModelSpec ModelSpec::Gpt(const GptShape& shape) {
  ModelSpec spec;
  EmbeddingSpec e;
  e.vocab_size = shape.vocab_size;
  e.max_position_embeddings = shape.max_position_embeddings;
  e.position_embedding = shape.position_embedding;
  spec.Add(e);
  TransformerLayerSpec t;
  t.hidden_size = shape.hidden_size;
  t.num_attention_heads = shape.num_attention_heads;
  t.num_query_groups = shape.num_query_groups;
  t.ffn_hidden_size = shape.ffn_hidden_size;
  t.normalization = shape.normalization;
  t.activation = shape.activation;
  t.hidden_dropout = shape.hidden_dropout;
  t.attention_dropout = shape.attention_dropout;
  t.add_bias_linear = shape.add_bias_linear;
  for (int64_t i = 0; i < shape.num_layers; ++i) spec.Add(t);
  FinalNormSpec n;
  n.normalization = t.normalization;
  n.norm_epsilon = t.norm_epsilon;
  spec.Add(n);
  spec.Add(OutputLayerSpec{shape.tied_embeddings});
  spec.Add(LossSpec{});
  return spec;
}

ModelSpec& ModelSpec::Add(LayerSpec layer) {
  layers_.push_back(std::move(layer));
  return *this;
}

int64_t ModelSpec::NumTransformerLayers() const {
  int64_t n = 0;
  for (const LayerSpec& l : layers_) n += l.index() == kTransformer ? 1 : 0;
  return n;
}

absl::Status ModelSpec::Validate() const {
  if (layers_.empty()) {
    return absl::InvalidArgumentError(
        "the model has no layers: expected Embedding, TransformerLayer x L (L >= 1), "
        "FinalNorm, OutputLayer, Loss");
  }
  // The one graph shape the runtime runs today, checked node by node.
  const size_t n = layers_.size();
  if (layers_[0].index() != kEmbedding) {
    return LayerError(0, layers_[0], "the first layer must be the Embedding");
  }
  size_t i = 1;
  for (; i < n && layers_[i].index() == kTransformer; ++i) {
  }
  const size_t num_transformer = i - 1;
  if (num_transformer == 0) {
    if (n == 1) {
      return absl::InvalidArgumentError(
          "the model ends after layer 0 (Embedding): expected at least one TransformerLayer");
    }
    return LayerError(1, layers_[1],
                      "expected at least one TransformerLayer after the Embedding (supported "
                      "today: Embedding, TransformerLayer x L, FinalNorm, OutputLayer, Loss)");
  }
  const char* const kExpected[] = {"a FinalNorm", "an OutputLayer", "a Loss"};
  const int kKinds[] = {kFinalNorm, kOutput, kLoss};
  for (int k = 0; k < 3; ++k, ++i) {
    if (i >= n) {
      return absl::InvalidArgumentError(absl::StrCat("the model ends after layer ", n - 1, " (",
                                                     LayerKindName(layers_[n - 1]), "): expected ",
                                                     kExpected[k]));
    }
    if (layers_[i].index() != kKinds[k]) {
      std::string problem = absl::StrCat("expected ", kExpected[k], " here");
      if (layers_[i].index() == kEmbedding) {
        problem += "; a second Embedding is not supported";
      } else if (layers_[i].index() == kTransformer) {
        problem +=
            "; transformer layers must be consecutive (interleaving other layers "
            "between them is not supported yet)";
      }
      return LayerError(i, layers_[i],
                        absl::StrCat(problem,
                                     " (supported today: Embedding, TransformerLayer x L, "
                                     "FinalNorm, OutputLayer, Loss)"));
    }
  }
  if (i < n) {
    return LayerError(i, layers_[i],
                      "nothing may follow the Loss (supported today: Embedding, "
                      "TransformerLayer x L, FinalNorm, OutputLayer, Loss)");
  }

  if (absl::Status s = CheckEmbedding(0, layers_[0]); !s.ok()) return s;
  const auto& first = std::get<TransformerLayerSpec>(layers_[1]);
  for (size_t l = 1; l <= num_transformer; ++l) {
    if (absl::Status s = CheckTransformer(l, layers_[l]); !s.ok()) return s;
    const auto& t = std::get<TransformerLayerSpec>(layers_[l]);
    if (t != first) {
      return LayerError(l, layers_[l],
                        absl::StrCat("differs from layer 1 in ", FirstDifference(first, t),
                                     ": heterogeneous transformer layers are not supported yet "
                                     "(every layer must have the same spec)"));
    }
  }
  const size_t norm_index = num_transformer + 1;
  const auto& norm = std::get<FinalNormSpec>(layers_[norm_index]);
  if (norm.normalization != first.normalization || norm.norm_epsilon != first.norm_epsilon) {
    return LayerError(norm_index, layers_[norm_index],
                      "its normalization and epsilon must be the transformer layers' (a "
                      "different final norm is not supported yet)");
  }
  return absl::OkStatus();
}

EmbeddingSpec ModelSpec::Embedding() const {
  if (!layers_.empty() && layers_[0].index() == kEmbedding)
    return std::get<EmbeddingSpec>(layers_[0]);
  return EmbeddingSpec{};
}

TransformerLayerSpec ModelSpec::Layer() const {
  for (const LayerSpec& l : layers_) {
    if (l.index() == kTransformer) return std::get<TransformerLayerSpec>(l);
  }
  return TransformerLayerSpec{};
}

OutputLayerSpec ModelSpec::Output() const {
  for (const LayerSpec& l : layers_) {
    if (l.index() == kOutput) return std::get<OutputLayerSpec>(l);
  }
  return OutputLayerSpec{};
}

LossSpec ModelSpec::Loss() const {
  for (const LayerSpec& l : layers_) {
    if (l.index() == kLoss) return std::get<LossSpec>(l);
  }
  return LossSpec{};
}

}  // namespace mxmaca
