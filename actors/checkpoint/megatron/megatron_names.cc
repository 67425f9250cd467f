// actors/checkpoint/megatron/megatron_names.cc: see megatron_names.h.
#include "actors/checkpoint/megatron/megatron_names.h"

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace mxmaca::actors::checkpoint::megatron {
namespace {

constexpr char kLayers[] = "decoder.layers.";

constexpr const char* kTopLevel[] = {
    "embedding.word_embeddings.weight", "embedding.position_embeddings.weight",
    "decoder.final_layernorm.weight",   "decoder.final_layernorm.bias",
    "output_layer.weight",
};

// Per-layer parameter suffixes MXMACA knows (besides routed experts).
constexpr const char* kLayerParams[] = {
    "input_layernorm.weight",       "input_layernorm.bias",
    "self_attention.linear_qkv.weight", "self_attention.linear_qkv.bias",
    "self_attention.linear_proj.weight", "self_attention.linear_proj.bias",
    "pre_mlp_layernorm.weight",     "pre_mlp_layernorm.bias",
    "mlp.linear_fc1.weight",        "mlp.linear_fc1.bias",
    "mlp.linear_fc2.weight",        "mlp.linear_fc2.bias",
    "mlp.router.weight",            "mlp.router.expert_bias",
    "mlp.shared_experts.linear_fc1.weight", "mlp.shared_experts.linear_fc1.bias",
    "mlp.shared_experts.linear_fc2.weight", "mlp.shared_experts.linear_fc2.bias",
};

struct Renamed {
  const char* local;
  const char* te;
  bool dense_only;
};
constexpr Renamed kTeNames[] = {
    {"input_layernorm.weight", "self_attention.linear_qkv.layer_norm_weight", false},
    {"input_layernorm.bias", "self_attention.linear_qkv.layer_norm_bias", false},
    {"pre_mlp_layernorm.weight", "mlp.linear_fc1.layer_norm_weight", true},
    {"pre_mlp_layernorm.bias", "mlp.linear_fc1.layer_norm_bias", true},
};

bool In(absl::string_view s, absl::Span<const char* const> list) {
  for (const char* c : list) {
    if (s == c) return true;
  }
  return false;
}

// SplitLayer: "decoder.layers.<n>.<rest>" -> (n, rest).
bool SplitLayer(absl::string_view name, int64_t* n, std::string* rest) {
  if (!absl::StartsWith(name, kLayers)) return false;
  absl::string_view tail = name.substr(std::strlen(kLayers));
  const size_t dot = tail.find('.');
  if (dot == absl::string_view::npos || !absl::SimpleAtoi(tail.substr(0, dot), n) || *n < 0) {
    return false;
  }
  *rest = std::string(tail.substr(dot + 1));
  return true;
}

// ExpertParam: "linear_fc1.weight12" -> ("linear_fc1", "weight", 12).
bool ExpertParam(absl::string_view s, std::string* fc, std::string* kind, int64_t* index) {
  for (const char* f : {"linear_fc1.", "linear_fc2."}) {
    if (!absl::StartsWith(s, f)) continue;
    absl::string_view p = s.substr(std::strlen(f));
    for (const char* k : {"weight", "bias"}) {
      if (absl::StartsWith(p, k) && p.size() > std::strlen(k) &&
          absl::SimpleAtoi(p.substr(std::strlen(k)), index) && *index >= 0) {
        *fc = std::string(f, std::strlen(f) - 1);
        *kind = k;
        return true;
      }
    }
  }
  return false;
}

}  // namespace

bool IsRoutedExpert(const std::string& logical) {
  return logical.find(".mlp.experts.") != std::string::npos;
}

TpSplit SplitOf(const std::string& logical, const ModelNaming& naming) {
  if (logical == "embedding.word_embeddings.weight" || logical == "output_layer.weight") {
    return TpSplit::kRows;
  }
  if (IsRoutedExpert(logical)) return TpSplit::kReplicated;
  auto ends = [&](const char* s) { return absl::EndsWith(logical, s); };
  if (ends("self_attention.linear_qkv.weight") || ends("self_attention.linear_qkv.bias")) {
    return TpSplit::kRows;
  }
  if (ends("self_attention.linear_proj.weight")) return TpSplit::kColumns;
  if (ends("linear_fc1.weight") || ends("linear_fc1.bias")) {
    return naming.swiglu ? TpSplit::kGateUpRows : TpSplit::kRows;
  }
  if (ends("linear_fc2.weight")) return TpSplit::kColumns;
  return TpSplit::kReplicated;
}

absl::StatusOr<std::string> MegatronKeyFor(const std::string& logical, const ModelNaming& naming,
                                           int64_t first_layer, int ep_rank, bool dense_layer) {
  if (In(logical, kTopLevel)) return logical;
  int64_t n;
  std::string rest;
  if (!SplitLayer(logical, &n, &rest) || n < first_layer) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no Megatron key for '", logical, "' (a stage starting at layer ", first_layer, ")"));
  }
  const std::string prefix = absl::StrCat(kLayers, n - first_layer, ".");
  if (absl::StartsWith(rest, "mlp.experts.")) {
    std::string fc, kind;
    int64_t i;
    if (naming.num_experts <= 0 || naming.expert_parallel_size <= 0 ||
        !ExpertParam(absl::string_view(rest).substr(12), &fc, &kind, &i) || i >= naming.num_experts) {
      return absl::InvalidArgumentError(absl::StrCat("no Megatron key for expert tensor '", logical, "'"));
    }
    const int64_t local = naming.num_experts / naming.expert_parallel_size;
    if (i / local != ep_rank) return std::string();
    const int64_t j = i % local;
    if (naming.grouped_gemm) return absl::StrCat(prefix, "mlp.experts.", fc, ".", kind, j);
    return absl::StrCat(prefix, "mlp.experts.local_experts.", j, ".", fc, ".", kind);
  }
  if (!In(rest, kLayerParams)) {
    return absl::InvalidArgumentError(absl::StrCat("no Megatron key for '", logical, "'"));
  }
  if (naming.spec == LayerSpec::kTransformerEngine) {
    for (const Renamed& r : kTeNames) {
      if (rest == r.local && (dense_layer || !r.dense_only)) return prefix + r.te;
    }
  }
  return prefix + rest;
}

