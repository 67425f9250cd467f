// api/args/megatron_args.cc: ParseMegatronArgs (argparse semantics over the flag
// table) and the bindings from Megatron dests to MegatronArgs fields.
#include "api/args/megatron_args.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "api/args/did_you_mean.h"
#include "api/args/flag_table.h"
#include "base/status_macros.h"

namespace mxmaca::api {
namespace {

// FlagValue: one occurrence of a flag on the command line, after type checks.
struct FlagValue {
  bool boolean = false;            // store_true / store_false / BooleanOptional
  std::vector<std::string> texts;  // kStore: the value(s) as typed
  std::vector<int64_t> ints;       // kInt: the parsed values
  std::vector<double> floats;      // kFloat: the parsed values
};

// Assign: copies a FlagValue into a MegatronArgs field of each supported type.
void Assign(bool* field, const FlagValue& v) { *field = v.boolean; }
void Assign(int64_t* field, const FlagValue& v) { *field = v.ints.at(0); }
void Assign(std::optional<int64_t>* field, const FlagValue& v) { *field = v.ints.at(0); }
void Assign(double* field, const FlagValue& v) { *field = v.floats.at(0); }
void Assign(std::optional<double>* field, const FlagValue& v) { *field = v.floats.at(0); }
void Assign(std::string* field, const FlagValue& v) { *field = v.texts.at(0); }
void Assign(std::optional<std::string>* field, const FlagValue& v) { *field = v.texts.at(0); }
void Assign(std::vector<std::string>* field, const FlagValue& v) { *field = v.texts; }
void Assign(std::vector<double>* field, const FlagValue& v) { *field = v.floats; }

// Python reprs of field values (FormatMegatronArgs, MegatronArgRepr).

// PyFloat: Python's repr(float): the shortest digits that round-trip, in fixed
// notation when the decimal exponent is in [-4, 16), else as "1.5e-05"/"1e+16".
std::string PyFloat(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string sci;
  for (int digits = 1; digits <= 17; ++digits) {
    sci = absl::StrFormat("%.*e", digits - 1, v);
    if (std::strtod(sci.c_str(), nullptr) == v) break;
  }
  const bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  const size_t e = sci.find('e');
  const int exponent = std::atoi(sci.c_str() + e + 1);
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exponent < -4 || exponent >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) absl::StrAppend(&out, ".", digits.substr(1));
    absl::StrAppend(&out, absl::StrFormat("e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent)));
  } else if (exponent >= 0) {
    const size_t int_len = exponent + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  } else {
    out = "0." + std::string(-exponent - 1, '0') + digits;
  }
  return negative ? "-" + out : out;
}
// PyStr: Python's repr(str) for ASCII text: single quotes unless the text has a single
// quote and no double quote; backslash, quote, \n, \r, \t and other control bytes
// escaped.
std::string PyStr(const std::string& v) {
  const char quote =
      (v.find('\'') != std::string::npos && v.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : v) {
    if (c == '\\' || c == quote) {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += absl::StrFormat("\\x%02x", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}
std::string Repr(const bool& v) { return v ? "True" : "False"; }
std::string Repr(const int64_t& v) { return absl::StrCat(v); }
std::string Repr(const double& v) { return PyFloat(v); }
std::string Repr(const std::string& v) { return PyStr(v); }
template <typename T>
std::string Repr(const std::optional<T>& v) {
  return v.has_value() ? Repr(*v) : "None";
}
template <typename T>
std::string Repr(const std::vector<T>& v) {
  return absl::StrCat(
      "[", absl::StrJoin(v, ", ", [](std::string* o, const T& x) { o->append(Repr(x)); }), "]");
}

struct Binding {
  void (*set)(MegatronArgs*, const FlagValue&);
  std::string (*repr)(const MegatronArgs&);
};

template <auto Member>
void Set(MegatronArgs* args, const FlagValue& v) {
  Assign(&(args->*Member), v);
}
template <auto Member>
std::string Get(const MegatronArgs& args) {
  return Repr(args.*Member);
}

#define MXMACA_BIND(field)                                                     \
  {                                                                            \
#field, Binding { &Set<&MegatronArgs::field>, &Get<&MegatronArgs::field> } \
  }

// Every kImplemented dest of the flag table -> its MegatronArgs field.
const absl::flat_hash_map<std::string, Binding>& Bindings() {
  static const auto* bindings = new absl::flat_hash_map<std::string, Binding>{
      MXMACA_BIND(num_layers),
      MXMACA_BIND(hidden_size),
      MXMACA_BIND(ffn_hidden_size),
      MXMACA_BIND(num_attention_heads),
      MXMACA_BIND(kv_channels),
      MXMACA_BIND(group_query_attention),
      MXMACA_BIND(num_query_groups),
      MXMACA_BIND(max_position_embeddings),
      MXMACA_BIND(position_embedding_type),
      MXMACA_BIND(rotary_base),
      MXMACA_BIND(rotary_percent),
      MXMACA_BIND(rotary_interleaved),
      MXMACA_BIND(rotary_seq_len_interpolation_factor),
      MXMACA_BIND(use_rope_scaling),
      MXMACA_BIND(rope_scaling_factor),
      MXMACA_BIND(use_rotary_position_embeddings),
      MXMACA_BIND(add_position_embedding),
      MXMACA_BIND(normalization),
      MXMACA_BIND(norm_epsilon),
      MXMACA_BIND(apply_layernorm_1p),
      MXMACA_BIND(apply_residual_connection_post_layernorm),
      MXMACA_BIND(swiglu),
      MXMACA_BIND(bias_gelu_fusion),
      MXMACA_BIND(gradient_accumulation_fusion),
      MXMACA_BIND(untie_embeddings_and_output_weights),
      MXMACA_BIND(add_bias_linear),
      MXMACA_BIND(add_qkv_bias),
      MXMACA_BIND(make_vocab_size_divisible_by),
      MXMACA_BIND(apply_query_key_layer_scaling),
      MXMACA_BIND(attention_softmax_in_fp32),
      MXMACA_BIND(qk_layernorm),
      // Regularization.
      MXMACA_BIND(hidden_dropout),
      MXMACA_BIND(attention_dropout),
      MXMACA_BIND(weight_decay),
      MXMACA_BIND(start_weight_decay),
      MXMACA_BIND(end_weight_decay),
      MXMACA_BIND(weight_decay_incr_style),
      MXMACA_BIND(clip_grad),
      MXMACA_BIND(adam_beta1),
      MXMACA_BIND(adam_beta2),
      MXMACA_BIND(adam_eps),
      MXMACA_BIND(sgd_momentum),
      // Training.
      MXMACA_BIND(micro_batch_size),
      MXMACA_BIND(global_batch_size),
      MXMACA_BIND(train_iters),
      MXMACA_BIND(train_samples),
      MXMACA_BIND(exit_interval),
      MXMACA_BIND(exit_duration_in_mins),
      MXMACA_BIND(exit_signal_handler),
      MXMACA_BIND(exit_signal),
      MXMACA_BIND(rope_type),
      MXMACA_BIND(optimizer),
      MXMACA_BIND(recompute_activations),
      MXMACA_BIND(recompute_granularity),
      MXMACA_BIND(recompute_method),
      MXMACA_BIND(recompute_num_layers),
      MXMACA_BIND(calculate_per_token_loss),
      MXMACA_BIND(check_for_nan_in_loss_and_grad),
      MXMACA_BIND(skip_train),
      MXMACA_BIND(dataloader_type),
      MXMACA_BIND(log_interval),
      MXMACA_BIND(tensorboard_dir),
      // Initialization and learning rate.
      MXMACA_BIND(seed),
      MXMACA_BIND(init_method_std),
      MXMACA_BIND(lr),
      MXMACA_BIND(lr_decay_style),
      MXMACA_BIND(lr_decay_iters),
      MXMACA_BIND(lr_decay_samples),
      MXMACA_BIND(lr_warmup_fraction),
      MXMACA_BIND(lr_warmup_iters),
      MXMACA_BIND(lr_warmup_samples),
      MXMACA_BIND(lr_warmup_init),
      MXMACA_BIND(min_lr),
      MXMACA_BIND(override_opt_param_scheduler),
      MXMACA_BIND(use_checkpoint_opt_param_scheduler),
      MXMACA_BIND(decoupled_lr),
      MXMACA_BIND(decoupled_min_lr),
      // Checkpointing and precision.
      MXMACA_BIND(save),
      MXMACA_BIND(save_interval),
      MXMACA_BIND(save_retain_interval),
      MXMACA_BIND(no_save_optim),
      MXMACA_BIND(no_save_rng),
      MXMACA_BIND(load),
      MXMACA_BIND(no_load_optim),
      MXMACA_BIND(no_load_rng),
      MXMACA_BIND(finetune),
      MXMACA_BIND(ckpt_step),
      MXMACA_BIND(use_checkpoint_args),
      MXMACA_BIND(use_tokenizer_model_from_checkpoint_args),
      MXMACA_BIND(non_persistent_save_interval),
      MXMACA_BIND(non_persistent_ckpt_type),
      MXMACA_BIND(non_persistent_global_ckpt_dir),
      MXMACA_BIND(non_persistent_local_ckpt_dir),
      MXMACA_BIND(ckpt_format),
      MXMACA_BIND(exit_on_missing_checkpoint),
      MXMACA_BIND(async_save),
      MXMACA_BIND(bf16),
      // Distributed.
      MXMACA_BIND(tensor_model_parallel_size),
      MXMACA_BIND(pipeline_model_parallel_size),
      MXMACA_BIND(num_layers_per_virtual_pipeline_stage),
      MXMACA_BIND(num_virtual_stages_per_pipeline_rank),
      MXMACA_BIND(decoder_first_pipeline_num_layers),
      MXMACA_BIND(decoder_last_pipeline_num_layers),
      MXMACA_BIND(pipeline_model_parallel_layout),
      MXMACA_BIND(context_parallel_size),
      MXMACA_BIND(expert_model_parallel_size),
      MXMACA_BIND(expert_tensor_parallel_size),
      MXMACA_BIND(sequence_parallel),
      MXMACA_BIND(use_distributed_optimizer),
      MXMACA_BIND(optimizer_cpu_offload),
      MXMACA_BIND(use_precision_aware_optimizer),
      MXMACA_BIND(overlap_grad_reduce),
      MXMACA_BIND(overlap_param_gather),
      MXMACA_BIND(distributed_timeout_minutes),
      MXMACA_BIND(account_for_embedding_in_pipeline_split),
      MXMACA_BIND(account_for_loss_in_pipeline_split),
      // Validation, data, tokenizer, logging.
      MXMACA_BIND(eval_iters),
      MXMACA_BIND(eval_interval),
      MXMACA_BIND(start_eval_at_iter),
      MXMACA_BIND(eval_global_batch_size),
      MXMACA_BIND(eval_micro_batch_size),
      MXMACA_BIND(data_path),
      MXMACA_BIND(split),
      MXMACA_BIND(train_data_path),
      MXMACA_BIND(valid_data_path),
      MXMACA_BIND(test_data_path),
      MXMACA_BIND(mock_data),
      MXMACA_BIND(data_cache_path),
      MXMACA_BIND(seq_length),
      MXMACA_BIND(vocab_file),
      MXMACA_BIND(merge_file),
      MXMACA_BIND(tokenizer_type),
      MXMACA_BIND(tokenizer_model),
      MXMACA_BIND(vocab_extra_ids),
      MXMACA_BIND(tiktoken_pattern),
      MXMACA_BIND(tiktoken_num_special_tokens),
      MXMACA_BIND(tiktoken_special_tokens),
      MXMACA_BIND(legacy_tokenizer),
      MXMACA_BIND(vocab_size),
      MXMACA_BIND(padded_vocab_size),
      MXMACA_BIND(reset_position_ids),
      MXMACA_BIND(reset_attention_mask),
      MXMACA_BIND(eod_mask_loss),
      MXMACA_BIND(create_attention_mask_in_dataloader),
      MXMACA_BIND(num_workers),
      MXMACA_BIND(mid_level_dataset_surplus),
      MXMACA_BIND(log_params_norm),
      MXMACA_BIND(log_num_zeros_in_grad),
      MXMACA_BIND(tensorboard_log_interval),
      MXMACA_BIND(tensorboard_queue_size),
      MXMACA_BIND(log_timers_to_tensorboard),
      MXMACA_BIND(log_loss_scale_to_tensorboard),
      MXMACA_BIND(log_validation_ppl_to_tensorboard),
      MXMACA_BIND(log_memory_to_tensorboard),
      MXMACA_BIND(log_world_size_to_tensorboard),
      MXMACA_BIND(log_throughput),
      MXMACA_BIND(log_learning_rate_to_tensorboard),
      // MoE.
      MXMACA_BIND(num_experts),
      MXMACA_BIND(moe_router_topk),
      MXMACA_BIND(moe_ffn_hidden_size),
      MXMACA_BIND(moe_aux_loss_coeff),
      MXMACA_BIND(moe_router_load_balancing_type),
      MXMACA_BIND(moe_layer_freq),
      MXMACA_BIND(moe_router_score_function),
      MXMACA_BIND(moe_router_pre_softmax),
      MXMACA_BIND(moe_router_topk_scaling_factor),
      MXMACA_BIND(moe_z_loss_coeff),
      MXMACA_BIND(moe_expert_capacity_factor),
      MXMACA_BIND(moe_pad_expert_input_to_capacity),
      MXMACA_BIND(moe_token_drop_policy),
      MXMACA_BIND(moe_token_dispatcher_type),
      MXMACA_BIND(moe_router_enable_expert_bias),
      MXMACA_BIND(moe_router_bias_update_rate),
      MXMACA_BIND(moe_shared_expert_intermediate_size),
      MXMACA_BIND(moe_router_num_groups),
      MXMACA_BIND(moe_router_group_topk),
      // MXMACA's own.
      MXMACA_BIND(max_consecutive_nan_iterations),
      MXMACA_BIND(trace_file),
      MXMACA_BIND(metrics_jsonl),
      MXMACA_BIND(num_threads),
      // dest "world_size" (the flag); MegatronArgs::world_size is the derived value.
      {"world_size",
       Binding{&Set<&MegatronArgs::world_size_flag>, &Get<&MegatronArgs::world_size_flag>}},
      MXMACA_BIND(softmax_over_padded_vocab),
      MXMACA_BIND(pipeline_schedule),
      MXMACA_BIND(pipeline_channel_slots),
      MXMACA_BIND(dynamic_pipeline),
      MXMACA_BIND(max_stashed_microbatches),
      MXMACA_BIND(optimizer_post_validation),
      MXMACA_BIND(inject_stage_slowdown),
      MXMACA_BIND(synthetic_op_ms),
      MXMACA_BIND(memory_cap_per_shard),
      MXMACA_BIND(memory_admission),
      MXMACA_BIND(device),
      MXMACA_BIND(cuda_graph_impl),
      MXMACA_BIND(cuda_graph_scope),
      MXMACA_BIND(cuda_graph_warmup_steps),
      MXMACA_BIND(enable_cuda_graph),
      MXMACA_BIND(external_cuda_graph),
      MXMACA_BIND(no_cuda_graph),
      MXMACA_BIND(rebalance_threshold),
      MXMACA_BIND(rebalance_window),
      MXMACA_BIND(force_layer_move),
      MXMACA_BIND(ddp_bucket_size),
  };
  return *bindings;
}

#undef MXMACA_BIND

// Dests Megatron-Core 0.19 renamed (the option strings stayed): the Megatron dest -> the
// MegatronArgs field, which keeps the earlier name that the rest of MXMACA, its checkpoint
// metadata and `mxmaca generate` use. --tiktoken-special-tokens (removed in 0.19) is an
// alias of --tokenizer-special-tokens.
constexpr std::pair<const char*, const char*> kRenamedDests[] = {
    {"layernorm_epsilon", "norm_epsilon"},
    {"layernorm_zero_centered_gamma", "apply_layernorm_1p"},
    {"special_tokens", "tiktoken_special_tokens"},
    {"cuda_graph_scope_deprecated", "cuda_graph_scope"},
};

// FieldOf: the MegatronArgs field (its Bindings() key) that Megatron dest `dest` sets.
std::string FieldOf(std::string_view dest) {
  for (const auto& [megatron, field] : kRenamedDests) {
    if (dest == megatron) return field;
  }
  return std::string(dest);
}

// IsOptionToken: argparse's test for "this token is a flag, not a value": it starts
// with '-' and is not a negative number as argparse's `_negative_number_matcher`
// ('^-\d+$|^-\d*\.\d+$') sees one; Megatron defines no flag that looks like a
// negative number, so argparse reads "-1" and "-0.5" as values (but not "-1e-3").
bool IsOptionToken(const std::string& token) {
  if (token.size() < 2 || token[0] != '-') return false;
  const std::string rest = token.substr(1);
  const size_t dot = rest.find('.');
  const std::string whole = rest.substr(0, dot);
  const std::string frac = dot == std::string::npos ? "" : rest.substr(dot + 1);
  auto all_digits = [](const std::string& s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isdigit(c); });
  };
  const bool negative_number = dot == std::string::npos
                                   ? all_digits(whole)
                                   : (all_digits(whole) && !frac.empty() && all_digits(frac));
  return !negative_number;
}

// PythonNumberText: `text` as Python's int()/float() read it: surrounding whitespace
// ignored, and single underscores between digits ("1_000") dropped. nullopt when an
// underscore is misplaced.
std::optional<std::string> PythonNumberText(const std::string& text) {
  const std::string stripped(absl::StripAsciiWhitespace(text));
  std::string out;
  for (size_t i = 0; i < stripped.size(); ++i) {
    if (stripped[i] != '_') {
      out += stripped[i];
      continue;
    }
    const bool between_digits = i > 0 && i + 1 < stripped.size() &&
                                absl::ascii_isdigit(stripped[i - 1]) &&
                                absl::ascii_isdigit(stripped[i + 1]);
    if (!between_digits) return std::nullopt;
  }
  return out;
}

// ParseInt: Python int() of a decimal literal: optional sign, then digits.
absl::StatusOr<int64_t> ParseInt(const std::string& option, const std::string& text) {
  const std::optional<std::string> number = PythonNumberText(text);
  if (number.has_value()) {
    const std::string& t = *number;
    const size_t pos = (!t.empty() && (t[0] == '-' || t[0] == '+')) ? 1 : 0;
    bool ok = pos < t.size();
    for (size_t i = pos; i < t.size(); ++i) ok = ok && absl::ascii_isdigit(t[i]);
    if (ok) {
      errno = 0;
      const long long value = std::strtoll(t.c_str(), nullptr, 10);
      if (errno == 0) return static_cast<int64_t>(value);
      return absl::InvalidArgumentError(
          absl::StrCat(option, " expects an int, got '", text, "' (out of the int64 range)"));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(option, " expects an int, got '", text, "'"));
}

// ParseFloat: Python float(): decimal or exponent notation, inf, nan; the whole
// text must parse (hexadecimal floats, which Python rejects, are rejected too).
absl::StatusOr<double> ParseFloat(const std::string& option, const std::string& text) {
  const std::optional<std::string> number = PythonNumberText(text);
  if (number.has_value() && !number->empty() &&
      number->find_first_of("xX()") == std::string::npos) {
    char* end = nullptr;
    errno = 0;
    const double value = std::strtod(number->c_str(), &end);
    if (end == number->c_str() + number->size() && errno != ERANGE) return value;
  }
  return absl::InvalidArgumentError(absl::StrCat(option, " expects a float, got '", text, "'"));
}

// AddValue: type-checks one value of `flag` (typed as `option`) into `out`.
absl::Status AddValue(const FlagSpec& flag, const std::string& option, const std::string& text,
                      FlagValue* out) {
  std::string canonical = text;  // the form compared with `choices`
  switch (flag.type) {
    case FlagType::kInt: {
      absl::StatusOr<int64_t> value = ParseInt(option, text);
      if (!value.ok()) return value.status();
      out->ints.push_back(*value);
      canonical = std::to_string(*value);
      break;
    }
    case FlagType::kFloat: {
      absl::StatusOr<double> value = ParseFloat(option, text);
      if (!value.ok()) return value.status();
      out->floats.push_back(*value);
      break;
    }
    default:
      break;
  }
  const std::vector<std::string> choices = flag.ChoiceList();
  if (!choices.empty() && std::find(choices.begin(), choices.end(), canonical) == choices.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        option, ": invalid choice '", text, "' (choose from ", absl::StrJoin(choices, ", "), ")"));
  }
  out->texts.push_back(text);
  return absl::OkStatus();
}

absl::Status UnknownFlag(const std::string& option) {
  const std::string suggestion = DidYouMean(option, AllOptionStrings());
  if (suggestion.empty()) return absl::InvalidArgumentError("unknown flag " + option);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown flag ", option, " (did you mean ", suggestion, "?)"));
}

}  // namespace

std::string MegatronArgsField(std::string_view dest) { return FieldOf(dest); }

std::vector<std::string> MegatronArgsBoundDests() {
  std::vector<std::string> out;
  for (const auto& [dest, binding] : Bindings()) out.push_back(dest);
  return out;
}

std::vector<std::string> ChangedArgs(const MegatronArgs& args) {
  static const MegatronArgs* const defaults = new MegatronArgs;
  std::vector<std::string> out;
  for (const auto& [dest, binding] : Bindings()) {
    if (binding.repr(args) != binding.repr(*defaults)) out.push_back(dest);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::string> MegatronArgRepr(const MegatronArgs& args, std::string_view dest) {
  auto it = Bindings().find(FieldOf(dest));
  if (it == Bindings().end()) return std::nullopt;
  return it->second.repr(args);
}

std::string FormatMegatronArgs(const MegatronArgs& args) {
  std::vector<std::string> lines;
  for (const auto& [field, binding] : Bindings()) {
    std::string dest = field;  // Megatron-Core 0.19 prints its own dest names
    for (const auto& [megatron, renamed] : kRenamedDests) {
      if (field == renamed) dest = megatron;
    }
    const size_t dots = dest.size() < 48 ? 48 - dest.size() : 0;
    lines.push_back(absl::StrCat("  ", dest, " ", std::string(dots, '.'), " ", binding.repr(args)));
  }
  std::sort(lines.begin(), lines.end(), [](const std::string& a, const std::string& b) {
    return absl::AsciiStrToLower(a) < absl::AsciiStrToLower(b);
  });
  std::string out = "------------------------ arguments ------------------------\n";
  for (const std::string& line : lines) absl::StrAppend(&out, line, "\n");
  absl::StrAppend(&out, "-------------------- end of arguments ---------------------\n");
  return out;
}

absl::StatusOr<MegatronArgs> ParseMegatronArgs(const std::vector<std::string>& argv) {
  MegatronArgs args;
  absl::flat_hash_set<std::string> noticed;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& token = argv[i];
    if (token == "--") {
      return absl::InvalidArgumentError(
          "'--' ends the flags, but `mxmaca train` takes no positional arguments");
    }
    if (token == "-h" || token == "--help") {
      args.help = true;
      return args;
    }
    if (!IsOptionToken(token)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", token, "' at position ", i,
                       ": no flag takes a value here (flags start with --)"));
    }
    // `--flag=value`: argparse splits at the first '='.
    std::string option = token;
    std::optional<std::string> inline_value;
    if (const size_t eq = token.find('='); eq != std::string::npos) {
      option = token.substr(0, eq);
      inline_value = token.substr(eq + 1);
    }
    bool negated = false;
    const FlagSpec* flag = FindFlag(option, &negated);
    if (flag == nullptr) return UnknownFlag(option);
    if (flag->cls == FlagClass::kUnsupported) {
      std::string message = absl::StrCat(option, " is a Megatron flag MXMACA does not support yet");
      if (flag->reason[0] != '\0') absl::StrAppend(&message, " (", flag->reason, ")");
      return absl::InvalidArgumentError(message);
    }

    FlagValue value;
    if (flag->action != FlagAction::kStore) {
      if (inline_value.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat(option, " takes no value, got '", *inline_value, "'"));
      }
      value.boolean = flag->action == FlagAction::kStoreTrue ||
                      (flag->action == FlagAction::kBooleanOptional && !negated);
    } else if (inline_value.has_value()) {
      if (flag->nargs == FlagNargs::kThree) {
        return absl::InvalidArgumentError(absl::StrCat(option, " expects 3 values, got 1"));
      }
      MXMACA_RETURN_IF_ERROR(AddValue(*flag, option, *inline_value, &value));
    } else {
      const size_t most = flag->nargs == FlagNargs::kOne     ? 1
                          : flag->nargs == FlagNargs::kThree ? 3
                                                             : argv.size();
      while (value.texts.size() < most && i + 1 < argv.size() && !IsOptionToken(argv[i + 1])) {
        MXMACA_RETURN_IF_ERROR(AddValue(*flag, option, argv[++i], &value));
      }
      if (flag->nargs == FlagNargs::kThree && value.texts.size() != 3) {
        return absl::InvalidArgumentError(
            absl::StrCat(option, " expects 3 values, got ", value.texts.size()));
      }
      if (value.texts.empty() && flag->nargs != FlagNargs::kZeroOrMore) {
        return absl::InvalidArgumentError(
            absl::StrCat(option, flag->nargs == FlagNargs::kOne ? " expects a value"
                                                                : " expects one or more values"));
      }
    }

    if (flag->cls == FlagClass::kNotice) {
      if (noticed.insert(flag->Dest()).second) {
        args.notices.push_back(absl::StrCat(
            "notice: ", option, " is accepted and has no effect in MXMACA (", flag->reason, ")"));
      }
      continue;
    }
    auto binding = Bindings().find(FieldOf(flag->Dest()));
    if (binding == Bindings().end()) {
      return absl::InternalError(absl::StrCat("flag table marks ", flag->name,
                                              " implemented but MegatronArgs has no field '",
                                              FieldOf(flag->Dest()), "'"));
    }
    binding->second.set(&args, value);
  }
  return args;
}

int64_t PaddedVocabSize(int64_t vocab_size, int64_t divisible_by, int64_t tp) {
  const int64_t multiple = divisible_by * tp;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

}  // namespace mxmaca::api
