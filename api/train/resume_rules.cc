// api/train/resume_rules.cc: see resume_rules.h.
#include "api/train/resume_rules.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "actors/checkpoint/checkpoint_reader.h"
#include "actors/checkpoint/checkpoint_retention.h"
#include "actors/checkpoint/megatron/megatron_checkpoint.h"
#include "api/train/checkpoint_args.h"
#include "api/train/megatron_format.h"
#include "base/status_macros.h"

namespace mxmaca::api {
namespace {

std::string Show(const nlohmann::json& v) {
  if (v.is_null()) return "None";
  return v.dump();
}

// The flags that give each stored scheduler key (Megatron's get_optimizer_param_scheduler).
std::string FlagsOf(const std::string& key, const MegatronArgs& a) {
  const bool iters = a.train_iters.has_value();
  if (key == "max_lr") return "--lr";
  if (key == "min_lr") return "--min-lr";
  if (key == "lr_warmup_steps") {
    if (a.lr_warmup_fraction) return "--lr-warmup-fraction x the decay samples";
    return iters ? "--lr-warmup-iters x --global-batch-size" : "--lr-warmup-samples";
  }
  if (key == "lr_decay_steps") {
    return iters ? "--lr-decay-iters (default --train-iters) x --global-batch-size"
                 : "--lr-decay-samples (default --train-samples)";
  }
  if (key == "lr_decay_style") return "--lr-decay-style";
  if (key == "start_wd") return "--start-weight-decay (default --weight-decay)";
  if (key == "end_wd") return "--end-weight-decay (default --weight-decay)";
  if (key == "wd_incr_steps") {
    return iters ? "--train-iters x --global-batch-size" : "--train-samples";
  }
  if (key == "wd_incr_style") return "--weight-decay-incr-style";
  if (key == "decoupled_lr") return "--decoupled-lr";
  if (key == "decoupled_min_lr") return "--decoupled-min-lr";
  return key;
}

// Megatron's _check_and_set names (the log lines).
const char* MegatronName(const std::string& key) {
  if (key == "max_lr") return "learning rate";
  if (key == "min_lr") return "minimum learning rate";
  if (key == "lr_warmup_steps") return "warmup iterations";
  if (key == "lr_decay_steps") return "total number of iterations";
  if (key == "lr_decay_style") return "learning rate decay style";
  if (key == "start_wd") return "start weight decay";
  if (key == "end_wd") return "end weight decay";
  if (key == "wd_incr_steps") return "total number of weight decay iterations";
  if (key == "wd_incr_style") return "weight decay incr style";
  if (key == "decoupled_lr") return "decoupled learning rate";
  return "decoupled minimum learning rate";
}

// CheckAndSet: _check_and_set for one key; `flag` is the flags' value, `stored` the
// checkpoint's (same JSON type, null for None). Returns the value to use.
absl::StatusOr<nlohmann::json> CheckAndSet(const std::string& key, const nlohmann::json& flag,
                                           const nlohmann::json& stored, const MegatronArgs& a,
                                           const std::string& dir,
                                           std::vector<std::string>* log) {
  if (a.override_opt_param_scheduler) {
    log->push_back(absl::StrCat(" > overriding ", MegatronName(key), " value to ", Show(flag)));
    return flag;
  }
  const bool number = flag.is_number() && stored.is_number();
  const bool equal = number ? flag.get<double>() == stored.get<double>() : flag == stored;
  if (!a.use_checkpoint_opt_param_scheduler && !equal) {
    const bool steps = key.size() > 6 && key.compare(key.size() - 6, 6, "_steps") == 0;
    return absl::InvalidArgumentError(absl::StrCat(
        FlagsOf(key, a), " gives ", key, " ", Show(flag), steps ? " (samples)" : "",
        " but the checkpoint in ", dir, " has ", Show(stored),
        " (Megatron's OptimizerParamScheduler: class input value and checkpoint value for ",
        MegatronName(key), " do not match); pass --override-opt_param-scheduler to train "
        "with the flags' schedule or --use-checkpoint-opt_param-scheduler to continue the "
        "checkpoint's"));
  }
  log->push_back(
      absl::StrCat(" > using checkpoint value ", Show(stored), " for ", MegatronName(key)));
  return stored;
}

nlohmann::json Optional(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

}  // namespace

absl::Status CheckResumeArgs(const MegatronArgs& a, bool multi_process) {
  if (a.non_persistent_ckpt_type && *a.non_persistent_ckpt_type != "global" &&
      *a.non_persistent_ckpt_type != "local") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--non-persistent-ckpt-type ", *a.non_persistent_ckpt_type,
        ": expected global or local (Megatron: currently only global and local checkpoints "
        "are supported)"));
  }
  const bool local = a.non_persistent_ckpt_type.value_or("") == "local";
  if (local && !a.non_persistent_local_ckpt_dir) {
    return absl::InvalidArgumentError(
        "--non-persistent-ckpt-type local needs --non-persistent-local-ckpt-dir");
  }
  if (local && multi_process) {
    return absl::UnimplementedError(
        "--non-persistent-ckpt-type local runs in one process only (a multi-process job's "
        "shards would be on each node's local disk); use --non-persistent-ckpt-type global");
  }
  if (a.non_persistent_save_interval) {
    if (*a.non_persistent_save_interval < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--non-persistent-save-interval ", *a.non_persistent_save_interval,
          ": expected >= 1"));
    }
    if (!a.non_persistent_ckpt_type) {
      return absl::InvalidArgumentError(
          "--non-persistent-save-interval needs --non-persistent-ckpt-type global or local");
    }
  }
  if (a.ckpt_step && *a.ckpt_step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ckpt-step ", *a.ckpt_step, ": expected an iteration >= 0"));
  }
  if (a.use_checkpoint_args) {
    if (!a.load) {
      return absl::InvalidArgumentError("--use-checkpoint-args requires --load");
    }
    if (local) {
      return absl::InvalidArgumentError(
          "--use-checkpoint-args is not supported with --non-persistent-ckpt-type local");
    }
  }
  return absl::OkStatus();
}

