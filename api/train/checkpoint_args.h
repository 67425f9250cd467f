// api/train/checkpoint_args.h: the run's arguments as stored in a checkpoint's metadata,
// and the model configuration recovered from them (for --load checks and `generate`).
//
// Stored object: {"argv": [...the train command line...], "model": {GptConfig fields
// under Megatron's dest names}, "tokenizer": {"type", "vocab_file", "merge_file",
// "tokenizer_model", "vocab_size", "vocab_extra_ids", "tiktoken_pattern",
// "tiktoken_num_special_tokens", "tiktoken_special_tokens", "legacy_tokenizer"},
// "megatron_args": {the effective (validated) values of the Megatron arguments that
// --use-checkpoint-args reads, under their dest names; null for None}}.
#ifndef MXMACA_API_TRAIN_CHECKPOINT_ARGS_H_
#define MXMACA_API_TRAIN_CHECKPOINT_ARGS_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "api/args/megatron_args.h"
#include "data/tokenizer_factory.h"
#include "layers/gpt_config.h"

namespace mxmaca::api {

// CheckpointArgsJson: the object above.
nlohmann::json CheckpointArgsJson(const std::vector<std::string>& argv, const MegatronArgs& args,
                                  const layers::GptConfig& model);

// TokenizerSpecFromArgs: the tokenizer flags of `args` (type default GPT2BPETokenizer)
// as data::BuildTokenizer takes them.
data::TokenizerSpec TokenizerSpecFromArgs(const MegatronArgs& args);

// TokenizerSpecFromCheckpointArgs: the spec stored under "tokenizer" by
// CheckpointArgsJson (checkpoints from before the SentencePiece / HF / tiktoken fields
// have type and the GPT-2 files only; "" means unset). Error: DataLoss when "tokenizer"
// is missing or mistyped.
absl::StatusOr<data::TokenizerSpec> TokenizerSpecFromCheckpointArgs(const nlohmann::json& args);

// ModelConfigFromCheckpointArgs: the GptConfig stored by CheckpointArgsJson (dropout set
// to 0: it is used for inference and shape checks), layout-free: MoE layers come back with
// expert-parallel size 1 whatever layout wrote them. Errors: DataLoss naming the missing
// or mistyped field.
absl::StatusOr<layers::GptConfig> ModelConfigFromCheckpointArgs(const nlohmann::json& args);

// CheckModelMatchesCheckpoint: Megatron's check_checkpoint_args for the shape fields:
// InvalidArgument "--hidden-size is 512 but the checkpoint in DIR was trained with 256"
// for the first field that differs. The padded vocabulary size is not compared: it
// follows the layout (TP, --make-vocab-size-divisible-by), and the vocabulary tensors load
// into any padded size (actors/stage_checkpoint.h); the true vocabulary size is.
absl::Status CheckModelMatchesCheckpoint(const layers::GptConfig& model,
                                         const nlohmann::json& args, const std::string& dir);

// ApplyCheckpointArgs: --use-checkpoint-args, Megatron's load_args_from_checkpoint
// (megatron/training/checkpointing.py, core_v0.19.0), on `a` before ValidateAndDeriveArgs:
// num_layers, hidden_size, ffn_hidden_size, seq_length, num_attention_heads, kv_channels
// and max_position_embeddings are taken from the checkpoint only where the command line
// left them unset; num_query_groups, group_query_attention, position_embedding_type,
// add_position_embedding, use_rotary_position_embeddings, rotary_base, rotary_percent,
// rotary_interleaved, add_bias_linear, add_qkv_bias, swiglu,
// untie_embeddings_and_output_weights, apply_layernorm_1p, normalization,
// apply_query_key_layer_scaling, attention_dropout, hidden_dropout and the MoE model
// arguments (num_experts, moe_layer_freq, moe_ffn_hidden_size, moe_router_topk,
// moe_router_pre_softmax, moe_shared_expert_intermediate_size, moe_router_score_function,
// moe_router_enable_expert_bias, moe_router_topk_scaling_factor) always (force),
// tokenizer_model and tokenizer_type too unless --no-use-tokenizer-model-from-checkpoint-args,
// and tiktoken_pattern always (as Megatron). A value the
// checkpoint does not provide (None) leaves the argument as it is. `ckpt_args` is a
// checkpoint's args object (CheckpointArgsJson; checkpoints written before
// "megatron_args" existed are read from their argv and model objects). Returns Megatron's
// log lines ("Setting hidden_size to 64 from checkpoint", "Checkpoint did not provide
// arguments kv_channels"). Errors: DataLoss naming the field that has the wrong type.
absl::StatusOr<std::vector<std::string>> ApplyCheckpointArgs(const nlohmann::json& ckpt_args,
                                                             MegatronArgs* a);

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_CHECKPOINT_ARGS_H_
