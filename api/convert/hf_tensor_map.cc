// api/convert/hf_tensor_map.cc: see hf_tensor_map.h.
//
// Both directions read one table of links: a Hugging Face tensor is a list of row ranges
// of one Megatron tensor (1-D tensors: one value per row), concatenated and, for GPT-2's
// Conv1D weights, transposed. Export gathers the rows, import scatters them back, so the
// two directions cannot disagree on the layout.
#include "api/convert/hf_tensor_map.h"

#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "layers/gpt_parameters.h"
#include "layers/moe/moe_layer.h"

namespace mxmaca::api::convert {
namespace {

using Shape = std::vector<int64_t>;
using RowRanges = std::vector<std::pair<int64_t, int64_t>>;  // (first row, row count)

// Link: HF tensor `hf` [hf_shape] = (rows `rows` of Megatron tensor `mg`)^T if transpose.
struct Link {
  std::string hf;
  Shape hf_shape;
  std::string mg;
  RowRanges rows;
  bool transpose = false;
};

int64_t Numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

int64_t RowCount(const RowRanges& r) {
  int64_t n = 0;
  for (const auto& [first, count] : r) n += count;
  return n;
}

std::string ShapeStr(const Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

// QkvRanges: the rows of linear_qkv ([ng, np/ng + 2, hn]) holding the query heads (part 0),
// the k heads (1) or the v heads (2), in head order.
RowRanges QkvRanges(const layers::GptConfig& c, int part) {
  const int64_t ng = c.query_groups(), qpg = c.num_attention_heads / ng, hn = c.head_dim();
  RowRanges r;
  for (int64_t g = 0; g < ng; ++g) {
    const int64_t group = g * (qpg + 2) * hn;
    if (part == 0) r.push_back({group, qpg * hn});
    if (part == 1) r.push_back({group + qpg * hn, hn});
    if (part == 2) r.push_back({group + (qpg + 1) * hn, hn});
  }
  return r;
}

RowRanges All(int64_t rows) { return {{0, rows}}; }

std::string L(int64_t i, const std::string& suffix) {
  return layers::LayerParameterName(i, suffix);
}

std::vector<Link> Links(const layers::GptConfig& c, HfArchitecture arch) {
  const int64_t h = c.hidden_size, v = c.vocab_size, f = c.ffn_hidden_size;
  const int64_t q = c.num_attention_heads * c.head_dim(), kv = c.query_groups() * c.head_dim();
  const bool bias = c.add_bias_linear;
  std::vector<Link> links;
  if (arch == HfArchitecture::kGpt2) {
    const std::string t = "transformer.";
    links.push_back({t + "wte.weight", {v, h}, "embedding.word_embeddings.weight", All(v)});
    links.push_back({t + "wpe.weight",
                     {c.max_position_embeddings, h},
                     "embedding.position_embeddings.weight",
                     All(c.max_position_embeddings)});
    RowRanges qkv = QkvRanges(c, 0);
    for (int part = 1; part < 3; ++part) {
      for (const auto& r : QkvRanges(c, part)) qkv.push_back(r);
    }
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const std::string p = absl::StrCat(t, "h.", i, ".");
      links.push_back({p + "ln_1.weight", {h}, L(i, "input_layernorm.weight"), All(h)});
      links.push_back({p + "ln_1.bias", {h}, L(i, "input_layernorm.bias"), All(h)});
      links.push_back({p + "attn.c_attn.weight",
                       {h, q + 2 * kv},
                       L(i, "self_attention.linear_qkv.weight"),
                       qkv,
                       true});
      links.push_back(
          {p + "attn.c_attn.bias", {q + 2 * kv}, L(i, "self_attention.linear_qkv.bias"), qkv});
      links.push_back({p + "attn.c_proj.weight",
                       {q, h},
                       L(i, "self_attention.linear_proj.weight"),
                       All(h),
                       true});
      links.push_back(
          {p + "attn.c_proj.bias", {h}, L(i, "self_attention.linear_proj.bias"), All(h)});
      links.push_back({p + "ln_2.weight", {h}, L(i, "pre_mlp_layernorm.weight"), All(h)});
      links.push_back({p + "ln_2.bias", {h}, L(i, "pre_mlp_layernorm.bias"), All(h)});
      links.push_back({p + "mlp.c_fc.weight", {h, f}, L(i, "mlp.linear_fc1.weight"), All(f), true});
      links.push_back({p + "mlp.c_fc.bias", {f}, L(i, "mlp.linear_fc1.bias"), All(f)});
      links.push_back(
          {p + "mlp.c_proj.weight", {f, h}, L(i, "mlp.linear_fc2.weight"), All(h), true});
      links.push_back({p + "mlp.c_proj.bias", {h}, L(i, "mlp.linear_fc2.bias"), All(h)});
    }
    links.push_back({t + "ln_f.weight", {h}, "decoder.final_layernorm.weight", All(h)});
    links.push_back({t + "ln_f.bias", {h}, "decoder.final_layernorm.bias", All(h)});
    return links;
  }
  links.push_back(
      {"model.embed_tokens.weight", {v, h}, "embedding.word_embeddings.weight", All(v)});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    const std::string qkv_w = L(i, "self_attention.linear_qkv.weight");
    const std::string qkv_b = L(i, "self_attention.linear_qkv.bias");
    links.push_back({p + "input_layernorm.weight", {h}, L(i, "input_layernorm.weight"), All(h)});
    links.push_back({p + "self_attn.q_proj.weight", {q, h}, qkv_w, QkvRanges(c, 0)});
    links.push_back({p + "self_attn.k_proj.weight", {kv, h}, qkv_w, QkvRanges(c, 1)});
    links.push_back({p + "self_attn.v_proj.weight", {kv, h}, qkv_w, QkvRanges(c, 2)});
    if (c.qkv_has_bias()) {  // --add-bias-linear, or Qwen2's --add-qkv-bias alone
      links.push_back({p + "self_attn.q_proj.bias", {q}, qkv_b, QkvRanges(c, 0)});
      links.push_back({p + "self_attn.k_proj.bias", {kv}, qkv_b, QkvRanges(c, 1)});
      links.push_back({p + "self_attn.v_proj.bias", {kv}, qkv_b, QkvRanges(c, 2)});
    }
    if (c.qk_layernorm) {  // Qwen3's RMSNorm over each head's hn channels
      const int64_t hn = c.head_dim();
      links.push_back({p + "self_attn.q_norm.weight",
                       {hn},
                       L(i, "self_attention.q_layernorm.weight"),
                       All(hn)});
      links.push_back({p + "self_attn.k_norm.weight",
                       {hn},
                       L(i, "self_attention.k_layernorm.weight"),
                       All(hn)});
    }
    links.push_back(
        {p + "self_attn.o_proj.weight", {h, q}, L(i, "self_attention.linear_proj.weight"), All(h)});
    if (bias) {
      links.push_back(
          {p + "self_attn.o_proj.bias", {h}, L(i, "self_attention.linear_proj.bias"), All(h)});
    }
    links.push_back(
        {p + "post_attention_layernorm.weight", {h}, L(i, "pre_mlp_layernorm.weight"), All(h)});
    if (IsMoEArchitecture(arch)) {
      // The router, then per expert the gate and up projections (the halves of its SwiGLU
      // fc1, [gate; up] as the dense fc1) and the down projection (its fc2). Mixtral names
      // them block_sparse_moe.gate / experts.x.{w1,w3,w2}; Qwen3-MoE mlp.gate /
      // mlp.experts.x.{gate_proj,up_proj,down_proj}.
      const bool mixtral = arch == HfArchitecture::kMixtral;
      const std::string block = p + (mixtral ? "block_sparse_moe." : "mlp.");
      const char* gate_w = mixtral ? "w1.weight" : "gate_proj.weight";
      const char* up_w = mixtral ? "w3.weight" : "up_proj.weight";
      const char* down_w = mixtral ? "w2.weight" : "down_proj.weight";
      const std::string moe = layers::moe::MoEParameterPrefix(i);
      const int64_t e = c.moe->router.num_experts, fe = c.moe->expert.ffn_hidden_size;
      links.push_back({block + "gate.weight", {e, h}, moe + ".router.weight", All(e)});
      for (int64_t x = 0; x < e; ++x) {
        const std::string hx = absl::StrCat(block, "experts.", x, ".");
        const std::string fc1 = absl::StrCat(moe, ".experts.linear_fc1.weight", x);
        const std::string fc2 = absl::StrCat(moe, ".experts.linear_fc2.weight", x);
        links.push_back({hx + gate_w, {fe, h}, fc1, {{0, fe}}});
        links.push_back({hx + up_w, {fe, h}, fc1, {{fe, fe}}});
        links.push_back({hx + down_w, {h, fe}, fc2, All(h)});
      }
      continue;
    }
    links.push_back({p + "mlp.gate_proj.weight", {f, h}, L(i, "mlp.linear_fc1.weight"), {{0, f}}});
    links.push_back({p + "mlp.up_proj.weight", {f, h}, L(i, "mlp.linear_fc1.weight"), {{f, f}}});
    links.push_back({p + "mlp.down_proj.weight", {h, f}, L(i, "mlp.linear_fc2.weight"), All(h)});
    if (bias) {
      links.push_back({p + "mlp.gate_proj.bias", {f}, L(i, "mlp.linear_fc1.bias"), {{0, f}}});
      links.push_back({p + "mlp.up_proj.bias", {f}, L(i, "mlp.linear_fc1.bias"), {{f, f}}});
      links.push_back({p + "mlp.down_proj.bias", {h}, L(i, "mlp.linear_fc2.bias"), All(h)});
    }
  }
  links.push_back({"model.norm.weight", {h}, "decoder.final_layernorm.weight", All(h)});
  if (!c.tied_embeddings())
    links.push_back({"lm_head.weight", {v, h}, "output_layer.weight", All(v)});
  return links;
}

// Gather: the HF tensor of `link` from Megatron values `mg` of shape `shape`.
std::vector<float> Gather(const Link& link, const Shape& shape, const std::vector<float>& mg) {
  const int64_t cols = shape.size() > 1 ? Numel(shape) / shape[0] : 1;
  const int64_t rows = RowCount(link.rows);
  std::vector<float> out(static_cast<size_t>(rows * cols));
  int64_t r = 0;
  for (const auto& [first, count] : link.rows) {
    for (int64_t k = 0; k < count; ++k, ++r) {
      const float* src = mg.data() + (first + k) * cols;
      if (link.transpose) {
        for (int64_t j = 0; j < cols; ++j) out[j * rows + r] = src[j];
      } else {
        std::memcpy(out.data() + r * cols, src, cols * sizeof(float));
      }
    }
  }
  return out;
}

// Scatter: the inverse of Gather, into `mg`.
void Scatter(const Link& link, const Shape& shape, const std::vector<float>& hf,
             std::vector<float>* mg) {
  const int64_t cols = shape.size() > 1 ? Numel(shape) / shape[0] : 1;
  const int64_t rows = RowCount(link.rows);
  int64_t r = 0;
  for (const auto& [first, count] : link.rows) {
    for (int64_t k = 0; k < count; ++k, ++r) {
      float* dst = mg->data() + (first + k) * cols;
      if (link.transpose) {
        for (int64_t j = 0; j < cols; ++j) dst[j] = hf[j * rows + r];
      } else {
        std::memcpy(dst, hf.data() + r * cols, cols * sizeof(float));
      }
    }
  }
}

}  // namespace

