// api/train/megatron_format.h: `mxmaca train` with Megatron's legacy checkpoint format
// (--ckpt-format torch; actors/checkpoint/megatron): --load of a directory laid out as
// iter_*/mp_rank_*/model_optim_rng.pt, and --save writing that layout.
//
// Load: the Megatron checkpoint is read and merged into logical tensors, checked against
// the model (args' shape fields, then every tensor's full shape as it loads), and staged
// as an MXMACA checkpoint in a private temporary directory that the ordinary loader reads
// (weights, Adam moments and step where the file has them, iteration, consumed samples
// from args.consumed_train_samples / consumed_valid_samples, the scheduler's num_steps).
// Save: the coordinator writes its usual checkpoint into <save>/.mxmaca-torch-staging;
// after it commits, the hook converts that iteration into <save>/iter_{:07d}/mp_rank_*
// (this run's TP / PP / EP layout and pipeline placement, the layer spec --transformer-impl
// names, TEGroupedMLP keys with --moe-grouped-gemm) and removes the staged copy.
#ifndef MXMACA_API_TRAIN_MEGATRON_FORMAT_H_
#define MXMACA_API_TRAIN_MEGATRON_FORMAT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "actors/checkpoint/megatron/pickle_value.h"
#include "api/args/megatron_args.h"
#include "layers/gpt_config.h"
#include "layers/pipeline_placement.h"

namespace mxmaca::api {

// kMegatronStagingDir: where --ckpt-format torch stages MXMACA's own checkpoint.
inline constexpr char kMegatronStagingDir[] = ".mxmaca-torch-staging";

// CheckCkptFormat: --ckpt-format: "torch" is Megatron's legacy format (written by this
// file's hook); without the flag MXMACA writes its own format (docs/CHECKPOINTS.md); any
// other value given explicitly (torch_dist, zarr, torch_dcp, fsdp_dtensor) is
// Unimplemented naming it. `argv` tells whether the flag was given.
absl::Status CheckCkptFormat(const MegatronArgs& args, const std::vector<std::string>& argv);

// MegatronArgsNamespace: the run's arguments as the argparse.Namespace Megatron stores
// under 'args': every dest MXMACA parses (values from MegatronArgRepr) plus the derived
// padded_vocab_size, params_dtype (torch.bfloat16 with --bf16, else torch.float32),
// transformer_impl, moe_grouped_gemm and ckpt_format 'torch'.
actors::checkpoint::megatron::PyRef MegatronArgsNamespace(const MegatronArgs& args,
                                                          const layers::GptConfig& model,
                                                          const std::vector<std::string>& argv);

// StageMegatronLoad: reads the legacy checkpoint in `load_dir`, checks its args' model
// fields (num_layers, hidden_size, ffn_hidden_size, num_attention_heads, num_query_groups
// with group_query_attention, swiglu, untie_embeddings_and_output_weights, num_experts)
// against `model` (InvalidArgument "--hidden-size is 512 but the Megatron checkpoint in DIR
// has 256"), and writes it as an MXMACA checkpoint into a new temporary directory, whose
// path it returns (the caller removes it). `checkpoint_args` goes into the staged
// metadata. Notes on what was not loaded are printed. Errors of ReadMegatronCheckpoint.
absl::StatusOr<std::string> StageMegatronLoad(const std::string& load_dir,
                                              const layers::GptConfig& model,
                                              const nlohmann::json& checkpoint_args,
                                              const std::function<void(const std::string&)>& print);

// MegatronSaveHook: the coordinator's after_commit for --ckpt-format torch: converts the
// staged MXMACA checkpoint `iter_dir` (of `iteration`) into a legacy checkpoint in
// `save_dir` with this run's layout, then removes the staged directory.
std::function<absl::Status(int64_t iteration, const std::string& iter_dir)> MegatronSaveHook(
    const std::string& save_dir, const MegatronArgs& args, const layers::GptConfig& model,
    const layers::PipelinePlacement& placement, const std::vector<std::string>& argv);

// MegatronCheckpointArgsJson: --use-checkpoint-args for a Megatron legacy checkpoint in
// `load_dir`: its 'args' namespace (ReadMegatronCheckpointArgs) as the object
// ApplyCheckpointArgs reads ({"megatron_args": {dest: value}}: None, bools, numbers,
// strings and lists of them; moe_layer_freq as the text MXMACA's flag holds, "1" or "[0, 1]").
// Errors: ReadMegatronCheckpointArgs's.
absl::StatusOr<nlohmann::json> MegatronCheckpointArgsJson(const std::string& load_dir);

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_MEGATRON_FORMAT_H_
