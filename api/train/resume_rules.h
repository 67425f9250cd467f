// api/train/resume_rules.h: what `mxmaca train --load` restores, as Megatron's
// checkpointing and OptimizerParamScheduler do (read at core_v0.19.0):
// megatron/training/checkpointing.py (_load_base_checkpoint, load_checkpoint,
// load_args_from_checkpoint, save_checkpoint's non-persistent branch) and
// megatron/core/optimizer_param_scheduler.py (state_dict, load_state_dict, _check_and_set).
//
// Which checkpoint: the tracker's latest in --load, or --ckpt-step N; with
// --non-persistent-ckpt-type, the non-persistent checkpoint when it is at least as new.
// What is restored: weights always; unless --finetune the iteration, consumed samples and
// (unless --no-load-optim) the Adam state and the scheduler (unless --no-load-rng) the RNG
// seed. The scheduler's stored schedule must equal the flags' unless
// --override-opt_param-scheduler (flags win) or --use-checkpoint-opt_param-scheduler
// (checkpoint wins); its step count (samples) is restored either way.
#ifndef MXMACA_API_TRAIN_RESUME_RULES_H_
#define MXMACA_API_TRAIN_RESUME_RULES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/args/megatron_args.h"
#include "layers/lr_schedule.h"

namespace mxmaca::api {

// CheckResumeArgs: the checkpointing flags' rules, before anything is built: Megatron's
// validate_args asserts (--non-persistent-ckpt-type global|local; local needs
// --non-persistent-local-ckpt-dir; --use-checkpoint-args needs --load and not the local
// type), plus: --non-persistent-save-interval >= 1 needs --non-persistent-ckpt-type (else
// Megatron fails at the first such save), --ckpt-step >= 0, and the local type runs in
// one process only (`multi_process`: its shards would be on other nodes). InvalidArgument
// / Unimplemented naming the flag and value.
absl::Status CheckResumeArgs(const MegatronArgs& a, bool multi_process);

// NonPersistentDir: where non-persistent checkpoints of `base` (--save for saving, --load
// for loading) live: --non-persistent-global-ckpt-dir or <base>/non_persistent for the
// global type, --non-persistent-local-ckpt-dir for the local type; nullopt without
// --non-persistent-ckpt-type (or without `base` and a directory flag).
std::optional<std::string> NonPersistentDir(const MegatronArgs& a,
                                            const std::optional<std::string>& base);

// CheckpointToLoad: the checkpoint a run loads.
struct CheckpointToLoad {
  std::string dir;        // the directory holding iter_{:07d}
  int64_t iteration = 0;  // which one
  bool non_persistent = false;
};

// LocateCheckpoint: Megatron's _load_base_checkpoint choice for --load: iteration = the
// tracker's (or --ckpt-step); a non-persistent checkpoint (NonPersistentDir's tracker)
// whose iteration is >= that one wins. nullopt: nothing to load (no --load, or neither a
// tracker nor --ckpt-step). `notices` gets Megatron's warnings. Errors: a garbled tracker
// (DataLoss naming the file).
absl::StatusOr<std::optional<CheckpointToLoad>> LocateCheckpoint(
    const MegatronArgs& a, std::vector<std::string>* notices);

// RestoredScheduler: the schedule to run with and the step count to restore.
struct RestoredScheduler {
  layers::OptimizerParamSchedulerConfig config;
  int64_t num_steps = 0;
};

// RestoreSchedulerState: OptimizerParamScheduler.load_state_dict on `stored` (a
// checkpoint's state.opt_param_scheduler: Megatron's state_dict keys, plus MXMACA's
// decoupled_lr / decoupled_min_lr) against `flags` (SchedulerConfigFromArgs(a)).
// For max_lr, min_lr, lr_warmup_steps, lr_decay_steps, lr_decay_style and, when stored,
// start_wd, end_wd, wd_incr_steps, wd_incr_style, decoupled_lr, decoupled_min_lr, in that
// order (_check_and_set): --override-opt_param-scheduler keeps the flag's value,
// --use-checkpoint-opt_param-scheduler takes the checkpoint's, and otherwise a difference
// is InvalidArgument naming the key, the flags that give it, the flag's value and the
// checkpoint's ("--lr-decay-iters x --global-batch-size gives lr_decay_steps 64 (samples)
// but the checkpoint in DIR has 32; ..."). num_steps is always the checkpoint's. Values
// compare exactly, as Megatron's assert does. `log` gets Megatron's " > overriding ..." /
// " > using checkpoint value ..." lines. Errors: DataLoss for a missing or mistyped key.
absl::StatusOr<RestoredScheduler> RestoreSchedulerState(
    const nlohmann::json& stored, const layers::OptimizerParamSchedulerConfig& flags,
    const MegatronArgs& a, const std::string& dir, std::vector<std::string>* log);

// LoadArgsFromCheckpoint: --use-checkpoint-args: locates the checkpoint as LocateCheckpoint
// does and applies its arguments to `a` (checkpoint_args.h ApplyCheckpointArgs), printing
// Megatron's lines; nothing to load leaves `a` as it is ("Checkpoint not found to provide
// arguments, using provided arguments."). Call before ValidateAndDeriveArgs.
absl::Status LoadArgsFromCheckpoint(MegatronArgs* a, std::vector<std::string>* log);

}  // namespace mxmaca::api

#endif  // MXMACA_API_TRAIN_RESUME_RULES_H_
