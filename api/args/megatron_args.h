// api/args/megatron_args.h: Megatron-LM compatible arguments for `mxmaca train`.
//
// Defines MegatronArgs (the parsed and validated flags of Megatron-LM's
// `pretrain_gpt.py`, under Megatron's own `dest` names except the four dests Megatron-Core
// 0.19 renamed, see MegatronArgsField), ParseMegatronArgs (argv ->
// MegatronArgs, argparse semantics) and ValidateAndDeriveArgs (Megatron's
// `validate_args` derivations and checks).
//
// Source: Megatron-LM `megatron/training/arguments.py` (the flags, their dests and
// defaults, including the groups built from the config dataclasses) and `pretrain_gpt.py`,
// pinned to tag core_v0.19.0 (the table was first written at commit 000c4ac, of the
// core_v0.15 era; the validation rules are from that commit unless a comment names 0.19).
// See docs/FLAGS.md for the full table and flag_table.h for how every flag is classified.
//
// A field whose Megatron default is `None` is a std::optional that is empty by
// default. After ValidateAndDeriveArgs the fields Megatron derives (ffn_hidden_size,
// kv_channels, num_query_groups, lr_decay_iters, data_parallel_size, ...) are set.
#ifndef MXMACA_API_ARGS_MEGATRON_ARGS_H_
#define MXMACA_API_ARGS_MEGATRON_ARGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mxmaca::api {

// MegatronArgs: every flag MXMACA honours (classification kImplemented in
// flag_table.h), named as Megatron's argparse `dest`, default as Megatron's.
struct MegatronArgs {
  // ---- Network size (_add_network_size_args) ----
  std::optional<int64_t> num_layers;               // --num-layers
  std::optional<int64_t> hidden_size;              // --hidden-size
  std::optional<int64_t> ffn_hidden_size;          // --ffn-hidden-size; derived: 4h, or SwiGLU rule
  std::optional<int64_t> num_attention_heads;      // --num-attention-heads
  std::optional<int64_t> kv_channels;              // --kv-channels; derived: hidden / heads
  bool group_query_attention = false;              // --group-query-attention
  int64_t num_query_groups = 1;                    // --num-query-groups; = heads without GQA
  std::optional<int64_t> max_position_embeddings;  // --max-position-embeddings
  std::string position_embedding_type = "learned_absolute";  // learned_absolute|rope|none
  int64_t rotary_base = 10000;                               // --rotary-base
  double rotary_percent = 1.0;                               // --rotary-percent
  bool rotary_interleaved = false;                           // --rotary-interleaved
  bool use_rotary_position_embeddings = false;               // deprecated: sets rope
  bool add_position_embedding = true;                        // --no-position-embedding sets false
  std::optional<int64_t> rotary_seq_len_interpolation_factor;
  bool use_rope_scaling = false;                             // --use-rope-scaling
  double rope_scaling_factor = 8.0;                          // --rope-scaling-factor
  std::string normalization = "LayerNorm";  // LayerNorm|RMSNorm
  double norm_epsilon = 1e-5;               // --norm-epsilon
  bool apply_layernorm_1p = false;          // --apply-layernorm-1p
  bool apply_residual_connection_post_layernorm = false;
  bool swiglu = false;                               // --swiglu
  // --no-bias-gelu-fusion sets false. Megatron's default fused bias-GELU uses the tanh
  // approximation (megatron/core/fusions/fused_bias_gelu.py), so with biases and without
  // SwiGLU the default model computes tanh-GELU; --no-bias-gelu-fusion gives exact GELU.
  bool bias_gelu_fusion = true;
  // --no-gradient-accumulation-fusion sets false: the device backends then add each weight
  // gradient through a temporary (the CPU backend's order) instead of accumulating in the
  // weight-gradient GEMM (Megatron's default, fused). No effect on --device cpu.
  bool gradient_accumulation_fusion = true;
  bool untie_embeddings_and_output_weights = false;  // --untie-embeddings-and-output-weights
  bool add_bias_linear = true;                       // --disable-bias-linear sets false
  bool add_qkv_bias = false;                         // --add-qkv-bias
  int64_t make_vocab_size_divisible_by = 128;        // --make-vocab-size-divisible-by
  bool apply_query_key_layer_scaling = false;        // --apply-query-key-layer-scaling
  bool attention_softmax_in_fp32 = false;            // --attention-softmax-in-fp32
  bool qk_layernorm = false;                         // --qk-layernorm

