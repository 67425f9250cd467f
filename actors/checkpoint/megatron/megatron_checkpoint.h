// actors/checkpoint/megatron/megatron_checkpoint.h: Megatron-LM's legacy checkpoint
// directories (--ckpt-format torch; megatron/training/checkpointing.py at core_v0.19.0,
// get_checkpoint_name, generate_state_dict) read into MXMACA's logical tensors and written
// from them.
//
//   <dir>/latest_checkpointed_iteration.txt          "<iteration>" or "release"
//   <dir>/iter_{:07d}/mp_rank_{TP:02d}[_{PP:03d}][_{EP:03d}]/model_optim_rng.pt
//        (_PPP only when pipeline parallel, _EEE only when expert parallel)
// Each file is a torch.save dict: 'args' (argparse.Namespace), 'checkpoint_version' 3.0,
// 'iteration', 'model' (or 'model0', 'model1', ... with virtual pipeline stages: the
// state dict of GPTModel, megatron_names.h), 'optimizer', 'opt_param_scheduler',
// 'rng_state', 'rerun_state_machine', 'num_floating_point_operations_so_far'.
//
// Optimizer ('optimizer', Megatron-Core's non-distributed optimizers,
// megatron/core/optimizer/optimizer.py): FP32Optimizer.state_dict() is torch.optim.Adam's
// {'state': {id: {'step', 'exp_avg', 'exp_avg_sq'}}, 'param_groups': [{..., 'params':
// [ids]}]}; Float16OptimizerWithFloat16Params (bf16) wraps it as {'optimizer': ...,
// 'fp32_from_fp16_params': [[fp32 master per param] per group]}; a model with experts has
// two (dense, expert) in a list (ChainedOptimizer). Parameter ids run over the groups in
// order; the groups (megatron/core/optimizer/__init__.py _get_param_groups) are the
// weight-decayed parameters (wd_mult 1) then the others (biases and 1-D tensors,
// wd_mult 0), each in named_parameters order = the order of the model state dict.
//
// The distributed optimizer (dense models, read and written): the 'optimizer' entry holds
// only the param groups (Adam's 'step'), the per-parameter state is in distrib_optim.pt
// beside model_optim_rng.pt, located by distrib_optim_layout.h.
//
// What is not read or written: rng_state (MXMACA's randomness is a function of the seed,
// iteration and micro-batch, not generator state; files written here carry none, so
// Megatron loads them with --no-load-rng), distrib_optim.pt of a model with experts, with
// several distributed-optimizer instances or --ddp-num-buckets (skipped with a note:
// Adam starts from zero; such runs are written in the non-distributed layout), the legacy
// GroupedMLP weight1/weight2 expert layout, and expert tensor parallelism (ETP must be 1).
#ifndef MXMACA_ACTORS_CHECKPOINT_MEGATRON_MEGATRON_CHECKPOINT_H_
#define MXMACA_ACTORS_CHECKPOINT_MEGATRON_MEGATRON_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "actors/checkpoint/megatron/megatron_names.h"
#include "actors/checkpoint/megatron/pickle_value.h"

namespace mxmaca::actors::checkpoint::megatron {

// LogicalTensor: a whole logical tensor, fp32, C order.
struct LogicalTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};
// LogicalTensors: by MXMACA checkpoint name: "model/<name>", "optimizer/exp_avg/<name>",
// "optimizer/exp_avg_sq/<name>", "buffers/<name>" (docs/CHECKPOINTS.md), global layers.
using LogicalTensors = std::map<std::string, LogicalTensor>;

// MegatronLayout: the model-parallel layout of a legacy checkpoint.
struct MegatronLayout {
  int tp = 1, pp = 1, ep = 1;
  // chunks[v][p] = (first global layer, number of layers) of model chunk v on pipeline
  // rank p (one chunk per rank without virtual stages).
  std::vector<std::vector<std::pair<int64_t, int64_t>>> chunks;
};

// UniformLayout: Megatron's even split of `num_layers` over pp ranks x vp chunks
// (get_transformer_layer_offset: chunk v of rank p starts at v L/vp + p L/(vp pp)).
// InvalidArgument when not divisible.
absl::StatusOr<MegatronLayout> UniformLayout(int tp, int pp, int ep, int64_t num_layers, int vp = 1);

