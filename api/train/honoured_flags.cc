// api/train/honoured_flags.cc: see honoured_flags.h.
#include "api/train/honoured_flags.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mxmaca::api {
namespace {

// The MegatronArgs fields `mxmaca train` honours today. A flag the parser accepts into any
// other field (it is implemented somewhere in MXMACA's flag table, e.g. for a later
// parallel layout) is an error when set, never silently ignored. The *_parallel_size
// fields are listed because CheckSupportedLayout checks their values; --sequence-parallel
// changes nothing at TP 1 (Megatron also turns it off there).
constexpr const char* kHonouredDests[] = {
    "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "kv_channels",
    "group_query_attention", "num_query_groups", "max_position_embeddings",
    "position_embedding_type", "rotary_base", "rotary_percent", "normalization", "use_rope_scaling",
    "rope_scaling_factor", "rotary_seq_len_interpolation_factor", "norm_epsilon", "swiglu",
    "bias_gelu_fusion", "untie_embeddings_and_output_weights", "add_bias_linear", "add_qkv_bias",
    "apply_layernorm_1p", "apply_residual_connection_post_layernorm", "padded_vocab_size",
    "use_rotary_position_embeddings", "recompute_activations",  // (validate_args derives them)
    // --apply-query-key-layer-scaling divides q k^T by the layer number and the softmax
    // multiplies it back (an fp16 range device): the same function in fp32 / bf16 softmax.
    "apply_query_key_layer_scaling",
    // --sgd-momentum tunes --optimizer sgd only; with adam Megatron ignores it too.
    "sgd_momentum", "mid_level_dataset_surplus",
    // MXMACA's checkpoints hold no generator state (randomness is a function of the seed,
    // iteration and micro-batch), so --no-save-rng is how they are always saved.
    "no_save_optim", "no_save_rng", "exit_on_missing_checkpoint",
    // --no-position-embedding: validate_args refuses it unless --position-embedding-type is
    // rope, where (as in Megatron-Core, whose embedding adds a position table only for
    // learned_absolute) it changes nothing.
    "add_position_embedding", "rotary_interleaved", "qk_layernorm", "make_vocab_size_divisible_by",
    "attention_softmax_in_fp32", "hidden_dropout", "attention_dropout", "weight_decay",
    "start_weight_decay", "end_weight_decay", "weight_decay_incr_style", "clip_grad", "adam_beta1",
    "adam_beta2", "adam_eps", "micro_batch_size", "global_batch_size", "train_iters",
    "train_samples", "skip_train", "exit_interval", "exit_signal_handler", "exit_signal", "rope_type",
    "exit_duration_in_mins", "optimizer", "recompute_granularity", "recompute_method",
    "recompute_num_layers", "calculate_per_token_loss", "check_for_nan_in_loss_and_grad", "seed",
    "init_method_std", "lr", "lr_decay_style", "lr_decay_iters", "lr_decay_samples",
    "lr_warmup_fraction", "lr_warmup_iters", "lr_warmup_samples", "lr_warmup_init", "min_lr",
    "override_opt_param_scheduler", "use_checkpoint_opt_param_scheduler", "save", "save_interval",
    "load", "no_load_optim", "no_load_rng", "finetune", "bf16", "ckpt_format", "async_save",
    // Resume rules (api/train/resume_rules.h) and the decoupled learning rate.
    "ckpt_step", "use_checkpoint_args", "use_tokenizer_model_from_checkpoint_args",
    "save_retain_interval", "non_persistent_save_interval", "non_persistent_ckpt_type",
    "non_persistent_global_ckpt_dir", "non_persistent_local_ckpt_dir", "decoupled_lr",
    "decoupled_min_lr", "tensor_model_parallel_size", "pipeline_model_parallel_size",
    "context_parallel_size", "expert_model_parallel_size", "sequence_parallel",
    "use_distributed_optimizer", "overlap_grad_reduce", "overlap_param_gather", "eval_iters",
    "eval_interval", "start_eval_at_iter", "eval_global_batch_size", "eval_micro_batch_size",
    "data_path", "split", "train_data_path", "valid_data_path", "test_data_path", "mock_data",
    "data_cache_path", "seq_length", "vocab_file", "merge_file", "tokenizer_type", "vocab_size",
    "tokenizer_model", "vocab_extra_ids", "tiktoken_pattern", "tiktoken_num_special_tokens",
    "tiktoken_special_tokens", "legacy_tokenizer", "reset_position_ids", "reset_attention_mask",
    "eod_mask_loss", "create_attention_mask_in_dataloader", "num_workers", "dataloader_type",
    "log_interval", "max_consecutive_nan_iterations", "num_threads", "trace_file", "help",
    // TensorBoard and metrics (api/train/metrics_setup.h).
    "tensorboard_dir", "tensorboard_log_interval", "tensorboard_queue_size",
    "log_timers_to_tensorboard", "log_loss_scale_to_tensorboard",
    "log_validation_ppl_to_tensorboard", "log_memory_to_tensorboard",
    "log_world_size_to_tensorboard", "log_throughput", "log_learning_rate_to_tensorboard",
    "metrics_jsonl", "log_params_norm", "log_num_zeros_in_grad", "softmax_over_padded_vocab",
    // Pipeline and data parallelism (in-process ranks).
    "world_size", "pipeline_schedule", "pipeline_channel_slots", "dynamic_pipeline",
    "optimizer_post_validation", "synthetic_op_ms", "memory_cap_per_shard", "memory_admission",
    "device", "optimizer_cpu_offload", "use_precision_aware_optimizer",
    "gradient_accumulation_fusion", "cuda_graph_impl", "cuda_graph_scope",
    "cuda_graph_warmup_steps", "enable_cuda_graph", "external_cuda_graph", "no_cuda_graph",
    "max_stashed_microbatches", "inject_stage_slowdown", "rebalance_threshold", "rebalance_window",
    "force_layer_move", "ddp_bucket_size", "distributed_timeout_minutes",
    "num_layers_per_virtual_pipeline_stage", "num_virtual_stages_per_pipeline_rank",
    "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
    "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
    "pipeline_model_parallel_layout",
    // Mixture of Experts (api/train/moe_setup.h).
    "num_experts", "moe_router_topk", "moe_ffn_hidden_size", "moe_aux_loss_coeff",
    "moe_router_load_balancing_type", "moe_layer_freq", "moe_router_score_function",
    "moe_router_pre_softmax", "moe_router_topk_scaling_factor", "moe_z_loss_coeff",
    "moe_expert_capacity_factor", "moe_pad_expert_input_to_capacity", "moe_token_drop_policy",
    "moe_shared_expert_intermediate_size", "moe_router_num_groups", "moe_router_group_topk",
    "expert_tensor_parallel_size", "moe_token_dispatcher_type", "moe_router_enable_expert_bias",
    "moe_router_bias_update_rate"};

}  // namespace

bool IsHonouredField(std::string_view field) {
  for (const char* h : kHonouredDests) {
    if (field == h) return true;
  }
  return false;
}

absl::Status CheckHonouredFlags(const MegatronArgs& a) {
  std::vector<std::string> rejected;
  for (const std::string& dest : ChangedArgs(a)) {
    if (!IsHonouredField(dest)) {
      std::string flag = "--" + dest;
      std::replace(flag.begin(), flag.end(), '_', '-');
      rejected.push_back(flag);
    }
  }
  if (rejected.empty()) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      "mxmaca train does not honour ", absl::StrJoin(rejected, ", "),
      " yet (the flag is parsed, but the training path would ignore it); remove it or see "
      "docs/FLAGS.md"));
}

}  // namespace mxmaca::api