  // ---- Regularization (_add_regularization_args) ----
  double hidden_dropout = 0.1;                       // --hidden-dropout
  double attention_dropout = 0.1;                    // --attention-dropout
  double weight_decay = 0.01;                        // --weight-decay
  std::optional<double> start_weight_decay;          // --start-weight-decay; derived = weight_decay
  std::optional<double> end_weight_decay;            // --end-weight-decay; derived = weight_decay
  std::string weight_decay_incr_style = "constant";  // constant|linear|cosine
  double clip_grad = 1.0;                            // --clip-grad (global L2 norm)
  double adam_beta1 = 0.9;                           // --adam-beta1
  double adam_beta2 = 0.999;                         // --adam-beta2
  double adam_eps = 1e-8;                            // --adam-eps
  double sgd_momentum = 0.9;                         // --sgd-momentum

  // ---- Training (_add_training_args) ----
  std::optional<int64_t> micro_batch_size;           // --micro-batch-size
  std::optional<int64_t> global_batch_size;          // --global-batch-size; default mbs * dp
  std::optional<int64_t> train_iters;                // --train-iters
  std::optional<int64_t> train_samples;              // --train-samples
  std::optional<int64_t> exit_interval;              // --exit-interval
  std::optional<int64_t> exit_duration_in_mins;      // --exit-duration-in-mins (int, as Megatron)
  bool exit_signal_handler = false;                  // --exit-signal-handler: SIGTERM -> save, exit
  std::optional<std::string> exit_signal;  // --exit-signal NAME; unset = Megatron's SIGTERM
  std::optional<std::string> rope_type;    // --rope-type rope|yarn (MXMACA: rope)
  // Set by ValidateAndDeriveArgs: --padded-vocab-size came from the command line (not
  // derived for NullTokenizer / TikTokenizer).
  bool padded_vocab_size_given = false;
  std::string optimizer = "adam";                    // adam (sgd: unsupported)
  bool recompute_activations = false;                // --recompute-activations: selective
  std::optional<std::string> recompute_granularity;  // full|selective
  std::optional<std::string> recompute_method;       // uniform|block
  std::optional<int64_t> recompute_num_layers;       // --recompute-num-layers
  bool calculate_per_token_loss = false;             // --calculate-per-token-loss
  bool check_for_nan_in_loss_and_grad = true;        // --no-check-for-nan-in-loss-and-grad
  bool skip_train = false;                           // --skip-train
  std::optional<std::string> dataloader_type;        // single (cyclic|external rejected)

  // ---- Initialization (_add_initialization_args) ----
  int64_t seed = 1234;            // --seed
  double init_method_std = 0.02;  // --init-method-std

  // ---- Learning rate (_add_learning_rate_args) ----
  std::optional<double> lr;                   // --lr
  std::string lr_decay_style = "linear";      // constant|linear|cosine (WSD, isr: unsupported)
  std::optional<int64_t> lr_decay_iters;      // --lr-decay-iters; derived = train_iters
  std::optional<int64_t> lr_decay_samples;    // --lr-decay-samples
  std::optional<double> lr_warmup_fraction;   // --lr-warmup-fraction
  int64_t lr_warmup_iters = 0;                // --lr-warmup-iters
  int64_t lr_warmup_samples = 0;              // --lr-warmup-samples
  double lr_warmup_init = 0.0;                // --lr-warmup-init
  double min_lr = 0.0;                        // --min-lr
  bool override_opt_param_scheduler = false;  // --override-opt_param-scheduler
  bool use_checkpoint_opt_param_scheduler = false;  // --use-checkpoint-opt_param-scheduler
  std::optional<double> decoupled_lr;         // --decoupled-lr (embedding / output layer)
  std::optional<double> decoupled_min_lr;     // --decoupled-min-lr (default --min-lr)