// MegatronState: the contents of a legacy checkpoint, merged over its files.
struct MegatronState {
  int64_t iteration = 0;
  bool release = false;
  PyRef args;                  // the argparse.Namespace (attribute dict)
  PyRef opt_param_scheduler;   // dict, or null
  double num_floating_point_operations_so_far = 0;
  LogicalTensors tensors;
  bool has_optimizer_state = false;
  int64_t optimizer_step = 0;  // Adam's step count
  // Where the optimizer state was read from: "model_optim_rng.pt" or "distrib_optim.pt"
  // (the distributed optimizer); "" without one.
  std::string optimizer_source;
  bool bf16 = false;           // write: model weights in bf16 + fp32_from_fp16_params
  MegatronLayout layout;
  ModelNaming naming;
  bool tied_embeddings = true;
  std::vector<std::string> notes;  // what reading skipped, for the log
};

// IsMegatronLegacyCheckpoint: whether `load_dir` holds a legacy checkpoint: a tracker file
// naming an iteration (or release) whose directory has mp_rank_*/model_optim_rng.pt.
bool IsMegatronLegacyCheckpoint(const std::string& load_dir);

// ReadMegatronCheckpointArgs: the 'args' namespace (argparse.Namespace) of the first mp_rank
// file of the iteration the tracker in `load_dir` names, without reading any tensor (for
// --use-checkpoint-args). Errors: NotFound for a missing tracker, iteration dir or rank
// file; DataLoss for a bad tracker or file, or one without an 'args' namespace.
absl::StatusOr<PyRef> ReadMegatronCheckpointArgs(const std::string& load_dir);

// ReadMegatronCheckpoint: reads every mp_rank file of the iteration the tracker names (or
// `iteration`), checks that the set of files matches the args' TP/PP/EP sizes, maps
// every state-dict key to its logical name (megatron_names.h), merges TP shards (and the
// SwiGLU halves) into whole tensors, renumbers layers from each stage's local indices
// (offsets: the layer counts of the chunks before, in (chunk, stage) order) and maps the
// optimizer state by parameter order (see above) or from distrib_optim.pt. Model weights
// come from fp32_from_fp16_params or distrib_optim.pt's 'param' where present (the fp32
// masters), else from the model dict (bf16/fp16 converted to fp32).
// Errors name the file and key: NotFound for a missing tracker, iteration dir or rank file
// (listing what is expected); DataLoss for a bad file (TorchFile::Open's errors), a
// missing or mistyped top-level entry, a shard whose shape disagrees with another's;
// InvalidArgument for a key outside the name map or an optimizer whose parameter count
// does not match the model's; DataLoss for a distrib_optim.pt whose buffers are not the
// coalesced format or not the length the model's layout gives.
absl::StatusOr<MegatronState> ReadMegatronCheckpoint(const std::string& load_dir,
                                                     std::optional<int64_t> iteration = {});

// WriteMegatronCheckpoint: writes `state` as a legacy checkpoint of `state.layout`: every
// mp_rank file (TP shards as Megatron splits them, layer keys local to each chunk, the
// spec's key spelling and _extra_state entries (None), routed experts of each EP rank,
// optimizer state by parameter order, or in distrib_optim.pt when args say
// use_distributed_optimizer for a dense model (one optimizer instance, no
// ddp_num_buckets), bf16 weights with fp32 masters when state.bf16) into
// <save_dir>/iter_{:07d}.tmp-torch-<pid>/, fsynced, then renamed to iter_{:07d} (an
// existing one is swapped out and removed) and the tracker replaced atomically. `args` is
// written with tensor/pipeline/expert_model_parallel_size set to the layout's.
// Errors: InvalidArgument for tensors that do not fit the layout (a split dimension not
// divisible, a name outside the map, layers outside the chunks); the file system's,
// naming the path.
absl::Status WriteMegatronCheckpoint(const std::string& save_dir, const MegatronState& state);

// MegatronRankDirName: "mp_rank_TT[_PPP][_EEE]" as get_checkpoint_name.
std::string MegatronRankDirName(int tp_rank, int pp_rank, int ep_rank, const MegatronLayout& layout);

}  // namespace mxmaca::actors::checkpoint::megatron

#endif  // MXMACA_ACTORS_CHECKPOINT_MEGATRON_MEGATRON_CHECKPOINT_H_