std::vector<std::pair<std::string, std::vector<int64_t>>> MegatronTensorShapes(
    const layers::GptConfig& c) {
  const int64_t h = c.hidden_size;
  const bool ln = c.normalization == layers::Normalization::kLayerNorm;
  std::vector<std::pair<std::string, Shape>> s;
  s.push_back({"embedding.word_embeddings.weight", {c.vocab_size, h}});
  if (c.position_embedding_type == layers::PositionEmbeddingType::kLearnedAbsolute) {
    s.push_back({"embedding.position_embeddings.weight", {c.max_position_embeddings, h}});
  }
  for (int64_t i = 0; i < c.num_layers; ++i) {
    s.push_back({L(i, "input_layernorm.weight"), {h}});
    if (ln) s.push_back({L(i, "input_layernorm.bias"), {h}});
    s.push_back({L(i, "self_attention.linear_qkv.weight"), {c.qkv_size(), h}});
    if (c.qkv_has_bias()) s.push_back({L(i, "self_attention.linear_qkv.bias"), {c.qkv_size()}});
    if (c.qk_layernorm) {  // gpt_parameters.cc: after linear_qkv, each over the head dim
      for (const char* n : {"self_attention.q_layernorm", "self_attention.k_layernorm"}) {
        s.push_back({L(i, std::string(n) + ".weight"), {c.head_dim()}});
        if (ln) s.push_back({L(i, std::string(n) + ".bias"), {c.head_dim()}});
      }
    }
    s.push_back({L(i, "self_attention.linear_proj.weight"), {h, c.attention_projection_size()}});
    if (c.add_bias_linear) s.push_back({L(i, "self_attention.linear_proj.bias"), {h}});
    s.push_back({L(i, "pre_mlp_layernorm.weight"), {h}});
    if (ln) s.push_back({L(i, "pre_mlp_layernorm.bias"), {h}});
    if (c.is_moe_layer(i)) {
      // layers/moe/moe_layer.h: the router, every expert (whatever the run's expert-parallel
      // layout: checkpoints hold them under their global index), the shared expert.
      const layers::moe::MoELayerConfig& m = *c.moe;
      const std::string moe = layers::moe::MoEParameterPrefix(i);
      s.push_back({moe + ".router.weight", {m.router.num_experts, h}});
      auto mlp = [&](const std::string& base, const std::string& suffix, int64_t f) {
        const int64_t f1 = m.expert.swiglu ? 2 * f : f;
        s.push_back({base + ".linear_fc1.weight" + suffix, {f1, h}});
        if (m.expert.add_bias) s.push_back({base + ".linear_fc1.bias" + suffix, {f1}});
        s.push_back({base + ".linear_fc2.weight" + suffix, {h, f}});
        if (m.expert.add_bias) s.push_back({base + ".linear_fc2.bias" + suffix, {h}});
      };
      for (int64_t x = 0; x < m.router.num_experts; ++x) {
        mlp(moe + ".experts", absl::StrCat(x), m.expert.ffn_hidden_size);
      }
      if (m.shared_expert_ffn_hidden_size > 0) {
        mlp(moe + ".shared_experts", "", m.shared_expert_ffn_hidden_size);
      }
      continue;
    }
    s.push_back({L(i, "mlp.linear_fc1.weight"), {c.fc1_size(), h}});
    if (c.add_bias_linear) s.push_back({L(i, "mlp.linear_fc1.bias"), {c.fc1_size()}});
    s.push_back({L(i, "mlp.linear_fc2.weight"), {h, c.ffn_hidden_size}});
    if (c.add_bias_linear) s.push_back({L(i, "mlp.linear_fc2.bias"), {h}});
  }
  s.push_back({"decoder.final_layernorm.weight", {h}});
  if (ln) s.push_back({"decoder.final_layernorm.bias", {h}});
  if (!c.tied_embeddings()) s.push_back({"output_layer.weight", {c.vocab_size, h}});
  return s;
}