  // ---- Checkpointing (_add_checkpointing_args) ----
  std::optional<std::string> save;          // --save (directory)
  std::optional<int64_t> save_interval;     // --save-interval (iterations)
  // --save-retain-interval K: keep every K-th checkpoint and the latest (K a multiple of
  // --save-interval); the others are deleted once the next save committed.
  std::optional<int64_t> save_retain_interval;
  bool no_save_optim = false;               // --no-save-optim
  bool no_save_rng = false;                 // --no-save-rng
  std::optional<std::string> load;          // --load (directory)
  bool no_load_optim = false;               // --no-load-optim
  bool no_load_rng = false;                 // --no-load-rng
  bool finetune = false;                    // --finetune
  std::optional<int64_t> ckpt_step;         // --ckpt-step (load this iteration)
  bool use_checkpoint_args = false;         // --use-checkpoint-args
  bool use_tokenizer_model_from_checkpoint_args = true;  // --no-use-tokenizer-model-from-...
  std::optional<int64_t> non_persistent_save_interval;        // --non-persistent-save-interval
  std::optional<std::string> non_persistent_ckpt_type;        // global | local
  std::optional<std::string> non_persistent_global_ckpt_dir;  // default <save>/non_persistent
  std::optional<std::string> non_persistent_local_ckpt_dir;   // --non-persistent-local-ckpt-dir
  std::string ckpt_format = "torch_dist";   // --ckpt-format (torch|torch_dist|...)
  bool exit_on_missing_checkpoint = false;  // --exit-on-missing-checkpoint
  bool async_save = false;                  // --async-save (one process; docs/CHECKPOINTS.md)

  // ---- Mixed precision (_add_mixed_precision_args) ----
  bool fp16 = false;  // --fp16 (rejected at validation)
  bool bf16 = false;  // --bf16

  // ---- Distributed (_add_distributed_args) ----
  int64_t tensor_model_parallel_size = 1;    // --tensor-model-parallel-size
  int64_t pipeline_model_parallel_size = 1;  // --pipeline-model-parallel-size
  std::optional<int64_t> num_layers_per_virtual_pipeline_stage;
  std::optional<int64_t> num_virtual_stages_per_pipeline_rank;
  std::optional<int64_t> decoder_first_pipeline_num_layers;
  std::optional<int64_t> decoder_last_pipeline_num_layers;
  std::optional<std::string> pipeline_model_parallel_layout;
  int64_t context_parallel_size = 1;                   // --context-parallel-size
  int64_t expert_model_parallel_size = 1;              // --expert-model-parallel-size
  std::optional<int64_t> expert_tensor_parallel_size;  // derived = tensor_model_parallel_size
  bool sequence_parallel = false;                      // --sequence-parallel
  bool use_distributed_optimizer = false;              // --use-distributed-optimizer
  // --optimizer-cpu-offload: with --device cuda / device-on-cpu, the fp32 master weights,
  // AdamW moments and the step stay on the host (the default keeps them on the device
  // where a rank's gradients need no host reduction: api/train/stage_ranks.h). Megatron
  // requires --use-precision-aware-optimizer with it.
  bool optimizer_cpu_offload = false;
  bool use_precision_aware_optimizer = false;          // --use-precision-aware-optimizer
  bool overlap_grad_reduce = false;                    // --overlap-grad-reduce
  bool overlap_param_gather = false;                   // --overlap-param-gather
  int64_t distributed_timeout_minutes = 10;            // collective timeout
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;

  // ---- Validation (_add_validation_args) ----
  int64_t eval_iters = 100;      // --eval-iters
  // --eval-interval; None (Megatron-Core 0.19's default): no evaluation during training,
  // and the validation set is sized for one evaluation of --eval-iters batches.
  std::optional<int64_t> eval_interval;
  std::optional<int64_t> start_eval_at_iter;  // --start-eval-at-iter: periodic evaluations from
                                              // this iteration on (the final one always runs)
  // --eval-global-batch-size (default: the global batch size, set by ValidateAndDeriveArgs)
  // and --eval-micro-batch-size (MXMACA: only the training micro-batch size).
  std::optional<int64_t> eval_global_batch_size;
  std::optional<int64_t> eval_micro_batch_size;

