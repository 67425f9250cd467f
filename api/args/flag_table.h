// api/args/flag_table.h: the table of every flag `mxmaca train` recognises.
//
// One row per argparse action of the parser Megatron-LM's `add_megatron_arguments`
// (megatron/training/arguments.py) builds at tag core_v0.19.0: its `_add_*_args` groups and
// the groups `ArgumentGroupFactory` generates from the config dataclasses
// (TransformerConfig, TrainingConfig, LoggerConfig, ...); `pretrain_gpt.py` sets
// `args_defaults={'tokenizer_type': 'GPT2BPETokenizer'}` and adds the "modelopt-generic"
// group when NVIDIA Model Optimizer is installed ("kitchen" needs NVIDIA Kitchen). Then the
// flags of earlier Megatron-LM versions that 0.19 removed (origin kMegatronRemoved,
// accepted so older scripts run) and MXMACA's own flags (origin kMxmaca). Each row
// records Megatron's option strings, argparse action, nargs, type, default (as Python
// prints it) and choices, and our classification of the flag.
// api/args/testdata/megatron_core_v0.19.0_flags.json is the dump of Megatron's parser
// these rows are checked against (//api/args:flag_table_pin_test); docs/FLAGS.md is
// generated from this table (`bazel run //api/args:flags_doc`).
#ifndef MXMACA_API_ARGS_FLAG_TABLE_H_
#define MXMACA_API_ARGS_FLAG_TABLE_H_

#include <string>
#include <string_view>
#include <vector>

namespace mxmaca::api {

// FlagAction: argparse's `action`.
enum class FlagAction {
  kStore,            // takes a value (or a list, see FlagNargs)
  kStoreTrue,        // --x sets dest = True
  kStoreFalse,       // --x sets dest = False
  kBooleanOptional,  // argparse.BooleanOptionalAction: --x sets True, --no-x False
};

// FlagNargs: argparse's `nargs` for kStore.
enum class FlagNargs {
  kOne,         // exactly one value (no nargs)
  kOneOrMore,   // nargs='+'
  kZeroOrMore,  // nargs='*'
  kThree,       // nargs=3: exactly three values (--rampup-batch-size)
};

// FlagType: argparse's `type` for each value.
enum class FlagType {
  kNone,    // store_true / store_false: no value
  kString,  // str (or no type)
  kInt,     // int: the whole value must parse ("12x" is an error)
  kFloat,   // float: the whole value must parse
  kBool,    // type=bool (Python's bool(str): any non-empty string is True)
  kCustom,  // a Megatron callable (moe_freq_type, tuple_type, AttnBackend[...]):
            // kept as text, checked by the code that uses it
};

// FlagClass: what MXMACA does with the flag.
enum class FlagClass {
  kImplemented,  // parsed into MegatronArgs and honoured
  kNotice,       // accepted; prints "notice: --X is accepted and has no effect in
                 // MXMACA (<reason>)"
  kUnsupported,  // an error: "--X is a Megatron flag MXMACA does not support yet"
};

// FlagOrigin: whose flag it is.
enum class FlagOrigin {
  kMegatron,         // Megatron-LM core_v0.19.0 defines it
  kMegatronRemoved,  // an earlier Megatron-LM defined it; core_v0.19.0 no longer does
  kMxmaca,           // MXMACA's own
};

// FlagSpec: one flag (one `add_argument` call).
struct FlagSpec {
  const char* name;     // primary option string, e.g. "--num-layers"
  const char* aliases;  // further option strings, space-separated ("" = none)
  const char* dest;     // argparse dest ("" = derived from name: strip "--",
                        // '-' -> '_'); use Dest() to read it
  FlagAction action;
  FlagNargs nargs;
  FlagType type;
  const char* megatron_default;  // Python repr of Megatron's default ("None", "1", ...)
  const char* choices;           // allowed values, space-separated ("" = any)
  FlagClass cls;
  const char* reason;  // kNotice: why it has no effect; kUnsupported: note
  const char* group;   // Megatron's argument group title (set by AllFlags)
  FlagOrigin origin;

  // Dest: `dest`, or the name with "--" stripped and '-' replaced by '_'.
  std::string Dest() const;
  // OptionStrings: name, then the aliases; for kBooleanOptional also "--no-<name>".
  std::vector<std::string> OptionStrings() const;
  // ChoiceList: `choices` split on spaces (empty = any value).
  std::vector<std::string> ChoiceList() const;
};

// AllFlags: the whole table, Megatron's groups in `add_megatron_arguments` order and
// then MXMACA's own flags. Built once; never changes afterwards.
const std::vector<FlagSpec>& AllFlags();

// FindFlag: the row one of whose OptionStrings() equals `option` (e.g. "--lr" or
// "--no-rl-partial-rollouts"), or nullptr. `*negated` (if given) is set true when
// `option` is the "--no-" form of a kBooleanOptional flag.
const FlagSpec* FindFlag(std::string_view option, bool* negated = nullptr);

// AllOptionStrings: every option string of every row (for did-you-mean).
std::vector<std::string> AllOptionStrings();

// FlagClassName / FlagActionName / FlagTypeName / FlagNargsName: short names used in
// docs/FLAGS.md ("implemented", "store_true", "int", "+", ...).
const char* FlagClassName(FlagClass c);
const char* FlagActionName(FlagAction a);
const char* FlagTypeName(FlagType t);
const char* FlagNargsName(FlagNargs n);

}  // namespace mxmaca::api

#endif  // MXMACA_API_ARGS_FLAG_TABLE_H_