absl::StatusOr<HfTensors> ToHfTensors(const layers::GptConfig& config, HfArchitecture arch,
                                      const TensorFetch& fetch, std::vector<std::string>* names) {
  std::map<std::string, Shape> shapes;
  for (auto& [name, shape] : MegatronTensorShapes(config)) shapes[name] = shape;
  HfTensors out;
  names->clear();
  std::string cached_name;
  std::vector<float> cached;
  for (const Link& link : Links(config, arch)) {
    const Shape& shape = shapes.at(link.mg);
    if (link.mg != cached_name) {
      MXMACA_ASSIGN_OR_RETURN(cached, fetch(link.mg, shape));
      cached_name = link.mg;
    }
    HfTensor t;
    t.shape = link.hf_shape;
    t.values = Gather(link, shape, cached);
    out[link.hf] = std::move(t);
    names->push_back(link.hf);
  }
  return out;
}

absl::StatusOr<std::vector<MegatronTensor>> FromHfTensors(const layers::GptConfig& config,
                                                          HfArchitecture arch, HfTensors hf,
                                                          const std::string& source) {
  if (arch == HfArchitecture::kGpt2) {
    // GPT2Model's own saves lack the prefix; the mask buffers are not parameters.
    HfTensors renamed;
    for (auto& [name, t] : hf) {
      if (absl::EndsWith(name, ".attn.bias") || absl::EndsWith(name, ".attn.masked_bias")) continue;
      renamed[absl::StartsWith(name, "transformer.") || name == "lm_head.weight"
                  ? name
                  : "transformer." + name] = std::move(t);
    }
    hf = std::move(renamed);
  }
  std::map<std::string, MegatronTensor> mg;
  std::vector<MegatronTensor> order;
  for (auto& [name, shape] : MegatronTensorShapes(config)) {
    mg[name] = {name, shape, std::vector<float>(static_cast<size_t>(Numel(shape)))};
  }
  for (const Link& link : Links(config, arch)) {
    auto it = hf.find(link.hf);
    if (it == hf.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, " has no tensor ", link.hf, " (", ShapeStr(link.hf_shape), ")"));
    }
    if (it->second.shape != link.hf_shape) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": tensor ", link.hf, " has shape ",
                                                     ShapeStr(it->second.shape), ", expected ",
                                                     ShapeStr(link.hf_shape), " from config.json"));
    }
    MegatronTensor& t = mg.at(link.mg);
    Scatter(link, t.shape, it->second.values, &t.values);
    hf.erase(it);
  }
  for (const auto& [name, t] : hf) {
    if (absl::EndsWith(name, "rotary_emb.inv_freq")) continue;
    if (name == "lm_head.weight" && config.tied_embeddings()) {
      // Some tied models save the output layer as well: accepted when it is the embedding.
      const MegatronTensor& emb = mg.at("embedding.word_embeddings.weight");
      if (t.shape == emb.shape &&
          std::memcmp(t.values.data(), emb.values.data(), t.values.size() * sizeof(float)) == 0) {
        continue;
      }
      return absl::InvalidArgumentError(
          absl::StrCat(source,
                       " has an lm_head.weight that differs from the embedding, but config.json "
                       "says tie_word_embeddings: true"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(source, " has tensor ", name, " ", ShapeStr(t.shape),
                     ", which the model config.json describes has no place for"));
  }
  for (auto& [name, shape] : MegatronTensorShapes(config)) order.push_back(std::move(mg.at(name)));
  return order;
}

}  // namespace mxmaca::api::convert