  // ---- Data and tokenizer (_add_data_args, _add_tokenizer_args) ----
  std::vector<std::string> data_path;          // --data-path (weights and prefixes); empty = None
  std::optional<std::string> split;            // --split; derived "969, 30, 1" with data_path
  std::vector<std::string> train_data_path;    // --train-data-path
  std::vector<std::string> valid_data_path;    // --valid-data-path
  std::vector<std::string> test_data_path;     // --test-data-path
  bool mock_data = false;                      // --mock-data
  std::optional<std::string> data_cache_path;  // --data-cache-path
  std::optional<int64_t> seq_length;           // --seq-length
  std::optional<std::string> vocab_file;       // --vocab-file (GPT-2 encoder.json)
  std::optional<std::string> merge_file;       // --merge-file (GPT-2 vocab.bpe)
  std::optional<std::string> tokenizer_type;   // --tokenizer-type
  std::optional<std::string> tokenizer_model;  // --tokenizer-model
  std::optional<int64_t> vocab_size;           // --vocab-size (NullTokenizer, TikTokenizer)
  int64_t vocab_extra_ids = 0;                 // --vocab-extra-ids (SentencePieceTokenizer)
  std::optional<std::string> tiktoken_pattern;         // --tiktoken-pattern v1|v2
  int64_t tiktoken_num_special_tokens = 1000;          // --tiktoken-num-special-tokens
  std::vector<std::string> tiktoken_special_tokens;    // --tiktoken-special-tokens; empty = None
  bool legacy_tokenizer = false;  // --legacy-tokenizer (tokenizer.py's classes; see data/tokenizer_factory.h)
  bool reset_position_ids = false;             // --reset-position-ids
  bool reset_attention_mask = false;           // --reset-attention-mask
  bool eod_mask_loss = false;                  // --eod-mask-loss
  bool create_attention_mask_in_dataloader = true;  // --no-create-attention-mask-in-dataloader
  int64_t num_workers = 2;                          // --num-workers
  double mid_level_dataset_surplus = 0.005;         // --mid-level-dataset-surplus (blends)

  // ---- Logging (_add_logging_args) ----
  int64_t log_interval = 100;                  // --log-interval
  bool log_params_norm = false;                // --log-params-norm
  bool log_num_zeros_in_grad = false;          // --log-num-zeros-in-grad
  std::optional<std::string> tensorboard_dir;  // --tensorboard-dir
  int64_t tensorboard_log_interval = 1;        // --tensorboard-log-interval
  int64_t tensorboard_queue_size = 1000;       // --tensorboard-queue-size
  bool log_timers_to_tensorboard = false;      // --log-timers-to-tensorboard
  bool log_loss_scale_to_tensorboard = true;   // --no-log-loss-scale-to-tensorboard
  bool log_validation_ppl_to_tensorboard = false;  // --log-validation-ppl-to-tensorboard
  bool log_memory_to_tensorboard = false;          // --log-memory-to-tensorboard
  bool log_world_size_to_tensorboard = false;      // --log-world-size-to-tensorboard
  bool log_throughput = false;                     // --log-throughput
  // --no-log-learnig-rate-to-tensorboard (Megatron before 2024; alias
  // --no-log-learning-rate-to-tensorboard)
  bool log_learning_rate_to_tensorboard = true;

  // ---- MoE (_add_moe_args) ----
  std::optional<int64_t> num_experts;              // --num-experts
  int64_t moe_router_topk = 2;                     // --moe-router-topk
  std::optional<int64_t> moe_ffn_hidden_size;      // --moe-ffn-hidden-size; derived = ffn
  std::vector<double> moe_aux_loss_coeff = {0.0};  // --moe-aux-loss-coeff
  std::vector<std::string> moe_router_load_balancing_type = {"aux_loss"};
  std::string moe_layer_freq = "1";                   // int N, or a Python list pattern
  std::string moe_router_score_function = "softmax";  // softmax|sigmoid
  bool moe_router_pre_softmax = false;                // --moe-router-pre-softmax
  std::optional<double> moe_router_topk_scaling_factor;
  std::optional<double> moe_z_loss_coeff;            // --moe-z-loss-coeff
  std::optional<double> moe_expert_capacity_factor;  // None = dropless
  bool moe_pad_expert_input_to_capacity = false;     // --moe-pad-expert-input-to-capacity
  std::string moe_token_drop_policy = "probs";       // probs|position
  // --moe-token-dispatcher-type: allgather|alltoall (Megatron's), hierarchical (ours);
  // used with --expert-model-parallel-size > 1 (flex is refused).
  std::string moe_token_dispatcher_type = "allgather";
  bool moe_router_enable_expert_bias = false;  // --moe-router-enable-expert-bias
  double moe_router_bias_update_rate = 1e-3;   // --moe-router-bias-update-rate
  std::optional<int64_t> moe_shared_expert_intermediate_size;  // None = no shared expert
  std::optional<int64_t> moe_router_num_groups;                // group-limited routing
  std::optional<int64_t> moe_router_group_topk;