std::optional<std::string> NonPersistentDir(const MegatronArgs& a,
                                            const std::optional<std::string>& base) {
  if (!a.non_persistent_ckpt_type) return std::nullopt;
  if (*a.non_persistent_ckpt_type == "local") return a.non_persistent_local_ckpt_dir;
  if (a.non_persistent_global_ckpt_dir) return a.non_persistent_global_ckpt_dir;
  if (!base) return std::nullopt;
  return *base + "/non_persistent";
}

absl::StatusOr<std::optional<CheckpointToLoad>> LocateCheckpoint(
    const MegatronArgs& a, std::vector<std::string>* notices) {
  if (!a.load) return std::optional<CheckpointToLoad>();
  int64_t np_iteration = -1;
  const std::optional<std::string> np_dir = NonPersistentDir(a, a.load);
  if (np_dir) {
    MXMACA_ASSIGN_OR_RETURN(std::optional<int64_t> it,
                            actors::checkpoint::ReadTrackerIteration(*np_dir));
    if (it) {
      np_iteration = *it;
    } else {
      notices->push_back(absl::StrCat(" WARNING: could not find the metadata file ", *np_dir,
                                      "/latest_checkpointed_iteration.txt"));
      notices->push_back("    will not load any non-persistent checkpoint");
    }
  }
  MXMACA_ASSIGN_OR_RETURN(std::optional<int64_t> tracker,
                          actors::checkpoint::ReadTrackerIteration(*a.load));
  int64_t iteration = tracker.value_or(-1);
  if (a.ckpt_step) iteration = *a.ckpt_step;  // --ckpt-step: that iteration instead
  if (np_iteration != -1) {
    if (np_iteration >= iteration) {
      notices->push_back(absl::StrCat(
          " loading from a non-persistent checkpoint (non-persistent iter ", np_iteration, ")"));
      return std::optional<CheckpointToLoad>(CheckpointToLoad{*np_dir, np_iteration, true});
    }
    notices->push_back(
        " WARNING: non-persistent checkpoints are older than persistent checkpoint");
  }
  if (iteration == -1) return std::optional<CheckpointToLoad>();
  return std::optional<CheckpointToLoad>(CheckpointToLoad{*a.load, iteration, false});
}