absl::StatusOr<std::optional<std::string>> LogicalNameFor(const std::string& key,
                                                          const ModelNaming& naming,
                                                          int64_t first_layer, int ep_rank) {
  if (absl::EndsWith(key, "._extra_state")) return std::optional<std::string>();
  if (In(key, kTopLevel)) return std::optional<std::string>(key);
  int64_t n;
  std::string rest;
  if (!SplitLayer(key, &n, &rest)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "state-dict key '", key, "' is not a GPT parameter MXMACA maps (megatron_names.h)"));
  }
  const std::string prefix = absl::StrCat(kLayers, n + first_layer, ".");
  for (const Renamed& r : kTeNames) {
    if (rest == r.te) return std::optional<std::string>(prefix + r.local);
  }
  if (absl::StartsWith(rest, "mlp.experts.")) {
    if (naming.num_experts <= 0 || naming.expert_parallel_size <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("expert key '", key, "' in a checkpoint whose args have no num_experts"));
    }
    const int64_t local = naming.num_experts / naming.expert_parallel_size;
    absl::string_view tail = absl::string_view(rest).substr(12);
    std::string fc, kind;
    int64_t j = -1;
    if (absl::StartsWith(tail, "local_experts.")) {
      std::vector<std::string> parts = absl::StrSplit(tail.substr(14), absl::MaxSplits('.', 1));
      if (parts.size() == 2 && absl::SimpleAtoi(parts[0], &j) &&
          (parts[1] == "linear_fc1.weight" || parts[1] == "linear_fc1.bias" ||
           parts[1] == "linear_fc2.weight" || parts[1] == "linear_fc2.bias")) {
        fc = parts[1].substr(0, 10);
        kind = parts[1].substr(11);
      } else {
        j = -1;
      }
    } else if (!ExpertParam(tail, &fc, &kind, &j)) {
      j = -1;
    }
    if (j < 0 || j >= local) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expert key '", key, "' is not one MXMACA maps (TEGroupedMLP linear_fc*.weight<j> or "
          "SequentialMLP local_experts.<j>.linear_fc*; the legacy GroupedMLP weight1/weight2 "
          "layout is not read)"));
    }
    return std::optional<std::string>(absl::StrCat(prefix, "mlp.experts.", fc, ".", kind, ep_rank * local + j));
  }
  if (!In(rest, kLayerParams)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "state-dict key '", key, "' is not a GPT parameter MXMACA maps (megatron_names.h)"));
  }
  return std::optional<std::string>(prefix + rest);
}