  // ---- MXMACA's own flags (not Megatron's; marked as ours in docs/FLAGS.md) ----
  // --max-consecutive-nan-iterations K: stop training with an error after K
  // iterations in a row whose loss or gradient norm is NaN/Inf (those iterations
  // skip the optimizer step). Default 1 = Megatron's behaviour with
  // --check-for-nan-in-loss-and-grad (fail on the first one).
  int64_t max_consecutive_nan_iterations = 1;
  // --trace-file PATH: write a Chrome/Perfetto JSON trace of every actor's F/B/W.
  std::optional<std::string> trace_file;
  // --metrics-jsonl PATH: one JSON object per log line and evaluation
  // (actors/metrics/metrics_jsonl.h); `mxmaca plot` draws it.
  std::optional<std::string> metrics_jsonl;
  // --num-threads N: CPU compute threads; derived = std::thread::hardware_concurrency().
  std::optional<int64_t> num_threads;
  // --world-size N: ranks run in this process; None = tp * pp * cp (DP 1).
  std::optional<int64_t> world_size_flag;
  // --softmax-over-padded-vocab: Megatron's cross-entropy over all padded vocabulary
  // columns (GptConfig::softmax_over_padded_vocab); false = padded columns masked out.
  bool softmax_over_padded_vocab = false;
  // --pipeline-schedule NAME: scheduler::ParseScheduleKind; None = Megatron's choice.
  std::optional<std::string> pipeline_schedule;
  // --pipeline-channel-slots N: cap on payloads in flight per pipeline channel.
  std::optional<int64_t> pipeline_channel_slots;
  // --dynamic-pipeline, --max-stashed-microbatches N, --inject-stage-slowdown S:F[:I].
  bool dynamic_pipeline = false;
  std::optional<int64_t> max_stashed_microbatches;
  // --optimizer-post-validation: optimistic optimizer steps validated after the global
  // grad-norm / NaN check (actors/coordinator.h CoordinatorConfig::optimizer_post_validation).
  bool optimizer_post_validation = false;
  std::optional<std::string> inject_stage_slowdown;
  // --synthetic-op-ms F,B,W[,OPT]: run on synthetic stages (api/train/synthetic_train.h).
  std::optional<std::string> synthetic_op_ms;
  // --memory-cap-per-shard BYTES (e.g. 512M, 2GiB; 0 = none): cap on each rank's training
  // stash bytes (layers/context_parallel/memory_cap.h ParseMemoryCap; GptStage::SetMemoryCap).
  std::optional<std::string> memory_cap_per_shard;
  // --memory-admission on|off (None = on, or MXMACA_MEMORY_ADMISSION): check the start-up
  // memory estimate against the process's memory before allocating
  // (api/train/memory_admission.h).
  std::optional<std::string> memory_admission;
  // --device cpu|cuda|device-on-cpu: the backend the model runs on (api/train/device_setup.h).
  std::optional<std::string> device;
  // CUDA graphs (kernels/cuda_graph_flags.h; Megatron-Core's names plus MXMACA's
  // --no-cuda-graph): --cuda-graph-impl, --cuda-graph-scope (deprecated in 0.19, nargs '+',
  // dest cuda_graph_scope_deprecated; MXMACA reads one value), --cuda-graph-warmup-steps,
  // --enable-cuda-graph and --external-cuda-graph (deprecated in Megatron).
  std::optional<std::string> cuda_graph_impl;
  std::vector<std::string> cuda_graph_scope;  // empty = None
  std::optional<int64_t> cuda_graph_warmup_steps;
  bool enable_cuda_graph = false;
  bool external_cuda_graph = false;
  bool no_cuda_graph = false;
  // --rebalance-threshold X, --rebalance-window K, --force-layer-move ITER:FROM:TO.
  std::optional<double> rebalance_threshold;
  int64_t rebalance_window = 3;
  std::optional<std::string> force_layer_move;
  // --ddp-bucket-size N (elements per data-parallel gradient bucket; None = Megatron's
  // max(40M, 1M x dp)).
  std::optional<int64_t> ddp_bucket_size;

  // ---- Derived by ValidateAndDeriveArgs (not flags) ----
  int64_t world_size = 1;          // from the launcher
  int64_t data_parallel_size = 1;  // world / (tp * pp * cp)
  // --padded-vocab-size, else derived from vocab_size when that is known.
  std::optional<int64_t> padded_vocab_size;
  std::optional<int64_t> virtual_pipeline_model_parallel_size;  // None = not interleaved

  // -h/--help (argparse's own): parsing stopped there; print RenderTrainUsage()
  // (flags_doc.h) and exit, as Megatron's argparse does.
  bool help = false;

  // One line per accepted no-effect flag, "notice: --X is accepted and has no effect
  // in MXMACA (<reason>)", in command-line order; print them at start.
  std::vector<std::string> notices;
};

