// api/args/flag_rows.h: package-private helpers that spell the rows of the flag
// table (flag_table_*.cc) in one line each, and the shared notice reasons.
// Not part of the public API.
#ifndef MXMACA_API_ARGS_FLAG_ROWS_H_
#define MXMACA_API_ARGS_FLAG_ROWS_H_

#include <vector>

#include "api/args/flag_table.h"

namespace mxmaca::api::flag_rows {

inline constexpr FlagClass kImpl = FlagClass::kImplemented;
inline constexpr FlagClass kNote = FlagClass::kNotice;
inline constexpr FlagClass kUnsup = FlagClass::kUnsupported;
inline constexpr FlagType kStr = FlagType::kString;
inline constexpr FlagType kInt = FlagType::kInt;
inline constexpr FlagType kFloat = FlagType::kFloat;
inline constexpr FlagType kBoolT = FlagType::kBool;
inline constexpr FlagType kCustom = FlagType::kCustom;
inline constexpr FlagNargs kOne = FlagNargs::kOne;
inline constexpr FlagNargs kPlus = FlagNargs::kOneOrMore;
inline constexpr FlagNargs kStar = FlagNargs::kZeroOrMore;
inline constexpr FlagNargs kThree = FlagNargs::kThree;

// T: action='store_true' (default False unless `def` says otherwise).
constexpr FlagSpec T(const char* name, FlagClass cls, const char* reason = "",
                     const char* dest = "", const char* def = "False", const char* aliases = "") {
  return FlagSpec{name, aliases, dest, FlagAction::kStoreTrue, kOne, FlagType::kNone, def, "",
                  cls,  reason,  "",   FlagOrigin::kMegatron};
}

// F: action='store_false' with `dest` (default True); `aliases` are further option
// strings (the config dataclasses' booleans get "--no-x" and "--disable-x").
constexpr FlagSpec F(const char* name, const char* dest, FlagClass cls, const char* reason = "",
                     const char* aliases = "") {
  return FlagSpec{name, aliases, dest, FlagAction::kStoreFalse, kOne, FlagType::kNone, "True", "",
                  cls,  reason,  "",   FlagOrigin::kMegatron};
}

// B: action=argparse.BooleanOptionalAction (--x / --no-x).
constexpr FlagSpec B(const char* name, FlagClass cls, const char* reason = "",
                     const char* def = "False", const char* dest = "") {
  return FlagSpec{name, "",     dest, FlagAction::kBooleanOptional, kOne, FlagType::kNone, def, "",
                  cls,  reason, "",   FlagOrigin::kMegatron};
}

// V: a flag that takes a value (or a list with nargs '+'/'*').
constexpr FlagSpec V(const char* name, FlagType type, const char* def, FlagClass cls,
                     const char* reason = "", const char* choices = "", const char* dest = "",
                     FlagNargs nargs = kOne, const char* aliases = "") {
  return FlagSpec{name, aliases, dest, FlagAction::kStore,   nargs, type, def, choices,
                  cls,  reason,  "",   FlagOrigin::kMegatron};
}

// Removed: a flag of an earlier Megatron-LM that core_v0.19.0 no longer defines.
constexpr FlagSpec Removed(FlagSpec spec) {
  spec.origin = FlagOrigin::kMegatronRemoved;
  return spec;
}

// Ours: one of MXMACA's own flags (not Megatron's).
constexpr FlagSpec Ours(FlagSpec spec) {
  spec.origin = FlagOrigin::kMxmaca;
  return spec;
}

// Append: adds `rows` to `out` under Megatron's argument group `group`.
template <size_t N>
void Append(std::vector<FlagSpec>* out, const char* group, const FlagSpec (&rows)[N]) {
  for (const FlagSpec& row : rows) {
    out->push_back(row);
    out->back().group = group;
  }
}

// Reasons shown in "notice: --X is accepted and has no effect in MXMACA (<reason>)".
inline constexpr const char* kRKernel = "kernel and fusion choices are MXMACA's own";
inline constexpr const char* kRTe = "MXMACA does not use Transformer Engine";
inline constexpr const char* kRInference =
    "inference-only setting; `mxmaca train` does not read it";
inline constexpr const char* kRPython = "Python/PyTorch runtime setting";
inline constexpr const char* kRDeprecated = "deprecated; Megatron ignores it too";
inline constexpr const char* kRBackend =
    "MXMACA picks its transport (in-process, UCX or NCCL) itself";
inline constexpr const char* kRNvInternal = "NVIDIA-internal service";
inline constexpr const char* kRNotGpt =
    "used by Megatron's BERT/T5/ICT/vision models; pretrain_gpt ignores it too";
inline constexpr const char* kRWandb = "Weights & Biases logging is not available";
inline constexpr const char* kRTiming = "timings come from MXMACA's log line and --trace-file";
inline constexpr const char* kRProfile = "use --trace-file for MXMACA's timeline";
inline constexpr const char* kRMemory = "MXMACA manages memory with its own pools";
inline constexpr const char* kRCkptIo = "I/O tuning of Megatron's checkpoint writer";
inline constexpr const char* kRRetro = "tunes Retro, which MXMACA does not support";
inline constexpr const char* kRFp8 = "tunes FP8/FP4 training, which MXMACA does not support";
inline constexpr const char* kRRl = "tunes RL (GRPO) training, which MXMACA does not support";
inline constexpr const char* kRFsdp = "tunes FSDP, which MXMACA does not support";
inline constexpr const char* kRMuon = "tunes the Muon optimizer, which MXMACA does not support";
inline constexpr const char* kRMla = "tunes multi-latent attention, which MXMACA does not support";
inline constexpr const char* kRMamba = "tunes Mamba/hybrid models, not GPT";
inline constexpr const char* kRMtp = "tunes multi-token prediction, which MXMACA does not support";
inline constexpr const char* kRInproc = "tunes in-process restart, which MXMACA does not support";
inline constexpr const char* kRCudaGraph = "MXMACA captures CUDA graphs per stage itself";
inline constexpr const char* kRTpOverlap = "MXMACA schedules tensor-parallel communication itself";
inline constexpr const char* kRSchedule =
    "MXMACA's scheduler orders and overlaps pipeline work itself";
inline constexpr const char* kRDdp = "MXMACA buckets and reduces gradients (in fp32) itself";
inline constexpr const char* kRMoeComm =
    "MXMACA's expert actors dispatch tokens with their own all-to-all";
inline constexpr const char* kRRerun =
    "Megatron's rerun state machine (result validation) is not implemented";
inline constexpr const char* kROffload =
    "tunes Megatron's hybrid CPU offload; MXMACA's --optimizer-cpu-offload offloads all of it";
inline constexpr const char* kRFp16Scale =
    "dynamic loss scaling is for --fp16, which MXMACA does not support";
inline constexpr const char* kRNonPersistent =
    "tunes non-persistent checkpoints, which MXMACA does not support";
inline constexpr const char* kRReplication =
    "tunes checkpoint replication, which MXMACA does not support";
inline constexpr const char* kRTokenizer = "tunes a tokenizer MXMACA does not provide";
inline constexpr const char* kRStraggler = "straggler detection is Megatron's own tooling";
inline constexpr const char* kRWsd = "tunes the WSD schedule, which MXMACA does not support";
inline constexpr const char* kRModelopt =
    "tunes NVIDIA Model Optimizer (export, quantization, distillation), which MXMACA does not use";
inline constexpr const char* kRPrecisionOpt =
    "MXMACA keeps fp32 optimizer states and gradients (other dtypes not implemented)";

// The table, in pieces (each appends Megatron's groups in add_megatron_arguments order).
// flag_table_transformer.cc: transformer configuration (TransformerConfig's fields).
void AppendTransformerConfigGroup(std::vector<FlagSpec>* out);
// flag_table_training.cc: network size .. mixed precision.
void AppendTrainingGroups(std::vector<FlagSpec>* out);
// flag_table_system.cc: distributed init .. fault injector, kitchen, the flags 0.19
// removed, then MXMACA's own flags.
void AppendSystemGroups(std::vector<FlagSpec>* out);

}  // namespace mxmaca::api::flag_rows

#endif  // MXMACA_API_ARGS_FLAG_ROWS_H_