std::vector<std::string> ExtraStateKeys(int64_t n, const ModelNaming& naming, bool dense_layer,
                                        bool shared_experts) {
  std::vector<std::string> keys;
  if (naming.spec != LayerSpec::kTransformerEngine) return keys;
  const std::string p = absl::StrCat(kLayers, n, ".");
  keys.push_back(p + "self_attention.core_attention._extra_state");
  keys.push_back(p + "self_attention.linear_proj._extra_state");
  keys.push_back(p + "self_attention.linear_qkv._extra_state");
  if (dense_layer) {
    keys.push_back(p + "mlp.linear_fc1._extra_state");
    keys.push_back(p + "mlp.linear_fc2._extra_state");
    return keys;
  }
  if (naming.grouped_gemm) {
    keys.push_back(p + "mlp.experts.linear_fc1._extra_state");
    keys.push_back(p + "mlp.experts.linear_fc2._extra_state");
  } else if (naming.expert_parallel_size > 0) {
    for (int64_t j = 0; j < naming.num_experts / naming.expert_parallel_size; ++j) {
      keys.push_back(absl::StrCat(p, "mlp.experts.local_experts.", j, ".linear_fc1._extra_state"));
      keys.push_back(absl::StrCat(p, "mlp.experts.local_experts.", j, ".linear_fc2._extra_state"));
    }
  }
  if (shared_experts) {
    keys.push_back(p + "mlp.shared_experts.linear_fc1._extra_state");
    keys.push_back(p + "mlp.shared_experts.linear_fc2._extra_state");
  }
  return keys;
}

absl::StatusOr<std::vector<int64_t>> ShardShape(const std::string& logical, TpSplit split,
                                                const std::vector<int64_t>& full, int tp) {
  std::vector<int64_t> s = full;
  if (split == TpSplit::kReplicated || tp == 1) return s;
  const size_t dim = split == TpSplit::kColumns ? 1 : 0;
  const int64_t div = split == TpSplit::kGateUpRows ? 2 * tp : tp;
  if (full.size() <= dim || full[dim] % div != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        logical, ": dimension ", dim, " of its shape is not divisible by ", div,
        " (tensor-model-parallel size ", tp, split == TpSplit::kGateUpRows ? ", SwiGLU halves" : "", ")"));
  }
  s[dim] = full[dim] / tp;
  return s;
}

namespace {

// ForEachRun: calls f(full_offset, shard_offset, count) for the contiguous runs that
// make up TP rank t's shard.
template <typename F>
void ForEachRun(TpSplit split, const std::vector<int64_t>& full, int t, int tp, F f) {
  int64_t numel = 1;
  for (int64_t d : full) numel *= d;
  if (split == TpSplit::kReplicated || tp == 1) {
    f(0, 0, numel);
    return;
  }
  const int64_t rows = full[0];
  const int64_t row = rows == 0 ? 0 : numel / rows;
  if (split == TpSplit::kRows) {
    const int64_t r = rows / tp;
    f(t * r * row, 0, r * row);
  } else if (split == TpSplit::kGateUpRows) {
    const int64_t half = rows / 2, r = half / tp;
    f(t * r * row, 0, r * row);                   // gate rows
    f((half + t * r) * row, r * row, r * row);    // up rows
  } else {  // columns of a [rows, cols] matrix
    const int64_t cols = full[1], c = cols / tp;
    const int64_t inner = row / cols;  // 1 for a matrix
    for (int64_t i = 0; i < rows; ++i) f((i * cols + t * c) * inner, i * c * inner, c * inner);
  }
}

}  // namespace

std::vector<float> ExtractShard(TpSplit split, const std::vector<int64_t>& full,
                                const float* full_data, int t, int tp) {
  std::vector<float> out;
  ForEachRun(split, full, t, tp, [&](int64_t src, int64_t dst, int64_t n) {
    if (out.size() < static_cast<size_t>(dst + n)) out.resize(static_cast<size_t>(dst + n));
    std::memcpy(out.data() + dst, full_data + src, static_cast<size_t>(n) * 4);
  });
  return out;
}

void PlaceShard(TpSplit split, const std::vector<int64_t>& full, const float* shard, int t, int tp,
                float* full_data) {
  ForEachRun(split, full, t, tp, [&](int64_t dst, int64_t src, int64_t n) {
    std::memcpy(full_data + dst, shard + src, static_cast<size_t>(n) * 4);
  });
}

}  // namespace mxmaca::actors::checkpoint::megatron
