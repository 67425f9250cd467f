// api/train/train_setup.cc: see train_setup.h.
#include "api/train/train_setup.h"

#include "api/train/moe_setup.h"
#include "layers/moe/moe_layer.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/numbers.h"
#include "base/status_macros.h"

namespace mxmaca::api {

absl::StatusOr<layers::GptConfig> GptConfigFromArgs(const MegatronArgs& a, int64_t vocab_size) {
  layers::GptConfig c;
  c.num_layers = a.num_layers.value_or(0);
  c.hidden_size = a.hidden_size.value_or(0);
  c.ffn_hidden_size = a.ffn_hidden_size.value_or(0);
  c.num_attention_heads = a.num_attention_heads.value_or(0);
  c.num_query_groups = a.group_query_attention ? a.num_query_groups : 0;
  c.kv_channels = a.kv_channels.value_or(0);
  c.seq_length = a.seq_length.value_or(0);
  c.max_position_embeddings = a.max_position_embeddings.value_or(c.seq_length);
  c.vocab_size = vocab_size;
  // --padded-vocab-size as given, else Megatron's padding of the tokenizer's vocabulary.
  c.padded_vocab_size = a.padded_vocab_size_given && a.padded_vocab_size
                            ? *a.padded_vocab_size
                            : PaddedVocabSize(vocab_size, a.make_vocab_size_divisible_by,
                                              a.tensor_model_parallel_size);
  if (c.padded_vocab_size < vocab_size || c.padded_vocab_size % a.tensor_model_parallel_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--padded-vocab-size ", c.padded_vocab_size, " must be >= the vocabulary size (",
        vocab_size, ") and divisible by --tensor-model-parallel-size (",
        a.tensor_model_parallel_size, ")"));
  }
  c.softmax_over_padded_vocab = a.softmax_over_padded_vocab;
  MXMACA_ASSIGN_OR_RETURN(c.position_embedding_type,
                          layers::ParsePositionEmbeddingType(a.position_embedding_type));
  c.rotary_base = static_cast<float>(a.rotary_base);
  c.rotary_percent = static_cast<float>(a.rotary_percent);
  c.rope_scaling = a.use_rope_scaling;
  c.rotary_interleaved = a.rotary_interleaved;
  c.rope_scaling_factor = static_cast<float>(a.rope_scaling_factor);
  c.rotary_seq_len_interpolation_factor =
      static_cast<float>(a.rotary_seq_len_interpolation_factor.value_or(0));
  MXMACA_ASSIGN_OR_RETURN(c.normalization, layers::ParseNormalization(a.normalization));
  c.norm_epsilon = static_cast<float>(a.norm_epsilon);
  c.apply_layernorm_1p = a.apply_layernorm_1p;
  c.qk_layernorm = a.qk_layernorm;  // LayerNorm and RMSNorm (gpt_config.h)
  c.swiglu = a.swiglu;
  // Megatron's MLP (megatron/core/transformer/mlp.py) with bias_activation_fusion applies
  // bias_gelu_impl, the tanh approximation, when there are biases and no gated unit.
  c.gelu_tanh_approximation = a.bias_gelu_fusion && a.add_bias_linear && !a.swiglu;
  c.untie_embeddings_and_output_weights = a.untie_embeddings_and_output_weights;
  c.add_bias_linear = a.add_bias_linear;
  c.add_qkv_bias = a.add_qkv_bias;  // validate_args sets it with add_bias_linear
  c.hidden_dropout = static_cast<float>(a.hidden_dropout);
  c.attention_dropout = static_cast<float>(a.attention_dropout);
  c.init_method_std = static_cast<float>(a.init_method_std);
  c.seed = static_cast<uint64_t>(a.seed);
  if (a.recompute_granularity) {
    MXMACA_ASSIGN_OR_RETURN(c.recompute_granularity,
                            layers::ParseRecomputeGranularity(*a.recompute_granularity));
  }
  if (a.recompute_method) {
    MXMACA_ASSIGN_OR_RETURN(c.recompute_method, layers::ParseRecomputeMethod(*a.recompute_method));
  }
  c.recompute_num_layers = a.recompute_num_layers.value_or(1);
  c.precision = a.bf16 ? kernels::Precision::kBf16 : kernels::Precision::kFp32;
  c.num_threads = static_cast<int>(a.num_threads.value_or(1));
  c.apply_residual_connection_post_layernorm = a.apply_residual_connection_post_layernorm;
  MXMACA_RETURN_IF_ERROR(c.Validate());
  MXMACA_RETURN_IF_ERROR(AddMoEConfig(a, &c));  // --num-experts (moe_setup.h)
  return c;
}

int64_t TrainIters(const MegatronArgs& a) {
  if (a.train_iters) return *a.train_iters;
  if (a.train_samples && a.global_batch_size && *a.global_batch_size > 0) {
    return *a.train_samples / *a.global_batch_size;
  }
  return 0;
}