absl::StatusOr<RestoredScheduler> RestoreSchedulerState(
    const nlohmann::json& stored, const layers::OptimizerParamSchedulerConfig& flags,
    const MegatronArgs& a, const std::string& dir, std::vector<std::string>* log) {
  RestoredScheduler out;
  out.config = flags;
  layers::OptimizerParamSchedulerConfig& c = out.config;
  if (!stored.is_object()) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint ", dir, "/metadata.json state.opt_param_scheduler is not an object"));
  }
  try {
    auto number = [&](const char* key, double flag) -> absl::StatusOr<double> {
      MXMACA_ASSIGN_OR_RETURN(nlohmann::json v,
                              CheckAndSet(key, flag, stored.at(key), a, dir, log));
      return v.get<double>();
    };
    auto steps = [&](const char* key, int64_t flag) -> absl::StatusOr<int64_t> {
      MXMACA_ASSIGN_OR_RETURN(nlohmann::json v,
                              CheckAndSet(key, flag, stored.at(key), a, dir, log));
      return v.get<int64_t>();
    };
    MXMACA_ASSIGN_OR_RETURN(c.max_lr, number("max_lr", flags.max_lr));
    MXMACA_ASSIGN_OR_RETURN(c.min_lr, number("min_lr", flags.min_lr));
    MXMACA_ASSIGN_OR_RETURN(c.lr_warmup_steps, steps("lr_warmup_steps", flags.lr_warmup_steps));
    MXMACA_ASSIGN_OR_RETURN(c.lr_decay_steps, steps("lr_decay_steps", flags.lr_decay_steps));
    if (stored.contains("lr_decay_style")) {  // MXMACA checkpoints before 2026-12 lack it
      MXMACA_ASSIGN_OR_RETURN(
          nlohmann::json style,
          CheckAndSet("lr_decay_style", layers::LrDecayStyleName(flags.lr_decay_style),
                      stored.at("lr_decay_style"), a, dir, log));
      MXMACA_ASSIGN_OR_RETURN(c.lr_decay_style,
                              layers::ParseLrDecayStyle(style.get<std::string>()));
    }
    out.num_steps = stored.at("num_steps").get<int64_t>();
    if (stored.contains("start_wd")) {
      MXMACA_ASSIGN_OR_RETURN(c.start_wd, number("start_wd", flags.start_wd));
      MXMACA_ASSIGN_OR_RETURN(c.end_wd, number("end_wd", flags.end_wd));
      MXMACA_ASSIGN_OR_RETURN(c.wd_incr_steps, steps("wd_incr_steps", flags.wd_incr_steps));
      MXMACA_ASSIGN_OR_RETURN(
          nlohmann::json style,
          CheckAndSet("wd_incr_style", layers::WdIncrStyleName(flags.wd_incr_style),
                      stored.at("wd_incr_style"), a, dir, log));
      MXMACA_ASSIGN_OR_RETURN(c.wd_incr_style,
                              layers::ParseWdIncrStyle(style.get<std::string>()));
    }
    if (stored.contains("decoupled_lr")) {
      for (const char* key : {"decoupled_lr", "decoupled_min_lr"}) {
        const bool max = std::string(key) == "decoupled_lr";
        std::optional<double>& field = max ? c.decoupled_lr : c.decoupled_min_lr;
        MXMACA_ASSIGN_OR_RETURN(
            nlohmann::json v, CheckAndSet(key, Optional(max ? flags.decoupled_lr
                                                            : flags.decoupled_min_lr),
                                          stored.value(key, nlohmann::json()), a, dir, log));
        field = v.is_null() ? std::nullopt : std::optional<double>(v.get<double>());
      }
    } else if (flags.decoupled_lr && !a.override_opt_param_scheduler &&
               !a.use_checkpoint_opt_param_scheduler) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--decoupled-lr gives decoupled_lr ", *flags.decoupled_lr, " but the checkpoint in ",
          dir, " has None (it was written before MXMACA stored the decoupled group); pass "
          "--override-opt_param-scheduler to train with the flags' schedule"));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint ", dir, "/metadata.json state.opt_param_scheduler: ", e.what()));
  }
  if (out.num_steps < 0) {
    return absl::DataLossError(absl::StrCat("checkpoint ", dir,
                                            " state.opt_param_scheduler.num_steps is ",
                                            out.num_steps, ": expected >= 0"));
  }
  return out;
}

absl::Status LoadArgsFromCheckpoint(MegatronArgs* a, std::vector<std::string>* log) {
  MXMACA_ASSIGN_OR_RETURN(std::optional<CheckpointToLoad> where, LocateCheckpoint(*a, log));
  if (!where) {
    log->push_back("Checkpoint not found to provide arguments, using provided arguments.");
    return absl::OkStatus();
  }
  if (actors::checkpoint::megatron::IsMegatronLegacyCheckpoint(*a->load)) {
    // A Megatron legacy checkpoint: its 'args' namespace (no tensor is read).
    MXMACA_ASSIGN_OR_RETURN(const nlohmann::json stored, MegatronCheckpointArgsJson(*a->load));
    MXMACA_ASSIGN_OR_RETURN(std::vector<std::string> lines, ApplyCheckpointArgs(stored, a));
    for (std::string& line : lines) log->push_back(std::move(line));
    return absl::OkStatus();
  }
  MXMACA_ASSIGN_OR_RETURN(
      actors::checkpoint::CheckpointReader reader,
      actors::checkpoint::CheckpointReader::Open(where->dir, where->iteration));
  MXMACA_ASSIGN_OR_RETURN(std::vector<std::string> lines, ApplyCheckpointArgs(reader.args(), a));
  for (std::string& line : lines) log->push_back(std::move(line));
  return absl::OkStatus();
}

}  // namespace mxmaca::api
