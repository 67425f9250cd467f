// Tests for api/args/flag_table.h: the table is well formed, agrees with MegatronArgs,
// and matches Megatron's arguments.py on a sample of flags.
#include "api/args/flag_table.h"

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "api/args/megatron_args.h"

namespace mxmaca::api {
namespace {

TEST_CASE("every option string is unique, long, and in a group") {
  std::set<std::string> seen;
  for (const FlagSpec& flag : AllFlags()) {
    INFO(flag.name);
    CHECK(std::string(flag.group).size() > 0);
    for (const std::string& option : flag.OptionStrings()) {
      CHECK(option.rfind("--", 0) == 0);
      CHECK(option.find_first_of(" =") == std::string::npos);
      CHECK(seen.insert(option).second);
      bool negated = true;
      CHECK(FindFlag(option, &negated) == &flag);
    }
  }
  CHECK(FindFlag("--not-a-megatron-flag") == nullptr);
  // Megatron has about 580 flags at this commit; a truncated table would fail here.
  CHECK(AllFlags().size() > 550);
}

TEST_CASE("rows are consistent with their action and classification") {
  for (const FlagSpec& flag : AllFlags()) {
    INFO(flag.name);
    const bool takes_value = flag.action == FlagAction::kStore;
    CHECK(takes_value == (flag.type != FlagType::kNone));
    if (!takes_value) CHECK(flag.nargs == FlagNargs::kOne);
    if (flag.cls == FlagClass::kNotice) CHECK(std::string(flag.reason).size() > 0);
    if (flag.origin == FlagOrigin::kMxmaca) CHECK(flag.cls == FlagClass::kImplemented);
    for (const std::string& choice : flag.ChoiceList()) {
      int64_t unused = 0;
      if (flag.type == FlagType::kInt) CHECK(absl::SimpleAtoi(choice, &unused));
    }
  }
}

TEST_CASE("implemented flags and MegatronArgs fields correspond one to one") {
  std::set<std::string> implemented;
  for (const FlagSpec& flag : AllFlags()) {
    if (flag.cls == FlagClass::kImplemented) implemented.insert(MegatronArgsField(flag.Dest()));
  }
  const std::vector<std::string> bound_list = MegatronArgsBoundDests();
  const std::set<std::string> bound(bound_list.begin(), bound_list.end());
  for (const std::string& dest : implemented) {
    INFO("table dest without a field: " << dest);
    CHECK(bound.count(dest) == 1);
  }
  for (const std::string& dest : bound) {
    INFO("field without an implemented flag: " << dest);
    CHECK(implemented.count(dest) == 1);
  }
}

TEST_CASE("MegatronArgs defaults equal the table's Megatron defaults") {
  // The table's defaults were transcribed from arguments.py, the struct's written in
  // megatron_args.h: two independent transcriptions of the same source.
  const MegatronArgs defaults;
  // Where MXMACA's type differs from argparse's value by design, the equivalent repr.
  const std::map<std::string, std::string> equivalent = {
      // store_true with default=None: None and False both mean "not given".
      {"no_save_optim", "False"},
      {"no_save_rng", "False"},
      {"no_load_optim", "False"},
      {"no_load_rng", "False"},
      {"async_save", "False"},
      // nargs='*' lists: an empty vector stands for None.
      {"data_path", "[]"},
      {"train_data_path", "[]"},
      {"valid_data_path", "[]"},
      {"test_data_path", "[]"},
      // nargs='+' with a scalar default: kept as a one-element list.
      {"moe_aux_loss_coeff", "[0.0]"},
      {"moe_router_load_balancing_type", "['aux_loss']"},
      // type=moe_freq_type: kept as the text the user gave.
      {"moe_layer_freq", "'1'"},
      // CUDA-graph flags: unset (None) stands for Megatron's default, so that
      // api/train/device_setup.h can tell "not given" (graphs on with --device cuda) from
      // an explicit --cuda-graph-impl none.
      {"cuda_graph_impl", "None"},
      {"cuda_graph_scope", "[]"},  // nargs='+' since 0.19: an empty list stands for None
      {"cuda_graph_warmup_steps", "None"},
      // type=enum_type_handler: kept as the name typed; unset stands for Signals.SIGTERM.
      {"exit_signal", "None"},
      // nargs='+' list: empty stands for None (TikTokenizer's default three specials).
      {"tiktoken_special_tokens", "[]"},
  };
  for (const FlagSpec& flag : AllFlags()) {
    if (flag.cls != FlagClass::kImplemented) continue;
    const std::string dest = flag.Dest();
    INFO(flag.name << " dest " << dest);
    const std::optional<std::string> repr = MegatronArgRepr(defaults, dest);
    REQUIRE(repr.has_value());
    auto it = equivalent.find(MegatronArgsField(dest));
    CHECK(*repr == (it != equivalent.end() ? it->second : std::string(flag.megatron_default)));
  }
}

struct Expected {
  const char* option;
  const char* dest;
  FlagAction action;
  FlagType type;
  const char* megatron_default;
};

TEST_CASE("a sample of rows matches arguments.py at tag core_v0.19.0") {
  // Read by hand from megatron/training/arguments.py and the config dataclasses its
  // ArgumentGroupFactory turns into flags (NVIDIA/Megatron-LM core_v0.19.0; first read at
  // commit 000c4ac2, the rows 0.19 changed re-read): an independent check of the parser
  // dump that //api/args:flag_table_pin_test compares every row with. --norm-epsilon is
  // TransformerConfig.layernorm_epsilon (arg_names ["--norm-epsilon"]).
  const std::vector<Expected> sample = {
      {"--make-vocab-size-divisible-by", "make_vocab_size_divisible_by", FlagAction::kStore,
       FlagType::kInt, "128"},
      {"--norm-epsilon", "layernorm_epsilon", FlagAction::kStore, FlagType::kFloat, "1e-05"},
      {"--rotary-base", "rotary_base", FlagAction::kStore, FlagType::kInt, "10000"},
      {"--position-embedding-type", "position_embedding_type", FlagAction::kStore,
       FlagType::kString, "'learned_absolute'"},
      {"--num-query-groups", "num_query_groups", FlagAction::kStore, FlagType::kInt, "1"},
      {"--adam-eps", "adam_eps", FlagAction::kStore, FlagType::kFloat, "1e-08"},
      {"--weight-decay", "weight_decay", FlagAction::kStore, FlagType::kFloat, "0.01"},
      {"--disable-bias-linear", "add_bias_linear", FlagAction::kStoreFalse, FlagType::kNone,
       "True"},
      {"--no-check-for-nan-in-loss-and-grad", "check_for_nan_in_loss_and_grad",
       FlagAction::kStoreFalse, FlagType::kNone, "True"},
      {"--exit-duration-in-mins", "exit_duration_in_mins", FlagAction::kStore, FlagType::kInt,
       "None"},
      {"--no-save-optim", "no_save_optim", FlagAction::kStoreTrue, FlagType::kNone, "None"},
      {"--ckpt-format", "ckpt_format", FlagAction::kStore, FlagType::kString, "'torch_dist'"},
      {"--distributed-timeout-minutes", "distributed_timeout_minutes", FlagAction::kStore,
       FlagType::kInt, "10"},
      {"--num-workers", "num_workers", FlagAction::kStore, FlagType::kInt, "2"},
      {"--mid-level-dataset-surplus", "mid_level_dataset_surplus", FlagAction::kStore,
       FlagType::kFloat, "0.005"},
      {"--moe-router-topk", "moe_router_topk", FlagAction::kStore, FlagType::kInt, "2"},
      {"--fp8-format", "fp8", FlagAction::kStore, FlagType::kString, "None"},
      {"--inference-max-requests", "inference_max_requests", FlagAction::kStore, FlagType::kInt,
       "8"},
      {"--rl-partial-rollouts", "rl_partial_rollouts", FlagAction::kBooleanOptional,
       FlagType::kNone, "False"},
      {"--initial-loss-scale", "initial_loss_scale", FlagAction::kStore, FlagType::kFloat,
       "4294967296"},
  };
  for (const Expected& e : sample) {
    INFO(e.option);
    const FlagSpec* flag = FindFlag(e.option);
    REQUIRE(flag != nullptr);
    CHECK(flag->Dest() == e.dest);
    CHECK(flag->action == e.action);
    CHECK(flag->type == e.type);
    CHECK(std::string(flag->megatron_default) == e.megatron_default);
  }
  // Aliases and nargs.
  CHECK(FindFlag("--persistent-save-interval") == FindFlag("--save-interval"));
  CHECK(FindFlag("--override-opt-param-scheduler") == FindFlag("--override-opt_param-scheduler"));
  CHECK(FindFlag("--data-path")->nargs == FlagNargs::kZeroOrMore);
  CHECK(FindFlag("--moe-aux-loss-coeff")->nargs == FlagNargs::kOneOrMore);
  bool negated = false;
  CHECK(FindFlag("--no-rl-partial-rollouts", &negated) == FindFlag("--rl-partial-rollouts"));
  CHECK(negated);
  CHECK(FindFlag("--lr-decay-style")->ChoiceList() ==
        std::vector<std::string>{"constant", "linear", "cosine", "inverse-square-root", "WSD"});
}

}  // namespace
}  // namespace mxmaca::api