absl::StatusOr<layers::OptimizerParamSchedulerConfig> SchedulerConfigFromArgs(
    const MegatronArgs& a) {
  layers::OptimizerParamSchedulerConfig c;
  const int64_t gbs = a.global_batch_size.value_or(1);
  double warmup = 0.0;
  if (a.train_iters) {
    const int64_t decay_iters = a.lr_decay_iters.value_or(*a.train_iters);
    c.lr_decay_steps = decay_iters * gbs;
    c.wd_incr_steps = *a.train_iters * gbs;
    warmup = a.lr_warmup_fraction ? *a.lr_warmup_fraction * static_cast<double>(c.lr_decay_steps)
                                  : static_cast<double>(a.lr_warmup_iters * gbs);
  } else if (a.train_samples) {
    c.lr_decay_steps = a.lr_decay_samples.value_or(*a.train_samples);
    c.wd_incr_steps = *a.train_samples;
    warmup = a.lr_warmup_fraction ? *a.lr_warmup_fraction * static_cast<double>(c.lr_decay_steps)
                                  : static_cast<double>(a.lr_warmup_samples);
  } else {
    return absl::InvalidArgumentError("one of --train-iters or --train-samples is required");
  }
  c.lr_warmup_steps = static_cast<int64_t>(warmup);
  if (!a.lr) return absl::InvalidArgumentError("--lr is required");
  for (const auto& [flag, value] : {std::pair<const char*, double>{"--lr", *a.lr},
                                    {"--min-lr", a.min_lr},
                                    {"--lr-warmup-init", a.lr_warmup_init},
                                    {"--weight-decay", a.weight_decay}}) {
    if (!std::isfinite(value) || value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " ", value, ": expected a finite number >= 0"));
    }
  }
  c.max_lr = *a.lr;
  c.min_lr = a.min_lr;
  c.init_lr = a.lr_warmup_init;
  MXMACA_ASSIGN_OR_RETURN(c.lr_decay_style, layers::ParseLrDecayStyle(a.lr_decay_style));
  c.start_wd = a.start_weight_decay.value_or(a.weight_decay);
  c.end_wd = a.end_weight_decay.value_or(a.weight_decay);
  MXMACA_ASSIGN_OR_RETURN(c.wd_incr_style, layers::ParseWdIncrStyle(a.weight_decay_incr_style));
  c.decoupled_lr = a.decoupled_lr;  // --decoupled-lr / --decoupled-min-lr
  c.decoupled_min_lr = a.decoupled_min_lr;
  return c;
}

layers::DenseGptShape DenseShape(const layers::GptConfig& c) {
  layers::DenseGptShape s;
  s.num_layers = c.num_layers;
  s.hidden_size = c.hidden_size;
  s.ffn_hidden_size = c.ffn_hidden_size;
  s.num_attention_heads = c.num_attention_heads;
  s.num_query_groups = c.query_groups();
  s.kv_channels = c.head_dim();
  s.seq_length = c.seq_length;
  s.padded_vocab_size = c.padded_vocab_size;
  s.swiglu = c.swiglu;
  if (c.moe) {
    for (int64_t l = 0; l < c.num_layers; ++l) s.num_moe_layers += c.is_moe_layer(l) ? 1 : 0;
    s.moe_ffn_hidden_size = c.moe->expert.ffn_hidden_size;
    s.moe_router_topk = c.moe->router.topk;
    s.shared_expert_ffn_hidden_size = c.moe->shared_expert_ffn_hidden_size;
  }
  return s;
}

// ParseStageSlowdown: --inject-stage-slowdown STAGE:FACTOR[:FROM_ITER].
absl::Status ParseStageSlowdown(const std::string& value, int32_t pipeline_size, int32_t* stage,
                                double* factor, int64_t* from) {
  const std::vector<std::string> parts = absl::StrSplit(value, ':');
  int64_t s = -1, f_iter = 1;
  double f = 0;
  const bool ok = (parts.size() == 2 || parts.size() == 3) && absl::SimpleAtoi(parts[0], &s) &&
                  absl::SimpleAtod(parts[1], &f) &&
                  (parts.size() == 2 || absl::SimpleAtoi(parts[2], &f_iter));
  if (!ok || s < 0 || s >= pipeline_size || !(f >= 1.0) || !std::isfinite(f) || f_iter < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--inject-stage-slowdown ", value, ": expected STAGE:FACTOR[:FROM_ITER] with 0 <= STAGE < ",
        pipeline_size, ", FACTOR >= 1 and FROM_ITER >= 1"));
  }
  *stage = static_cast<int32_t>(s);
  *factor = f;
  *from = f_iter;
  return absl::OkStatus();
}

}  // namespace mxmaca::api
