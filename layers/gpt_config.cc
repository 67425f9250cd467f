// layers/gpt_config.cc: parsing of Megatron's enum flags and GptConfig::Validate.
#include "layers/gpt_config.h"

#include "absl/strings/str_cat.h"

namespace mxmaca::layers {

absl::StatusOr<PositionEmbeddingType> ParsePositionEmbeddingType(const std::string& s) {
  if (s == "learned_absolute") return PositionEmbeddingType::kLearnedAbsolute;
  if (s == "rope") return PositionEmbeddingType::kRope;
  if (s == "none") return PositionEmbeddingType::kNone;
  return absl::InvalidArgumentError(absl::StrCat("--position-embedding-type: got '", s,
                                                 "', expected learned_absolute, rope or none"));
}

absl::StatusOr<Normalization> ParseNormalization(const std::string& s) {
  if (s == "LayerNorm") return Normalization::kLayerNorm;
  if (s == "RMSNorm") return Normalization::kRmsNorm;
  return absl::InvalidArgumentError(
      absl::StrCat("--normalization: got '", s, "', expected LayerNorm or RMSNorm"));
}

absl::StatusOr<RecomputeGranularity> ParseRecomputeGranularity(const std::string& s) {
  if (s == "full") return RecomputeGranularity::kFull;
  if (s == "selective") return RecomputeGranularity::kSelective;
  if (s.empty() || s == "none") return RecomputeGranularity::kNone;
  return absl::InvalidArgumentError(
      absl::StrCat("--recompute-granularity: got '", s, "', expected full or selective"));
}

absl::StatusOr<RecomputeMethod> ParseRecomputeMethod(const std::string& s) {
  if (s == "uniform") return RecomputeMethod::kUniform;
  if (s == "block") return RecomputeMethod::kBlock;
  return absl::InvalidArgumentError(
      absl::StrCat("--recompute-method: got '", s, "', expected uniform or block"));
}

namespace {

absl::Status Positive(const char* flag, int64_t v) {
  if (v > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(flag, ": got ", v, ", expected > 0"));
}

absl::Status Probability(const char* flag, float p) {
  if (p >= 0.0f && p < 1.0f) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(flag, ": got ", p, ", expected in [0, 1)"));
}

}  // namespace

absl::Status GptConfig::Validate() const {
  for (const auto& [flag, v] : {std::pair<const char*, int64_t>{"--num-layers", num_layers},
                                {"--hidden-size", hidden_size},
                                {"--ffn-hidden-size", ffn_hidden_size},
                                {"--num-attention-heads", num_attention_heads},
                                {"--seq-length", seq_length},
                                {"vocab_size", vocab_size},
                                {"padded_vocab_size", padded_vocab_size}}) {
    if (absl::Status s = Positive(flag, v); !s.ok()) return s;
  }
  if (num_query_groups < 0 || num_attention_heads % query_groups() != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--num-query-groups: got ", num_query_groups,
                                                   ", expected a divisor of --num-attention-heads ",
                                                   num_attention_heads));
  }
  if (kv_channels == 0 && hidden_size % num_attention_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--hidden-size ", hidden_size, " is not divisible by --num-attention-heads ",
                     num_attention_heads, " and --kv-channels is not given"));
  }
  if (kv_channels < 0) return Positive("--kv-channels", kv_channels);
  if (vocab_size > padded_vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("padded_vocab_size ", padded_vocab_size,
                                                   " is smaller than vocab_size ", vocab_size));
  }
  if (position_embedding_type == PositionEmbeddingType::kLearnedAbsolute &&
      max_position_embeddings < seq_length) {
    return absl::InvalidArgumentError(absl::StrCat("--max-position-embeddings: got ",
                                                   max_position_embeddings,
                                                   ", expected >= --seq-length ", seq_length));
  }
  if (position_embedding_type == PositionEmbeddingType::kRope) {
    const int64_t rd = rotary_dim();
    if (rd <= 0 || rd % 2 != 0 || rd > head_dim()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--rotary-percent ", rotary_percent, " gives rotary dim ", rd,
                       " for head dim ", head_dim(), ", expected an even number in [2, head dim]"));
    }
  }
  if (!(norm_epsilon > 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--norm-epsilon: got ", norm_epsilon, ", expected > 0"));
  }
  if (absl::Status s = Probability("--hidden-dropout", hidden_dropout); !s.ok()) return s;
  if (absl::Status s = Probability("--attention-dropout", attention_dropout); !s.ok()) return s;
  if (!(init_method_std > 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--init-method-std: got ", init_method_std, ", expected > 0"));
  }
  if (recompute_granularity == RecomputeGranularity::kFull && recompute_num_layers < 1) {
    return Positive("--recompute-num-layers", recompute_num_layers);
  }
  if (num_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_threads: got ", num_threads, ", expected >= 1"));
  }
  if (rope_scaling && !(rope_scaling_factor > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rope-scaling-factor ", rope_scaling_factor, ": expected > 0 with --use-rope-scaling"));
  }
  if (rotary_seq_len_interpolation_factor != 0.0f &&
      !(rotary_seq_len_interpolation_factor >= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rotary-seq-len-interpolation-factor ", rotary_seq_len_interpolation_factor,
        ": expected >= 1 (positions are divided by it)"));
  }
  if (loss_chunk_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loss_chunk_tokens: got ", loss_chunk_tokens, ", expected >= 0 (0: never chunk)"));
  }
  if (apply_residual_connection_post_layernorm) {
    return absl::InvalidArgumentError(
        "--apply-residual-connection-post-layernorm is not supported (pre-norm residuals only)");
  }
  return absl::OkStatus();
}

}  // namespace mxmaca::layers