// ParseMegatronArgs: parses `argv` (flags only, without the program/subcommand name)
// with Megatron's argparse semantics: `--flag value`, `--flag=value`, nargs '+'/'*'
// lists, store_true/store_false forms, a repeated flag's last value wins.
// Errors (InvalidArgument): unknown flag (with the nearest known flag suggested),
// a Megatron flag MXMACA does not support yet, a missing or malformed value
// ("12x" for an int), a value outside the flag's choices (listed). Flags classified
// kNotice are accepted and add a line to `notices`. -h/--help stops parsing and sets
// `help` (later flags are not read). Does not validate across flags.
absl::StatusOr<MegatronArgs> ParseMegatronArgs(const std::vector<std::string>& argv);

// ValidateAndDeriveArgs: Megatron's `validate_args` for the flags MXMACA honours,
// for `world_size` ranks: derives data_parallel_size, ffn_hidden_size, kv_channels,
// num_query_groups, global_batch_size, lr_decay_iters, weight decay ends, split,
// num_threads, padded_vocab_size, ... and checks the combinations (world size
// divisible by tp*pp*cp, global batch divisible by micro batch x dp, hidden divisible
// by heads, seq_length <= max_position_embeddings (Megatron asserts it for every
// position embedding type), layers divisible by pp unless uneven stages are given,
// exclusive iteration/sample flags, min_lr <= lr, ...), plus MXMACA's own limits
// (lr decay style constant|linear|cosine, optimizer adam, GPT2BPETokenizer or
// NullTokenizer, dataloader single, no fp16). pretrain_gpt's default
// tokenizer_type (GPT2BPETokenizer) is applied here. Errors (InvalidArgument) name
// the flags and values involved. Call it once, on what ParseMegatronArgs returned (as
// Megatron's validate_args, it is not idempotent: derived values count as given).
absl::Status ValidateAndDeriveArgs(MegatronArgs* args, int world_size);

// PaddedVocabSize: Megatron's `_vocab_size_with_padding`: `vocab_size` rounded up to a
// multiple of divisible_by * tp (MEGATRON_FORMATS.md). 50,257 -> 50,304 at (128, 1).
// Requires vocab_size >= 0, divisible_by >= 1, tp >= 1.
int64_t PaddedVocabSize(int64_t vocab_size, int64_t divisible_by, int64_t tp);

// FormatMegatronArgs: Megatron's `_print_args("arguments", args)` block for the fields
// MXMACA honours (under Megatron-Core 0.19's dests, MegatronArgsField's renames undone):
// a dashed title line, then "  <dest> <dots to column 48> <value>" per
// field sorted case-insensitively (values as Python prints them: None, True, 1e-05,
// 'rope', [...]), then a dashed end line. Print it at start on rank 0.
std::string FormatMegatronArgs(const MegatronArgs& args);

// MegatronArgsField: the MegatronArgs field (a MegatronArgsBoundDests() name) that Megatron
// dest `dest` sets: `dest` itself, except for the dests Megatron-Core 0.19 renamed, whose
// fields keep the earlier name (layernorm_epsilon -> norm_epsilon,
// layernorm_zero_centered_gamma -> apply_layernorm_1p, special_tokens ->
// tiktoken_special_tokens, cuda_graph_scope_deprecated -> cuda_graph_scope).
std::string MegatronArgsField(std::string_view dest);

// MegatronArgRepr: the Python repr of the field named by Megatron dest `dest` ("None",
// "True", "0.1", "'LayerNorm'", "['a', 'b']"), or nullopt when MXMACA has no such field.
std::optional<std::string> MegatronArgRepr(const MegatronArgs& args, std::string_view dest);

// ChangedArgs: the dests (sorted) whose value in `args` differs from Megatron's
// default (a default-constructed MegatronArgs), compared as Python reprs. Call it on
// what ParseMegatronArgs returned, before ValidateAndDeriveArgs fills in derived
// values; a consumer that honours only some fields can reject the others by name.
std::vector<std::string> ChangedArgs(const MegatronArgs& args);

// MegatronArgsBoundDests: the dests ParseMegatronArgs can store into MegatronArgs (one
// per kImplemented flag); for the test that keeps the table and the struct in step.
std::vector<std::string> MegatronArgsBoundDests();

}  // namespace mxmaca::api

#endif  // MXMACA_API_ARGS_MEGATRON_ARGS_H_
